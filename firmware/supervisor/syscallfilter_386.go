package supervisor

import "golang.org/x/sys/unix"

// On the 32-bit boards the filter checks for i386 system calls; there is
// no x32 ABI to refuse.
const (
	auditArch = unix.AUDIT_ARCH_I386
	x32Bit    = 0
)

var archSyscalls = []uintptr{unix.SYS_VM86, unix.SYS_VM86OLD}
