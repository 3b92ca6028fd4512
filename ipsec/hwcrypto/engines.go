package hwcrypto

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// cipherCap is one cipher mode an engine does in hardware, for the key
// sizes listed. A mode the engine does not list runs in software even when
// the engine's single-block cipher is used under it (GCM over PadLock's AES
// block function is slower than a good software GCM).
type cipherCap struct {
	cipher  string // "aes", "3des", "des"
	modes   []string
	keyBits []int
}

// engineSpec is what flashgate knows about one kind of crypto engine: how to
// see it, which module drives it, which /proc/crypto drivers prove it is
// registered, and what it speeds up. Facts: shared/reference/boards.md.
type engineSpec struct {
	name        string
	driverOf    string // name EngineOf gives its drivers when engines share them; name if empty
	modules     []string
	drivers     []string // path.Match patterns over /proc/crypto driver names
	rngName     string   // name in hw_random's rng_available, for RNGs
	accelerates string
	ciphers     []cipherCap
	hashes      []string // integrity algorithms done in hardware ("sha1", "sha256")
	noDriver    bool     // the hardware has no Linux driver at all

	// detect returns the evidence that the engine is present, or "".
	detect func(hw hardware) string
	// disabled returns why the engine must not be used on this CPU, or "".
	disabled func(hw hardware) string
}

// hardware is what detection looks at.
type hardware struct {
	cpu CPUInfo
	pci []PCIDevice
}

func (hw hardware) pciDevice(vendor, device uint16) (PCIDevice, bool) {
	for _, d := range hw.pci {
		if d.Vendor == vendor && d.Device == device {
			return d, true
		}
	}
	return PCIDevice{}, false
}

func pciEvidence(vendor, device uint16, what string) func(hardware) string {
	return func(hw hardware) string {
		if d, ok := hw.pciDevice(vendor, device); ok {
			return fmt.Sprintf("PCI %s (%s)", d, what)
		}
		return ""
	}
}

// flagEvidence matches CPU flags, on the given vendors only (any vendor
// when vendors is nil).
func flagEvidence(vendors []string, flags ...string) func(hardware) string {
	return func(hw hardware) string {
		if vendors != nil && !slices.Contains(vendors, strings.TrimSpace(hw.cpu.Vendor)) {
			return ""
		}
		for _, f := range flags {
			if !hw.cpu.Has(f) {
				return ""
			}
		}
		return "cpuinfo flags " + strings.Join(flags, " ")
	}
}

// zhaoxin: the kernel's padlock-sha refuses CPU family 7 and newer (Zhaoxin
// parts, where its self-tests give wrong results); "  Shanghai  " is
// Zhaoxin's own vendor string.
func zhaoxin(hw hardware) string {
	if strings.TrimSpace(hw.cpu.Vendor) == "Shanghai" || hw.cpu.Family >= 7 {
		return fmt.Sprintf("PadLock PHE gives wrong hashes on Zhaoxin parts (%s family %d)", strings.TrimSpace(hw.cpu.Vendor), hw.cpu.Family)
	}
	return ""
}

// padlockVendors are the vendor ids of CPUs with PadLock: VIA, and Zhaoxin
// parts, which report either VIA's id or their own "  Shanghai  ".
var padlockVendors = []string{"CentaurHauls", "Shanghai"}

var aesKeys = []int{128, 192, 256}

