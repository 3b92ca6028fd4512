package boards

import "github.com/flashgate/flashgate/kernel/cpuclass"

// qemu boards are the test boards: the same firmware, booted in qemu under
// software emulation. The i386 one resembles a Geode LX (MMX and CMOV, no
// SSE), so a binary built for the ALIX is exercised as the ALIX would run
// it. qemu cannot emulate via-rhine or natsemi: the i386 board's NICs are
// virtio-net, which probes in milliseconds where qemu's e1000 took over a
// second of every boot (its EEPROM is read bit by bit with 50 us delays);
// the x86-64 one keeps e1000, as every real board's card has in the tests.

func qemuNICs(driver string) []NIC {
	return []NIC{
		{Name: "eth0", Role: "wan", Driver: driver},
		{Name: "eth1", Role: "lan", Driver: driver},
	}
}

func qemuI386() Board {
	return Board{
		Name:        "qemu",
		Aliases:     []string{"qemu-i386", "qemu-geode"},
		Family:      "qemu",
		Description: "qemu-system-i386 -cpu pentium2: an emulated Geode-like board for tests and make run",
		GOARCH:      "386",
		GO386:       "softfloat", // pentium2 has no SSE, like the Geode LX
		KernelClass: cpuclass.I586,
		Console:     Console{Device: "ttyS0", Baud: 115200},
		NICs:        qemuNICs("virtio_net"),
		Watchdog:    "i6300ESB timer",
		MinRAMMB:    256,
		MinCardMB:   32, // as the ALIX, so make run shows what fits there
		QEMU: &QEMU{
			Binary:  "qemu-system-i386",
			CPU:     "pentium2",
			Machine: "pc",
			MemMB:   256,
			NIC:     "virtio-net-pci",
			Extra:   []string{"-device", "i6300esb"},
		},
		Signs: Signs{
			DMIVendor: "QEMU",
			CPU:       CPUSigns{NoFlags: []string{"lm"}},
		},
	}
}

func qemuX8664() Board {
	return Board{
		Name:        "qemu-x86_64",
		Aliases:     []string{"qemu64", "qemu-amd64"},
		Family:      "qemu",
		Description: "qemu-system-x86_64: an emulated 64-bit board for tests",
		GOARCH:      "amd64",
		KernelClass: cpuclass.X8664,
		Console:     Console{Device: "ttyS0", Baud: 115200},
		NICs:        qemuNICs("e1000"),
		Watchdog:    "i6300ESB timer",
		MinRAMMB:    256,
		MinCardMB:   64,
		QEMU: &QEMU{
			Binary:  "qemu-system-x86_64",
			CPU:     "qemu64",
			Machine: "pc",
			MemMB:   256,
			NIC:     "e1000",
			Extra:   []string{"-device", "i6300esb"},
		},
		Signs: Signs{
			DMIVendor: "QEMU",
			CPU:       CPUSigns{Flags: []string{"lm"}},
		},
	}
}
