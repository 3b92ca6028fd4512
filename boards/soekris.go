package boards

import "github.com/flashgate/flashgate/kernel/cpuclass"

// Soekris Engineering net45xx/48xx/55xx/65xx: comBIOS, serial console at
// 19200 baud, CompactFlash (net6501: SATA). comBIOS fills in no DMI, so the
// board is recognised by the "comBIOS" banner and the model name in its ROM.

var soekrisConsole = Console{Device: "ttyS0", Baud: 19200}

const (
	pciDP8381x      = "100b:0020" // National DP83815/DP83816 MacPhyter (natsemi)
	pciSC1100Bridge = "100b:0510" // National SC1100 bridge (net4801, WRAP)
	pciElanSC520    = "1022:3000" // AMD Elan SC520 host bridge
	pciAtomE6xxLPC  = "8086:8186" // Intel Atom E6xx LPC bridge (lpc_sch)
	pci82574L       = "8086:10d3" // Intel 82574L (e1000e)
)

// net4501Reason is what flashgate says about the net4501, everywhere.
const net4501Reason = "AMD Elan SC520 has no MMX; Go's 386 runtime requires MMX, so flashgate cannot run on it"

func net4501() Board {
	return Board{
		Name:        "net4501",
		Family:      "soekris",
		Description: "Soekris net4501: AMD Elan SC520 133 MHz (486 class), 3x DP83815, CompactFlash",
		// flashgate's i586 kernel would boot on it (no CMOV needed), but
		// Go's runtime would not start.
		Unsupported: net4501Reason,
		GOARCH:      "386",
		Console:     soekrisConsole,
		MinRAMMB:    64,
		MinCardMB:   32,
		Unconfirmed: []string{
			"cpuinfo on the Elan SC520: AMD family 4 (486 class); the model number is not checked",
			"comBIOS ROM strings \"comBIOS\" and \"net4501\" are assumed as on the net5501",
		},
		Signs: Signs{
			ROM: [][]string{{"comBIOS", "net4501"}, {"Soekris Engineering", "net4501"}},
			PCI: []string{pciElanSC520},
			CPU: CPUSigns{Alone: true, Vendor: "AuthenticAMD", Family: 4, NoFlags: []string{"mmx"}},
		},
	}
}

func net4801() Board {
	return Board{
		Name:        "net4801",
		Aliases:     []string{"net48xx", "net4801-48", "net4801-50"},
		Family:      "soekris",
		Description: "Soekris net4801: NSC SC1100 266 MHz, 3x DP83816, CompactFlash",
		GOARCH:      "386",
		GO386:       "softfloat", // SC1100 (Geode GX1 core) has MMX, no SSE
		KernelClass: cpuclass.I586,
		EmulatedCPU: "pentium,+mmx",
		Console:     soekrisConsole,
		NICs: []NIC{
			{Name: "eth0", Role: "wan", Driver: "natsemi"},
			{Name: "eth1", Role: "lan", Driver: "natsemi"},
			{Name: "eth2", Role: "opt", Driver: "natsemi"},
		},
		// The vpn1401/vpn1411 mini-PCI card is optional.
		Modules:   []string{"hifn_795x"},
		Watchdog:  "NatSemi SCx200 Watchdog",
		LEDs:      []string{"net48xx::error"},
		MinRAMMB:  128,
		MinCardMB: 32,
		Unconfirmed: []string{
			"the i586 kernel (no CMOV) boots in qemu -cpu pentium,+mmx; that a real SC1100 runs it, and its IDE, NICs, watchdog and LED drivers, are not checked on hardware",
			"RAM: 128 MB on the smallest net4801 (?)",
			"comBIOS ROM strings \"comBIOS\" and \"net4801\" are assumed as on the net5501",
			"the Hifn card models (vpn1401/vpn1411 = 7955/7956) are from the reference notes, not checked",
		},
		Signs: Signs{
			ROM: [][]string{{"comBIOS", "net4801"}, {"Soekris Engineering", "net4801"}},
			// WRAP boards share the SC1100 and DP83816; three ports and
			// the ROM tell them apart.
			PCI: []string{pciSC1100Bridge, pciDP8381x, pciDP8381x, pciDP8381x},
			CPU: CPUSigns{Alone: true, Vendor: "Geode by NSC", Family: 5, Flags: []string{"mmx"}, NoFlags: []string{"sse"}},
		},
	}
}

