package boards

import "github.com/flashgate/flashgate/kernel/cpuclass"

// PC Engines ALIX: AMD Geode LX800 (500 MHz, MMX and CMOV, no SSE), CS5536
// companion, VIA VT6105M Ethernet, CompactFlash, tinyBIOS at 38400 baud
// (later boards could be reflashed with coreboot, which fills in DMI).

// alixConsole is tinyBIOS's default; syslinux, the kernel and the getty
// must use the same rate or the user sees garbage after the BIOS screen.
var alixConsole = Console{Device: "ttyS0", Baud: 38400}

// alixUnconfirmed are facts common to the ALIX boards not checked on
// hardware.
var alixUnconfirmed = []string{
	"which RJ45 jack is eth0: the BIOS enumeration order is assumed to match the order of the jacks",
	"geodewdt needs a free MFGPT timer; tinyBIOS is assumed to leave one unused",
}

func alix2d13() Board {
	return Board{
		Name: "alix2d13",
		// The 2C and 2D boards differ in USB, mini-PCI and RAM, not in
		// the chips flashgate drives.
		Aliases:     []string{"alix2", "alix2c0", "alix2c1", "alix2c2", "alix2c3", "alix2d0", "alix2d1", "alix2d2", "alix2d3"},
		Family:      "alix",
		Description: "PC Engines ALIX.2C/2D (2D13, 2D3, ...): Geode LX800, 3x VT6105M, CompactFlash",
		GOARCH:      "386",
		GO386:       "softfloat", // Geode LX has no SSE2
		KernelClass: cpuclass.I586,
		EmulatedCPU: "pentium2",
		Console:     alixConsole,
		NICs: []NIC{
			{Name: "eth0", Role: "wan", Driver: "via-rhine"},
			{Name: "eth1", Role: "lan", Driver: "via-rhine"},
			{Name: "eth2", Role: "opt", Driver: "via-rhine"},
		},
		Watchdog:  "Geode GX/LX WDT",
		LEDs:      []string{"alix:1", "alix:2", "alix:3"},
		MinRAMMB:  256,
		MinCardMB: 32,
		Unconfirmed: append([]string{
			"the 2C/2D variants other than 2D13 and 2D3 are assumed to have three Ethernet ports; a variant with fewer simply has no eth2 (and eth1)",
			"RAM: 256 MB on the 2D13 and 2D3; not checked for every 2C/2D variant",
		}, alixUnconfirmed...),
		Signs: Signs{
			// coreboot: arch/x86/platform/geode/alix.c checks these DMI values.
			DMIVendor: "PC Engines",
			DMINames:  []string{"ALIX.2"},
			// tinyBIOS: "PC Engines ALIX." followed by the board digit,
			// the signature alix.c scans 0xF0000-0xFFFFF for.
			ROM: [][]string{{"PC Engines ALIX.2"}},
			PCI: []string{pciGeodeLXAES, pciVT6105M, pciVT6105M, pciVT6105M},
			CPU: geodeLXCPU,
		},
	}
}

func alix3d() Board {
	return Board{
		Name:        "alix3d",
		Aliases:     []string{"alix3", "alix3d1", "alix3d2", "alix3d3"},
		Family:      "alix",
		Description: "PC Engines ALIX.3D: Geode LX800, 1x VT6105M, CompactFlash",
		GOARCH:      "386",
		GO386:       "softfloat",
		KernelClass: cpuclass.I586,
		EmulatedCPU: "pentium2",
		Console:     alixConsole,
		NICs: []NIC{
			{Name: "eth0", Role: "wan", Driver: "via-rhine"},
		},
		Watchdog:  "Geode GX/LX WDT",
		LEDs:      []string{"alix:1", "alix:2", "alix:3"},
		MinRAMMB:  256,
		MinCardMB: 32,
		Unconfirmed: append([]string{
			"LEDs: alix.c registers alix:1..3 on ALIX.3 as on ALIX.2; whether all three are fitted on every 3D variant is not checked",
			"DMI product name ALIX.3 (?): alix.c itself only checks ALIX.2D and ALIX.6 under coreboot",
		}, alixUnconfirmed...),
		Signs: Signs{
			DMIVendor: "PC Engines",
			DMINames:  []string{"ALIX.3"},
			ROM:       [][]string{{"PC Engines ALIX.3"}},
			PCI:       []string{pciGeodeLXAES, pciVT6105M},
			CPU:       geodeLXCPU,
		},
	}
}
