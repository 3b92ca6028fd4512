// Package boards holds what flashgate knows about each supported board: the
// CPU it needs code built for, its console, its NICs and the kernel modules
// that make its disk, network, watchdog and crypto engine work. Probe
// identifies the board a running system is on.
//
// Facts come from ../shared/reference/boards.md; a fact that is not confirmed
// on real hardware is listed in the board's Unconfirmed field so that it is
// visible at run time, not only in a comment.
package boards

import (
	"fmt"

	"github.com/flashgate/flashgate/kernel/cpuclass"
)

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

	GOARCH      string         // "386" or "amd64"
	GO386       string         // "softfloat" where the CPU has no SSE2
	KernelClass cpuclass.Class // the CPU class its kernel is built for; kernel/config/board/<Name>.config adds its drivers

	Console Console
	NICs    []NIC
	// Modules are the loadable kernel modules of optional cards (a Hifn
	// crypto card in a mini-PCI slot), loaded at boot whether the card is
	// there or not. Everything else the board needs is built into its
	// kernel: kernel/config/board/<Name>.config.
	Modules []string

	Watchdog string   // watchdog driver name as it appears in /sys/class/watchdog/*/identity, or ""
	LEDs     []string // LED class device names, e.g. "alix:1"

	MinRAMMB  int // smallest RAM the board ships with
	MinCardMB int // smallest supported boot card

	// Unconfirmed lists facts in this definition that are not confirmed on
	// real hardware, in words ("console baud on EPIA depends on BIOS setup").
	Unconfirmed []string

	QEMU *QEMU // non-nil for emulated boards

	// EmulatedCPU is the qemu -cpu model closest to the board's CPU, so
	// that the board's own card boots in qemu in the tests: same CPU
	// features the kernel and Go may use (CMOV, SSE, SSE2, 64-bit).
	EmulatedCPU string

	// Signs are the traces the board leaves on a running system; Probe
	// looks for them. Boards that nothing sets apart (generic-x86_64) have
	// none and are reached by Probe's fallback.
	Signs Signs
}

// Emulation is how qemu boots this board's card: the emulated boards' own
// settings, or for real hardware a PC with EmulatedCPU, the board's smallest
// RAM and an e1000 per NIC (qemu emulates none of the boards' NICs or disk
// controllers; every flashgate kernel carries qemu's for that reason).
func (b Board) Emulation() (*QEMU, error) {
	if b.QEMU != nil {
		return b.QEMU, nil
	}
	if b.EmulatedCPU == "" {
		return nil, fmt.Errorf("board %s has no qemu CPU model to boot its card with", b.Name)
	}
	q := &QEMU{Binary: "qemu-system-i386", CPU: b.EmulatedCPU, Machine: "pc", MemMB: b.MinRAMMB, NIC: "e1000"}
	if b.GOARCH == "amd64" {
		q.Binary = "qemu-system-x86_64"
	}
	if q.MemMB < 128 {
		q.MemMB = 128
	}
	return q, nil
}