func net5501() Board {
	return Board{
		Name:        "net5501",
		Aliases:     []string{"net5501-60", "net5501-70"},
		Family:      "soekris",
		Description: "Soekris net5501: Geode LX 433/500 MHz, 4x VT6105M, CompactFlash",
		GOARCH:      "386",
		GO386:       "softfloat", // Geode LX has no SSE2
		KernelClass: cpuclass.I586,
		EmulatedCPU: "pentium2",
		Console:     soekrisConsole,
		NICs: []NIC{
			{Name: "eth0", Role: "wan", Driver: "via-rhine"},
			{Name: "eth1", Role: "lan", Driver: "via-rhine"},
			{Name: "eth2", Role: "opt", Driver: "via-rhine"},
			{Name: "eth3", Role: "opt", Driver: "via-rhine"},
		},
		// The vpn1411 mini-PCI card is optional.
		Modules: []string{"hifn_795x"},
		// The kernel's platform code (arch/x86/platform/geode/net5501.c)
		// registers the error LED on GPIO 6 as "net5501:1".
		Watchdog:  "Geode GX/LX WDT",
		LEDs:      []string{"net5501:1"},
		MinRAMMB:  256,
		MinCardMB: 32,
		Unconfirmed: []string{
			"the ROM strings are read from 0xF0000 and 0xFFFF0000; the kernel reads them at 0xFFFF0000 (\"comBIOS\" at +0x20, \"net5501\" at +0xb7b or +0xb1f); that the 0xF0000 copy holds them too is not checked",
			"the SATA port and the 44-pin IDE drive are not covered: flashgate boots from the CompactFlash socket",
		},
		Signs: Signs{
			ROM: [][]string{{"comBIOS", "net5501"}},
			PCI: []string{pciGeodeLXAES, pciVT6105M, pciVT6105M, pciVT6105M, pciVT6105M},
			CPU: geodeLXCPU,
		},
	}
}

func net6501() Board {
	return Board{
		Name:        "net6501",
		Aliases:     []string{"net6501-30", "net6501-50", "net6501-70"},
		Family:      "soekris",
		Description: "Soekris net6501: Intel Atom E6xx 0.6-1.6 GHz, 4x 82574L, SATA/mSATA",
		// 32-bit code runs whether or not the E6xx has Intel 64. The CPU
		// has SSE2, so Go's default 386 floating point is fine.
		GOARCH:      "386",
		GO386:       "sse2",
		KernelClass: cpuclass.I586,
		EmulatedCPU: "n270",
		Console:     soekrisConsole,
		NICs: []NIC{
			{Name: "eth0", Role: "wan", Driver: "e1000e"},
			{Name: "eth1", Role: "lan", Driver: "e1000e"},
			{Name: "eth2", Role: "opt", Driver: "e1000e"},
			{Name: "eth3", Role: "opt", Driver: "e1000e"},
		},
		Watchdog:  "Intel Atom E6xx Watchdog",
		MinRAMMB:  512,
		MinCardMB: 32,
		Unconfirmed: []string{
			"whether the Atom E6xx has Intel 64 (x86-64) is not confirmed; the board is built for 386, which runs either way",
			"the SATA controller is assumed to be AHCI (EG20T PCH)",
			"the four ports are assumed to be 82574L (8086:10d3)",
			"RAM: 512 MB on the smallest model (?)",
			"LEDs: no Linux driver known for the net6501's LEDs",
			"cpuinfo family 6 model 38 (0x26, Tunnel Creek) is assumed",
		},
		Signs: Signs{
			ROM: [][]string{{"comBIOS", "net6501"}, {"Soekris Engineering", "net6501"}},
			PCI: []string{pciAtomE6xxLPC, pci82574L, pci82574L, pci82574L, pci82574L},
			CPU: CPUSigns{Alone: true, Vendor: "GenuineIntel", Family: 6, Models: []int{38}, Flags: []string{"sse2"}},
		},
	}
}
