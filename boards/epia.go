package boards

import "github.com/flashgate/flashgate/kernel/cpuclass"

// VIA EPIA mini-ITX boards with a VIA C3 (Nehemiah) or C7 (Esther) CPU and
// the PadLock crypto engine in the CPU. EPIA boards vary a lot; what is
// fixed here is what the CPU and VIA south bridge imply. The boards take a
// DIMM and usually boot from an IDE CompactFlash adapter.

// epiaConsole: EPIA BIOSes rarely redirect to serial, so the rate is ours
// to choose (syslinux and the kernel set it); 115200 is what most serial
// tools default to.
var epiaConsole = Console{Device: "ttyS0", Baud: 115200}

var epiaUnconfirmed = []string{
	"console: the BIOS may not redirect to serial at all; 115200 is the rate syslinux and the kernel are set to, not a BIOS fact",
	"one on-board VT6102/VT6105 port (via-rhine); boards with a VT6122 gigabit port use via-velocity, which is loaded too",
	"RAM: the boards take a DIMM; 128 MB is what flashgate needs, not a board fact",
	"DMI board names containing \"EPIA\" (?)",
	"no watchdog driver known for these boards",
}

func epiaC3() Board {
	return Board{
		Name:        "epia-c3",
		Aliases:     []string{"epia", "epia-m", "epia-ml"},
		Family:      "epia",
		Description: "VIA EPIA with a C3 Nehemiah: PadLock ACE (AES) and RNG, VT6102 Ethernet",
		// The C3 has SSE but no SSE2.
		GOARCH:      "386",
		GO386:       "softfloat",
		KernelClass: cpuclass.I586,
		EmulatedCPU: "pentium3",
		Console:     epiaConsole,
		NICs:        []NIC{{Name: "eth0", Role: "wan", Driver: "via-rhine"}},
		MinRAMMB:    128,
		MinCardMB:   32,
		Unconfirmed: append([]string{
			"defined for the Nehemiah (family 6 model 9; the Samuel 2 and Ezra are epia-c3-ezra); early Nehemiah steppings have the RNG but not ACE",
		}, epiaUnconfirmed...),
		Signs: Signs{
			DMIVendor: "VIA",
			DMINames:  []string{"EPIA"},
			CPU:       CPUSigns{Alone: true, Vendor: "CentaurHauls", Family: 6, Models: []int{9}, NoFlags: []string{"sse2"}},
		},
	}
}

// epiaC3Ezra is an EPIA with an older C3: Samuel 2 (family 6 model 7) or
// Ezra/Ezra-T (model 8). They have MMX and 3DNow! but no CMOV, no SSE and
// neither PadLock nor the RNG (both came with the Nehemiah). Debian dropped
// them in 2016 with CMOV; flashgate's i586 kernel does not need CMOV and
// Go's 386 runtime needs only MMX.
func epiaC3Ezra() Board {
	return Board{
		Name:        "epia-c3-ezra",
		Aliases:     []string{"epia-ezra", "epia-samuel2", "epia-5000", "epia-800"},
		Family:      "epia",
		Description: "VIA EPIA with a C3 Samuel 2 or Ezra (no CMOV, no SSE, no PadLock), VT6102 Ethernet",
		GOARCH:      "386",
		GO386:       "softfloat",
		KernelClass: cpuclass.I586,
		EmulatedCPU: "pentium,+mmx",
		Console:     epiaConsole,
		NICs:        []NIC{{Name: "eth0", Role: "wan", Driver: "via-rhine"}},
		MinRAMMB:    128,
		MinCardMB:   32,
		Unconfirmed: append([]string{
			"not run on a real Samuel 2 or Ezra: its kernel and firmware boot in qemu -cpu pentium,+mmx (MMX, no CMOV, no SSE), which proves the code needs nothing these CPUs lack, not the board's drivers",
			"the VT8231/VT8235 IDE (pata_via) and on-board VT6102 (via-rhine) of the EPIA 5000/800/M boards",
		}, epiaUnconfirmed...),
		Signs: Signs{
			DMIVendor: "VIA",
			DMINames:  []string{"EPIA"},
			CPU:       CPUSigns{Alone: true, Vendor: "CentaurHauls", Family: 6, Models: []int{7, 8}, NoFlags: []string{"sse"}},
		},
	}
}

func epiaC7() Board {
	return Board{
		Name:        "epia-c7",
		Aliases:     []string{"epia-cn", "epia-en", "epia-ex"},
		Family:      "epia",
		Description: "VIA EPIA with a C7 Esther: PadLock ACE (AES), PHE (SHA-1/256) and RNG",
		// The C7 has SSE2 and SSE3 but no x86-64 (that came with the
		// Nano), so 386 with Go's default SSE2 floating point.
		GOARCH:      "386",
		GO386:       "sse2",
		KernelClass: cpuclass.I586,
		EmulatedCPU: "coreduo",
		Console:     epiaConsole,
		NICs:        []NIC{{Name: "eth0", Role: "wan", Driver: "via-rhine"}},
		MinRAMMB:    128,
		MinCardMB:   32,
		Unconfirmed: append([]string{
			"the on-board Ethernet chip of C7 boards varies (VT6102/VT6105/VT6122) (?)",
		}, epiaUnconfirmed...),
		Signs: Signs{
			DMIVendor: "VIA",
			DMINames:  []string{"EPIA"},
			CPU:       CPUSigns{Alone: true, Vendor: "CentaurHauls", Family: 6, Models: []int{10, 13}, Flags: []string{"sse2"}, NoFlags: []string{"lm"}},
		},
	}
}
