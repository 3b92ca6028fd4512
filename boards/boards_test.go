package boards

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/kernel"
)

func mustLookup(t *testing.T, name string) Board {
	t.Helper()
	b, err := Lookup(name)
	if err != nil {
		t.Fatalf("Lookup(%q): %v", name, err)
	}
	return b
}

// boardFacts are what issue 2 fixes for a board.
type boardFacts struct {
	name          string
	goarch, go386 string
	class         kernel.Class
	baud          int
	minCardMB     int
	nics          int
	builtIn       []string // CONFIG_ symbols its kernel config must build in (=y)
	watchdog      string
}

// The boards issue 2 asks for, and the facts the issue fixes for them.
func TestBoardFacts(t *testing.T) {
	tests := []boardFacts{
		{"alix2d13", "386", "softfloat", "i586", 38400, 32, 3, []string{"CONFIG_CRYPTO_DEV_GEODE", "CONFIG_GEODE_WDT", "CONFIG_VIA_RHINE", "CONFIG_PATA_CS5536", "CONFIG_HW_RANDOM_GEODE", "CONFIG_LEDS_GPIO"}, "Geode GX/LX WDT"},
		{"alix3d", "386", "softfloat", "i586", 38400, 32, 1, []string{"CONFIG_CRYPTO_DEV_GEODE", "CONFIG_GEODE_WDT", "CONFIG_VIA_RHINE", "CONFIG_PATA_CS5536"}, "Geode GX/LX WDT"},
		{"net4801", "386", "softfloat", "i586", 19200, 32, 3, []string{"CONFIG_NATSEMI", "CONFIG_PATA_SC1200", "CONFIG_SCx200_WDT", "CONFIG_LEDS_NET48XX"}, "NatSemi SCx200 Watchdog"},
		{"net5501", "386", "softfloat", "i586", 19200, 32, 4, []string{"CONFIG_CRYPTO_DEV_GEODE", "CONFIG_GEODE_WDT", "CONFIG_VIA_RHINE", "CONFIG_PATA_CS5536"}, "Geode GX/LX WDT"},
		{"net6501", "386", "sse2", "i586", 19200, 32, 4, []string{"CONFIG_E1000E", "CONFIG_LPC_SCH", "CONFIG_IE6XX_WDT", "CONFIG_SATA_AHCI"}, "Intel Atom E6xx Watchdog"},
		{"epia-c3", "386", "softfloat", "i586", 115200, 32, 1, []string{"CONFIG_CRYPTO_DEV_PADLOCK_AES", "CONFIG_VIA_RHINE", "CONFIG_HW_RANDOM_VIA", "CONFIG_PATA_VIA"}, ""},
		{"epia-c3-ezra", "386", "softfloat", "i586", 115200, 32, 1, []string{"CONFIG_VIA_RHINE", "CONFIG_PATA_VIA"}, ""},
		{"epia-c7", "386", "sse2", "i586", 115200, 32, 1, []string{"CONFIG_CRYPTO_DEV_PADLOCK_AES", "CONFIG_CRYPTO_DEV_PADLOCK_SHA", "CONFIG_VIA_RHINE", "CONFIG_HW_RANDOM_VIA"}, ""},
		{"apu2", "amd64", "", "x86_64", 115200, 64, 3, []string{"CONFIG_IGB", "CONFIG_SP5100_TCO", "CONFIG_CRYPTO_AES_NI_INTEL", "CONFIG_PCENGINES_APU2"}, "SP5100 TCO"},
		{"generic-x86_64", "amd64", "", "x86_64", 115200, 64, 2, []string{"CONFIG_E1000E", "CONFIG_SATA_AHCI", "CONFIG_BLK_DEV_SD"}, ""},
		{"qemu", "386", "softfloat", "i586", 115200, 32, 2, []string{"CONFIG_E1000", "CONFIG_ATA_PIIX", "CONFIG_I6300ESB_WDT"}, "i6300ESB timer"},
		{"qemu-x86_64", "amd64", "", "x86_64", 115200, 64, 2, []string{"CONFIG_E1000", "CONFIG_ATA_PIIX", "CONFIG_I6300ESB_WDT"}, "i6300ESB timer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := mustLookup(t, tc.name)
			check := func(what string, got, want any) {
				if got != want {
					t.Errorf("%s: %s = %v, want %v", tc.name, what, got, want)
				}
			}
			check("GOARCH", b.GOARCH, tc.goarch)
			check("GO386", b.GO386, tc.go386)
			check("KernelClass", b.KernelClass, tc.class)
			check("console device", b.Console.Device, "ttyS0")
			check("console baud", b.Console.Baud, tc.baud)
			check("MinCardMB", b.MinCardMB, tc.minCardMB)
			check("number of NICs", len(b.NICs), tc.nics)
			check("watchdog identity", b.Watchdog, tc.watchdog)
			set := kernelSettings(t, b)
			for _, sym := range tc.builtIn {
				if set[sym] != "y" {
					t.Errorf("%s: kernel config builds %s as %q, want y", tc.name, sym, set[sym])
				}
			}
			q, err := b.Emulation()
			if err != nil || q.CPU == "" {
				t.Errorf("%s: no qemu CPU model to boot its card with: %v", tc.name, err)
			}
		})
	}
	// Every supported board is in the table above.
	for _, b := range All() {
		if b.Unsupported != "" {
			continue
		}
		if !slices.ContainsFunc(tests, func(tc boardFacts) bool { return tc.name == b.Name }) {
			t.Errorf("board %s has no row in TestBoardFacts", b.Name)
		}
	}
}

