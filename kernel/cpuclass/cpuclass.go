// Package cpuclass names the CPU classes flashgate builds kernels for. It
// is apart from package kernel, the host's kernel builder, so that the
// boards' table (which the firmware links to identify its board) names a
// board's class without linking the builder: its embedded configuration
// fragments, its .config parser and the hashing of its cache keys.
package cpuclass

import "fmt"

// Class is a CPU class: one processor type, one set of compiler flags, one
// build tree. Boards of a class differ only in drivers, which kbuild
// rebuilds incrementally.
type Class string

const (
	// I586 is every 32-bit board: Pentium-MMX code, no CMOV, no SSE.
	I586 Class = "i586"
	// X8664 is every 64-bit board.
	X8664 Class = "x86_64"
)

// Arch is the kernel's ARCH= for the class.
func (c Class) Arch() (string, error) {
	switch c {
	case I586:
		return "i386", nil
	case X8664:
		return "x86_64", nil
	}
	return "", fmt.Errorf("kernel class %q: flashgate builds %s and %s", string(c), I586, X8664)
}