// catalogue lists every engine flashgate knows, in the order reports show
// them: ciphers, hashes, RNGs.
var catalogue = []engineSpec{
	{
		name:        "Geode LX AES",
		modules:     []string{"geode-aes"},
		drivers:     []string{"geode-aes", "*-aes-geode"},
		accelerates: "AES-128 ECB/CBC only; 192/256-bit keys fall back to software",
		ciphers:     []cipherCap{{cipher: "aes", modes: []string{"cbc", "ecb"}, keyBits: []int{128}}},
		detect:      pciEvidence(0x1022, 0x2082, "Geode LX security block"),
	},
	{
		name:        "VIA PadLock ACE",
		modules:     []string{"padlock-aes"},
		drivers:     []string{"aes-padlock", "*-aes-padlock"},
		accelerates: "AES-128/192/256 ECB/CBC; no CTR, so GCM runs on the single-block cipher",
		ciphers:     []cipherCap{{cipher: "aes", modes: []string{"cbc", "ecb"}, keyBits: aesKeys}},
		detect:      flagEvidence(padlockVendors, "ace", "ace_en"),
	},
	hifn795x("Hifn 7955", 0x0020),
	hifn795x("Hifn 7956", 0x001d),
	{
		name:        "Hifn 7951",
		accelerates: "nothing on Linux: there is no driver for this chip",
		noDriver:    true,
		detect:      pciEvidence(0x13a3, 0x0012, "Hifn 7951, Soekris vpn1201/vpn1211"),
	},
	{
		name:        "AES-NI",
		modules:     []string{"aesni-intel"},
		drivers:     []string{"*aesni*", "*vaes*"},
		accelerates: "all AES modes and key sizes, GCM included",
		ciphers:     []cipherCap{{cipher: "aes", modes: []string{"cbc", "ecb", "ctr", "gcm", "ccm", "gmac"}, keyBits: aesKeys}},
		detect:      flagEvidence(nil, "aes"),
	},
	{
		name:        "VIA PadLock PHE",
		modules:     []string{"padlock-sha"},
		drivers:     []string{"sha1-padlock*", "sha256-padlock*"},
		accelerates: "SHA-1 and SHA-256 (HMAC integrity)",
		hashes:      []string{"sha1", "sha256"},
		detect:      flagEvidence(padlockVendors, "phe", "phe_en"),
		disabled:    zhaoxin,
	},
	{
		name:        "Geode LX RNG",
		modules:     []string{"geode-rng"},
		rngName:     "geode",
		accelerates: "random numbers (hw_random)",
		detect:      pciEvidence(0x1022, 0x2082, "Geode LX security block"),
	},
	{
		name:        "VIA PadLock RNG",
		modules:     []string{"via-rng"},
		rngName:     "via",
		accelerates: "random numbers (hw_random)",
		detect:      flagEvidence(padlockVendors, "rng", "rng_en"),
	},
}

// matchDriver reports whether a /proc/crypto driver name belongs to spec.
func (s *engineSpec) matchDriver(driver string) bool {
	for _, p := range s.drivers {
		if ok, _ := path.Match(p, driver); ok {
			return true
		}
	}
	return false
}

// EngineOf names the engine behind a /proc/crypto driver name, looking
// inside templates: "authenc(hmac(sha256-generic),cbc-aes-geode)" is served
// by "Geode LX AES". It returns "" for software drivers.
func EngineOf(driver string) string {
	parts := strings.FieldsFunc(driver, func(r rune) bool { return r == '(' || r == ')' || r == ',' })
	for _, p := range parts {
		for i := range catalogue {
			if s := &catalogue[i]; s.matchDriver(p) {
				if s.driverOf != "" {
					return s.driverOf // hifn_795x names its drivers the same for both chips
				}
				return s.name
			}
		}
	}
	return ""
}

// hifn795x is a Hifn 7955 or 7956 card: one driver (hifn_795x) serves both
// chips, with the same capabilities; only the PCI device id differs.
func hifn795x(model string, device uint16) engineSpec {
	return engineSpec{
		name:        model,
		driverOf:    "Hifn 795x",
		modules:     []string{"hifn_795x"},
		drivers:     []string{"*-hifn[0-9]*"},
		accelerates: "AES-128..256 and 3DES/DES CBC/ECB (asynchronous); no hash, no AEAD",
		ciphers: []cipherCap{
			{cipher: "aes", modes: []string{"cbc", "ecb"}, keyBits: aesKeys},
			{cipher: "3des", modes: []string{"cbc", "ecb"}, keyBits: []int{192}},
			{cipher: "des", modes: []string{"cbc", "ecb"}, keyBits: []int{64}},
		},
		detect: pciEvidence(0x13a3, device, model),
	}
}