// Rules every definition keeps, whatever the board.
func TestDefinitionsAreConsistent(t *testing.T) {
	names := map[string]string{} // name or alias -> board
	for _, b := range All() {
		for _, n := range append([]string{b.Name}, b.Aliases...) {
			if n != strings.ToLower(n) {
				t.Errorf("board %s: name %q is not lower case; Lookup lowercases its input", b.Name, n)
			}
			if other, dup := names[n]; dup {
				t.Errorf("name %q is used by both %s and %s", n, other, b.Name)
			}
			names[n] = b.Name
		}
		if b.Family == "" || b.Description == "" {
			t.Errorf("board %s: Family %q, Description %q: both must be set", b.Name, b.Family, b.Description)
		}
		if b.MinRAMMB <= 0 || b.MinCardMB <= 0 {
			t.Errorf("board %s: MinRAMMB %d, MinCardMB %d: both must be positive", b.Name, b.MinRAMMB, b.MinCardMB)
		}
		if b.Unsupported != "" {
			if len(b.Modules) != 0 {
				t.Errorf("unsupported board %s lists modules %v; nothing will load them", b.Name, b.Modules)
			}
			continue
		}
		switch {
		case b.GOARCH == "386" && (b.GO386 == "softfloat" || b.GO386 == "sse2") && b.KernelClass == kernel.ClassI586:
		case b.GOARCH == "amd64" && b.GO386 == "" && b.KernelClass == kernel.ClassX8664:
		default:
			t.Errorf("board %s: GOARCH %q, GO386 %q, kernel class %q do not go together", b.Name, b.GOARCH, b.GO386, b.KernelClass)
		}
		if b.Console.Device != "ttyS0" || b.Console.Baud <= 0 {
			t.Errorf("board %s: console %+v", b.Name, b.Console)
		}
		set := kernelSettings(t, b)
		for i, nic := range b.NICs {
			if want := fmt.Sprintf("eth%d", i); nic.Name != want {
				t.Errorf("board %s: NIC %d is named %q, want %q (BIOS order)", b.Name, i, nic.Name, want)
			}
			want := "opt"
			switch i {
			case 0:
				want = "wan"
			case 1:
				want = "lan"
			}
			if nic.Role != want {
				t.Errorf("board %s: %s has role %q, want %q (first wan, second lan, rest opt)", b.Name, nic.Name, nic.Role, want)
			}
			if sym, ok := nicDriverConfig[nic.Driver]; nic.Driver == "" {
				// Any NIC the kernel drives (generic-x86_64).
			} else if !ok {
				t.Errorf("board %s: %s driver %q has no row in nicDriverConfig", b.Name, nic.Name, nic.Driver)
			} else if set[sym] != "y" {
				t.Errorf("board %s: %s driver %s: kernel config has %s=%q, want y", b.Name, nic.Name, nic.Driver, sym, set[sym])
			}
		}
		if sym, ok := watchdogConfig[b.Watchdog]; b.Watchdog != "" && (!ok || set[sym] != "y") {
			t.Errorf("board %s: watchdog %q: kernel config symbol %q = %q, want y", b.Name, b.Watchdog, sym, set[sym])
		}
		if (b.QEMU != nil) != (b.Family == "qemu") {
			t.Errorf("board %s: family %q but QEMU settings %v", b.Name, b.Family, b.QEMU)
		}
	}
}

// Boards hand out fresh slices: changing one board's modules changes no
// other board and no later All().
func TestAllReturnsIndependentCopies(t *testing.T) {
	a := mustLookup(t, "net5501")
	a.Modules[0] = "changed"
	a.NICs[0].Driver = "changed"
	for _, b := range All() {
		if slices.Contains(b.Modules, "changed") || slices.ContainsFunc(b.NICs, func(n NIC) bool { return n.Driver == "changed" }) {
			t.Errorf("board %s sees a change made to another board's copy", b.Name)
		}
	}
}

