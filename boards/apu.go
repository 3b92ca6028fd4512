package boards

import "github.com/flashgate/flashgate/kernel/cpuclass"

// PC Engines APU2/3/4: AMD GX-412TC (x86-64, AES-NI), Intel i210/i211
// Ethernet, coreboot with a serial console at 115200, booting from SD,
// mSATA or USB. coreboot fills in DMI, which names the board.

func apu2() Board {
	return Board{
		Name: "apu2",
		// apu3 and apu4 use the same SoC, Ethernet chips and watchdog;
		// pcengines-apuv2 drives the LEDs of all three.
		Aliases:     []string{"apu2c0", "apu2c2", "apu2c4", "apu2d0", "apu2d2", "apu2d4", "apu2e2", "apu2e4", "apu3", "apu4"},
		Family:      "apu",
		Description: "PC Engines APU2/3/4: AMD GX-412TC (x86-64, AES-NI), 3x i210/i211, SD/mSATA/USB",
		GOARCH:      "amd64",
		KernelClass: cpuclass.X8664,
		EmulatedCPU: "qemu64",
		Console:     Console{Device: "ttyS0", Baud: 115200},
		NICs: []NIC{
			{Name: "eth0", Role: "wan", Driver: "igb"},
			{Name: "eth1", Role: "lan", Driver: "igb"},
			{Name: "eth2", Role: "opt", Driver: "igb"},
		},
		Watchdog:  "SP5100 TCO",
		LEDs:      []string{"apu:green:1", "apu:green:2", "apu:green:3"},
		MinRAMMB:  2048,
		MinCardMB: 64,
		Unconfirmed: []string{
			"watchdog identity \"SP5100 TCO\" is read from the module's strings, not from a running APU",
			"which RJ45 jack is eth0: the BIOS enumeration order is assumed to match the order of the jacks",
			"no hardware RNG driver is loaded: the GX-412TC's RNG support is not checked",
		},
		Signs: Signs{
			// The names pcengines-apuv2 matches on (its DMI aliases).
			DMIVendor: "PC Engines",
			DMINames:  []string{"apu2", "apu3", "apu4"},
		},
	}
}
