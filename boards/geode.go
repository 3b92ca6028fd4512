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
