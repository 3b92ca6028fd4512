// Package boards holds what flashgate knows about each supported board: the
// CPU it needs code built for, its console, its NICs and the kernel modules
// that make its disk, network, watchdog and crypto engine work. Probe
// identifies the board a running system is on.
//
// Facts come from ../shared/reference/boards.md; a fact that is not confirmed
// on real hardware is listed in the board's Unconfirmed field so that it is
// visible at run time, not only in a comment.
package boards

// Console is the serial console the BIOS, syslinux, the kernel and the getty
// all use. They must agree, so it lives in one place.
type Console struct {
	Device string // kernel name without /dev/, e.g. "ttyS0"
	Baud   int    // e.g. 38400 on ALIX (tinyBIOS default)
}

// NIC is one network port in the order the board's BIOS enumerates them.
// Role is the default role flashgate gives the port (wan, lan, opt).
type NIC struct {
	Name   string // interface name the kernel gives it, e.g. "eth0"
	Role   string // "wan", "lan" or "opt"
	Label  string // what is printed on the case, if anything
	Driver string // kernel module, e.g. "via-rhine"
}

// Modules are the kernel modules a board needs, grouped by purpose. Each
// group is loaded in the order given: dependencies that modprobe would find
// through softdeps (crc32c before ext4, realtek before r8169) are listed
// explicitly before the module that needs them.
type Modules struct {
	Disk     []string
	NIC      []string
	Watchdog []string
	Crypto   []string
	RNG      []string
	LED      []string
	Extra    []string // everything else the board needs (filesystems, netfilter, xfrm)
}

// QEMU describes how to emulate a board, for boards that are emulators.
type QEMU struct {
	Binary  string   // "qemu-system-i386" or "qemu-system-x86_64"
	CPU     string   // "pentium2" resembles a Geode LX (MMX + CMOV, no SSE)
	Machine string   // "pc"
	MemMB   int      //
	NIC     string   // qemu -device model, e.g. "e1000"
	Extra   []string // extra qemu arguments, e.g. "-device", "i6300esb"
}

// Board is one supported (or explicitly unsupported) board.
type Board struct {
	Name        string   // short name used on the command line: "alix2d13"
	Aliases     []string // other names accepted by Lookup: "alix2d3", "alix2c3"
	Family      string   // "alix", "soekris", "epia", "apu", "generic", "qemu"
	Description string   // one line for humans

	// Unsupported, when set, is the plain-language reason the board cannot
	// run flashgate. Lookup returns an error carrying it.
	Unsupported string

	GOARCH        string // "386" or "amd64"
	GO386         string // "softfloat" where the CPU has no SSE2
	KernelFlavour string // Debian kernel flavour: "686" or "amd64"

	Console Console
	NICs    []NIC
	Modules Modules

	Watchdog string   // watchdog driver name as it appears in /sys/class/watchdog/*/identity, or ""
	LEDs     []string // LED class device names, e.g. "alix:1"

	MinRAMMB  int // smallest RAM the board ships with
	MinCardMB int // smallest supported boot card

	// Unconfirmed lists facts in this definition that are not confirmed on
	// real hardware, in words ("console baud on EPIA depends on BIOS setup").
	Unconfirmed []string

	QEMU *QEMU // non-nil for emulated boards

	// Signs are the traces the board leaves on a running system; Probe
	// looks for them. Boards that nothing sets apart (generic-x86_64) have
	// none and are reached by Probe's fallback.
	Signs Signs
}

// AllModules returns every module the board needs in load order: disk first
// (so the config partition can be mounted), then NICs, watchdog, crypto, RNG,
// LEDs and the rest. Duplicates are removed, first occurrence wins.
func (b Board) AllModules() []string {
	var out []string
	seen := map[string]bool{}
	for _, group := range [][]string{b.Modules.Disk, b.Modules.NIC, b.Modules.Watchdog,
		b.Modules.Crypto, b.Modules.RNG, b.Modules.LED, b.Modules.Extra} {
		for _, m := range group {
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	return out
}