// nicDriverConfig and watchdogConfig name the kernel symbol of each driver
// a board definition names, so a board cannot name a driver its kernel
// does not build in.
var nicDriverConfig = map[string]string{
	"natsemi": "CONFIG_NATSEMI", "via-rhine": "CONFIG_VIA_RHINE", "e1000": "CONFIG_E1000",
	"e1000e": "CONFIG_E1000E", "igb": "CONFIG_IGB", "virtio_net": "CONFIG_VIRTIO_NET",
}

var watchdogConfig = map[string]string{
	"Geode GX/LX WDT": "CONFIG_GEODE_WDT", "NatSemi SCx200 Watchdog": "CONFIG_SCx200_WDT",
	"Intel Atom E6xx Watchdog": "CONFIG_IE6XX_WDT", "SP5100 TCO": "CONFIG_SP5100_TCO",
	"i6300ESB timer": "CONFIG_I6300ESB_WDT",
}

func TestLookup(t *testing.T) {
	tests := []struct {
		in        string
		want      string // board name, "" for an error
		wantError string // substring of the error
	}{
		{in: "alix2d13", want: "alix2d13"},
		{in: "ALIX2D3", want: "alix2d13"},
		{in: " alix2c3 ", want: "alix2d13"},
		{in: "alix3d2", want: "alix3d"},
		{in: "apu4", want: "apu2"},
		{in: "qemu", want: "qemu"},
		{in: "net4501", want: "net4501", wantError: "board net4501 is not supported: AMD Elan SC520 has no MMX"},
		{in: "wrt54g", wantError: `unknown board "wrt54g": valid boards are alix2d13, alix3d, net4801, net5501, net6501, epia-c3, epia-c3-ezra, epia-c7, apu2, generic-x86_64, qemu, qemu-x86_64`},
		{in: "", wantError: `unknown board ""`},
	}
	for _, tc := range tests {
		b, err := Lookup(tc.in)
		if tc.wantError == "" {
			if err != nil || b.Name != tc.want {
				t.Errorf("Lookup(%q) = %q, %v; want %q, nil", tc.in, b.Name, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantError) {
			t.Errorf("Lookup(%q) error = %v; want one containing %q", tc.in, err, tc.wantError)
		}
		if b.Name != tc.want {
			t.Errorf("Lookup(%q) board = %q; want %q", tc.in, b.Name, tc.want)
		}
	}

	_, err := Lookup("net4501")
	var unsupported *UnsupportedError
	if !errors.As(err, &unsupported) || unsupported.Reason != net4501Reason {
		t.Errorf("Lookup(net4501) error = %#v; want *UnsupportedError with the MMX reason", err)
	}
	_, err = Lookup("nope")
	var unknown *UnknownBoardError
	if !errors.As(err, &unknown) || slices.Contains(unknown.Valid, "net4501") {
		t.Errorf("Lookup(nope) error = %#v; want *UnknownBoardError whose valid names leave out net4501", err)
	}
	if strings.Contains(err.Error(), ". ") {
		t.Errorf("Lookup(nope) error %q is more than one sentence", err)
	}
}

// Every supported board has its kernel fragment, every fragment a board, and
// the fragments parse.
func TestKernelFragments(t *testing.T) {
	have, err := kernel.BoardFragments()
	if err != nil {
		t.Fatal(err)
	}
	var supported []string
	for _, b := range All() {
		if b.Unsupported != "" {
			continue
		}
		supported = append(supported, b.Name)
		frags, err := kernel.Fragments(b.KernelClass, b.Name)
		if err != nil {
			t.Errorf("board %s: %v", b.Name, err)
			continue
		}
		set, err := kernel.ParseSettings(frags...)
		if err != nil {
			t.Errorf("board %s: %v", b.Name, err)
		}
		for _, m := range b.Modules {
			if !slices.Contains(slices.Collect(maps.Values(set)), "m") {
				t.Errorf("board %s loads module %s but its kernel config builds no module", b.Name, m)
			}
		}
	}
	for _, f := range have {
		if !slices.Contains(supported, f) {
			t.Errorf("kernel/config/board/%s.config belongs to no supported board", f)
		}
	}
}

// kernelSettings are the merged kernel config fragments of b's kernel.
func kernelSettings(t *testing.T, b Board) kernel.Settings {
	t.Helper()
	frags, err := kernel.Fragments(b.KernelClass, b.Name)
	if err != nil {
		t.Fatal(err)
	}
	set, err := kernel.ParseSettings(frags...)
	if err != nil {
		t.Fatal(err)
	}
	return set
}
