package supervisor

import (
	"fmt"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Every service runs with no_new_privs (prctl PR_SET_NO_NEW_PRIVS): no
// execve of a set-user-ID or file-capability binary gives it or its
// children more than it has, whatever a compromised service finds or
// writes. The flag cannot be cleared once set, and it is inherited
// across fork and execve.
//
// syscall.SysProcAttr has no field for it, and the flag belongs to a
// thread, not a process: forkExecNoNewPrivs sets it on a thread of its
// own, forks from that thread (Go forks from the calling thread, and the
// child copies its flags), and never gives the thread back. A goroutine
// that ends while locked to its thread takes the thread with it, so PID 1
// and the rest of its threads never carry the flag (the main thread, if
// the goroutine ran there, is parked for good rather than ended; no Go
// code runs on it again).
//
// The same thread takes the service's seccomp filter (syscallfilter.go),
// which the child copies in the same way.
func forkExecNoNewPrivs(path string, argv []string, attr *syscall.ProcAttr, filter SyscallFilter) (int, error) {
	type result struct {
		pid int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // and never unlocked: see above
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			done <- result{err: fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)}
			return
		}
		if err := filter.install(); err != nil {
			done <- result{err: err}
			return
		}
		pid, err := syscall.ForkExec(path, argv, attr)
		done <- result{pid, err}
	}()
	r := <-done
	return r.pid, r.err
}
