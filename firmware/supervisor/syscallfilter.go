package supervisor

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A service that parses what the network sends (iked, netd, the web UI)
// runs under a seccomp filter, SyscallFilter, on top of its user, its
// capabilities and no_new_privs. Those already refuse it what needs
// privilege; the filter takes away what any process may ask of the kernel
// and these never need: the code paths a kernel exploit starts from
// (unprivileged user namespaces, bpf, userfaultfd, io_uring, keyrings,
// perf events, ptrace of a sibling) and the administration calls (mount,
// modules, kexec, reboot, swap). A refused call fails with EPERM (ENOSYS
// for clone3, so a C library falls back to clone, which is checked); the
// process lives on and says what failed, as a refused capability would.
//
// The filter is a deny list, not an allow list: the Go runtime, the
// netlink and nftables libraries and the DHCP and NTP clients use many
// calls, different on 386 and amd64 and between Go versions, and a call
// missing from an allow list would kill a service in the field on the
// first path no test took. Calls of another architecture (the x32 ABI on
// amd64, 32-bit int 0x80 calls) are refused as a whole.
//
// Like no_new_privs, a filter belongs to a thread and a forked child
// copies it: forkExecNoNewPrivs installs it on its own thread, which no
// other code runs on again.

// SyscallFilter is a service's seccomp policy.
type SyscallFilter int

const (
	// SyscallsAll applies no filter: PID 1's helpers that mount, and
	// services that run as root.
	SyscallsAll SyscallFilter = iota
	// SyscallsNetworkService refuses deniedSyscalls and new user,
	// mount, PID, network... namespaces.
	SyscallsNetworkService
)

func (f SyscallFilter) String() string {
	switch f {
	case SyscallsAll:
		return "all system calls"
	case SyscallsNetworkService:
		return "network service filter"
	}
	return fmt.Sprintf("SyscallFilter(%d)", int(f))
}

// namespaceFlags are the clone flags that make new namespaces: clone with
// any of them is refused (unshare and setns are refused whole).
const namespaceFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// The layout of struct seccomp_data the filter reads.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // low 32 bits on little-endian x86
)

// program builds the classic BPF program of f, nil for SyscallsAll.
func (f SyscallFilter) program() ([]unix.SockFilter, error) {
	switch f {
	case SyscallsAll:
		return nil, nil
	case SyscallsNetworkService:
	default:
		return nil, fmt.Errorf("unknown syscall filter %d", int(f))
	}
	if auditArch == 0 {
		return nil, errors.New("no seccomp filter for this architecture")
	}
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
	}
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jst = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	eperm := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	enosys := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	allow := uint32(unix.SECCOMP_RET_ALLOW)

	// Layout: arch check; nr; the x32 check; clone3; clone's flags; one
	// jump per denied call to the EPERM return at the end.
	var p []unix.SockFilter
	p = append(p,
		stmt(ld, offArch),
		jump(jeq, auditArch, 1, 0),
		stmt(ret, eperm), // another ABI: refused whole
		stmt(ld, offNr),
	)
	if x32Bit != 0 {
		p = append(p, jump(jge, x32Bit, 0, 1), stmt(ret, eperm))
	}
	p = append(p,
		jump(jeq, unix.SYS_CLONE3, 0, 1), stmt(ret, enosys),
		// clone: refuse new namespaces, allow threads and forks.
		jump(jeq, unix.SYS_CLONE, 0, 4),
		stmt(ld, offArg0),
		jump(jst, namespaceFlags, 0, 1),
		stmt(ret, eperm),
		stmt(ret, allow),
	)
	n := len(deniedSyscalls)
	for i, nr := range deniedSyscalls {
		// Match: jump over the remaining tests and the allow, to EPERM.
		toDeny := n - 1 - i + 1
		if toDeny > 255 {
			return nil, errors.New("syscall filter too long for its jumps")
		}
		p = append(p, jump(jeq, uint32(nr), uint8(toDeny), 0))
	}
	p = append(p, stmt(ret, allow), stmt(ret, eperm))
	return p, nil
}

// install puts f on the calling thread (which must be locked to it, with
// no_new_privs already set). Children forked from the thread inherit it.
func (f SyscallFilter) install() error {
	p, err := f.program()
	if err != nil || p == nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(p)), Filter: &p[0]}
	if _, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER, %v): %w", f, errno)
	}
	return nil
}
