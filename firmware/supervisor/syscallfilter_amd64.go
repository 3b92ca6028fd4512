package supervisor

import "golang.org/x/sys/unix"

// On amd64 the filter checks for x86_64 system calls and refuses the x32
// ABI's (numbers with bit 30 set), which would slip past their numbers.
const (
	auditArch = unix.AUDIT_ARCH_X86_64
	x32Bit    = 0x40000000
)

var archSyscalls = []uintptr{unix.SYS_KEXEC_FILE_LOAD}
