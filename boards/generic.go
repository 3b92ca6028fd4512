package boards

import "github.com/flashgate/flashgate/kernel/cpuclass"

// A generic x86-64 machine: any 64-bit PC, VM or small appliance nothing
// more specific matches. Its modules cover the common disks and NICs; the
// ones whose hardware is absent load and bind nothing.

func genericX8664() Board {
	return Board{
		Name:        "generic-x86_64",
		Aliases:     []string{"generic", "x86_64", "amd64"},
		Family:      "generic",
		Description: "any x86-64 PC: AHCI/NVMe/USB disks, Intel, Realtek and virtio Ethernet",
		GOARCH:      "amd64",
		KernelClass: cpuclass.X8664,
		EmulatedCPU: "qemu64",
		Console:     Console{Device: "ttyS0", Baud: 115200},
		// No fixed ports: the kernel names them in the order the NIC
		// drivers (loaded in Modules.NIC order) find them.
		NICs: []NIC{
			{Name: "eth0", Role: "wan"},
			{Name: "eth1", Role: "lan"},
		},
		MinRAMMB:  256,
		MinCardMB: 64,
		Unconfirmed: []string{
			"aesni-intel and ghash-clmulni-intel refuse to load on a CPU without AES-NI/PCLMULQDQ; that is expected, not a fault",
			"no watchdog driver is loaded: which one a PC has varies",
		},
	}
}
