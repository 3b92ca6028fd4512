package boards

// A generic x86-64 machine: any 64-bit PC, VM or small appliance nothing
// more specific matches. Its modules cover the common disks and NICs; the
// ones whose hardware is absent load and bind nothing.

func genericX8664() Board {
	return Board{
		Name:          "generic-x86_64",
		Aliases:       []string{"generic", "x86_64", "amd64"},
		Family:        "generic",
		Description:   "any x86-64 PC: AHCI/NVMe/USB disks, Intel, Realtek and virtio Ethernet",
		GOARCH:        "amd64",
		KernelFlavour: "amd64",
		Console:       Console{Device: "ttyS0", Baud: 115200},
		// No fixed ports: the kernel names them in the order the NIC
		// drivers (loaded in Modules.NIC order) find them.
		NICs: []NIC{
			{Name: "eth0", Role: "wan"},
			{Name: "eth1", Role: "lan"},
		},
		Modules: Modules{
			Disk: []string{"ahci", "ata_piix", "nvme", "sd_mod", "xhci-pci", "ehci-pci", "usb-storage", "virtio_pci", "virtio_blk"},
			// realtek (the PHY driver) before r8169: a softdep that
			// u-root's modprobe ignores.
			NIC:    []string{"e1000", "e1000e", "igb", "igc", "realtek", "r8169", "virtio_net"},
			Crypto: []string{"aesni-intel", "ghash-clmulni-intel"},
			Extra:  common(),
		},
		MinRAMMB:  256,
		MinCardMB: 64,
		Unconfirmed: []string{
			"aesni-intel and ghash-clmulni-intel refuse to load on a CPU without AES-NI/PCLMULQDQ; that is expected, not a fault",
			"no watchdog driver is loaded: which one a PC has varies",
		},
	}
}
