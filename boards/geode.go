package boards

// The AMD Geode LX with its CS5536 companion chip is the platform of the
// ALIX boards and the Soekris net5501. Its module groups live here so the
// two families cannot drift apart.

// Geode LX facts shared by the boards built on it.
const (
	// pciGeodeLXAES is the Geode LX security block (AES-128 and the RNG),
	// present on every Geode LX.
	pciGeodeLXAES = "1022:2082"
	// pciVT6105M is the VIA Rhine III Ethernet chip ALIX and net5501 use.
	pciVT6105M = "1106:3053"
)

// geodeLXCPU matches a Geode LX in /proc/cpuinfo: AMD family 5 model 10,
// which has MMX and CMOV but no SSE.
var geodeLXCPU = CPUSigns{Alone: true, Vendor: "AuthenticAMD", Family: 5, Models: []int{10}, Flags: []string{"mmx"}, NoFlags: []string{"sse2"}}

// geodeLXModules returns the module groups of a Geode LX + CS5536 board
// with nicDriver for its Ethernet ports and leds for its LED driver chain.
func geodeLXModules(nicDriver string, leds []string) Modules {
	return Modules{
		// The CompactFlash socket sits on the CS5536 IDE controller
		// (1022:209a); libata disks need sd_mod.
		Disk: []string{"pata_cs5536", "sd_mod"},
		NIC:  []string{nicDriver},
		// cs5535-mfd binds the CS5536 ISA bridge (1022:2090) and creates
		// the platform devices cs5535-mfgpt and gpio-cs5535 bind to. It is
		// no symbol dependency of either, and with no udev nothing would
		// load it: list it first.
		Watchdog: []string{"cs5535-mfd", "cs5535-mfgpt", "geodewdt"},
		// geode-aes does AES-128 ECB/CBC; longer keys fall back to software.
		Crypto: []string{"geode-aes"},
		RNG:    []string{"geode-rng"},
		LED:    leds,
		Extra:  common(),
	}
}

// geodeLXLEDs is the LED driver chain of boards whose LEDs the kernel's
// platform code (arch/x86/platform/geode) registers as a leds-gpio device
// on CS5536 GPIOs.
func geodeLXLEDs() []string { return []string{"cs5535-mfd", "gpio-cs5535", "leds-gpio"} }
