package supervisor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/waitfor"
	"golang.org/x/sys/unix"
)

// A service under SyscallsNetworkService cannot mount, make a user
// namespace (unshare, or clone with CLONE_NEWUSER as unshare -U does), or
// load a module, even as root; it still forks and runs programs. A root
// service without the filter mounts the same file system: what the filter
// takes away, and not some missing privilege of the test's.
func TestSyscallFilterRefusesKernelAdministration(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the unfiltered service must be able to mount")
	}
	for _, tool := range []string{"unshare", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here: %v", tool, err)
		}
	}
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "report"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	for _, name := range []string{"filtered", "open"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	probe := func(name string) string {
		m := filepath.Join(dir, name)
		return `r() { echo "` + name + ` $1 $2" >&3; }
grep '^Seccomp:' /proc/self/status | sed 's/^/` + name + ` /' >&3
if mount -t tmpfs none ` + m + ` 2>/dev/null; then r mount ok; umount ` + m + `; else r mount refused; fi
if unshare -U true 2>/dev/null; then r userns ok; else r userns refused; fi
if unshare -n true 2>/dev/null; then r netns ok; else r netns refused; fi
if (true) && /bin/true; then r fork ok; else r fork refused; fi
r done .; sleep 60`
	}
	filtered := sh("filtered", probe("filtered"))
	filtered.Syscalls = SyscallsNetworkService
	filtered.ExtraFiles = []*os.File{out}
	open := sh("open", probe("open"))
	open.ExtraFiles = []*os.File{out}
	start(t, Config{Services: []Service{filtered, open}})
	read := func() string { b, _ := os.ReadFile(out.Name()); return string(b) }
	waitfor.Cond(t, 20*time.Second, "both services' reports", func() bool {
		return strings.Contains(read(), "filtered done") && strings.Contains(read(), "open done")
	})
	got := read()
	for _, want := range []string{"filtered Seccomp:\t2", "filtered mount refused", "filtered userns refused",
		"filtered netns refused", "filtered fork ok", "open Seccomp:\t0", "open mount ok", "open netns ok", "open fork ok"} {
		if !strings.Contains(got, want) {
			t.Errorf("the services wrote:\n%s\nwant %q", got, want)
		}
	}
}

// The filter's program: every denied call is refused, with EPERM, and the
// jumps land where they should; calls of another ABI are refused whole.
// Run by a BPF interpreter of the test's (the kernel's is the one above).
func TestSyscallFilterProgram(t *testing.T) {
	p, err := SyscallsNetworkService.program()
	if err != nil {
		t.Fatal(err)
	}
	eperm := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	for _, nr := range deniedSyscalls {
		if got := runFilter(t, p, auditArch, uint32(nr), 0); got != eperm {
			t.Errorf("syscall %d: %#x, want EPERM", nr, got)
		}
	}
	for _, c := range []struct {
		name     string
		arch, nr uint32
		arg0     uint64
		want     uint32
	}{
		{"read", auditArch, unix.SYS_READ, 0, allow},
		{"socket", auditArch, unix.SYS_SOCKET, 0, allow},
		{"clone a thread", auditArch, unix.SYS_CLONE, unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND, allow},
		{"clone a user namespace", auditArch, unix.SYS_CLONE, unix.CLONE_NEWUSER | uint64(unix.SIGCHLD), eperm},
		{"clone a network namespace", auditArch, unix.SYS_CLONE, unix.CLONE_NEWNET, eperm},
		{"clone3", auditArch, unix.SYS_CLONE3, 0, uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))},
		{"another ABI", auditArch ^ 1, unix.SYS_READ, 0, eperm},
	} {
		if got := runFilter(t, p, c.arch, c.nr, c.arg0); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
	if x32Bit != 0 {
		if got := runFilter(t, p, auditArch, x32Bit|unix.SYS_READ, 0); got != eperm {
			t.Errorf("an x32 read: %#x, want EPERM", got)
		}
	}
}

// runFilter interprets the classic BPF subset program uses over one
// struct seccomp_data.
func runFilter(t *testing.T, p []unix.SockFilter, arch, nr uint32, arg0 uint64) uint32 {
	t.Helper()
	var a uint32
	for pc := 0; pc < len(p); pc++ {
		in := p[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			switch in.K {
			case offNr:
				a = nr
			case offArch:
				a = arch
			case offArg0:
				a = uint32(arg0)
			default:
				t.Fatalf("load of offset %d", in.K)
			}
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var taken bool
			switch in.Code &^ (unix.BPF_JMP | unix.BPF_K) {
			case unix.BPF_JEQ:
				taken = a == in.K
			case unix.BPF_JGE:
				taken = a >= in.K
			case unix.BPF_JSET:
				taken = a&in.K != 0
			}
			if taken {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("instruction %d: code %#x", pc, in.Code)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}
