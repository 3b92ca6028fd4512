package boards

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
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
	flavour       string
	baud          int
	minCardMB     int
	nics          int
	modules       []string // must all be among AllModules
	watchdog      string
}

// The boards issue 2 asks for, and the facts the issue fixes for them.
func TestBoardFacts(t *testing.T) {
	tests := []boardFacts{
		{"alix2d13", "386", "softfloat", "686", 38400, 32, 3, []string{"geode-aes", "geodewdt", "via-rhine", "pata_cs5536", "geode-rng", "leds-gpio"}, "Geode GX/LX WDT"},
		{"alix3d", "386", "softfloat", "686", 38400, 32, 1, []string{"geode-aes", "geodewdt", "via-rhine", "pata_cs5536"}, "Geode GX/LX WDT"},
		{"net4801", "386", "softfloat", "686", 19200, 32, 3, []string{"natsemi", "pata_sc1200", "scx200_wdt", "leds-net48xx"}, "NatSemi SCx200 Watchdog"},
		{"net5501", "386", "softfloat", "686", 19200, 32, 4, []string{"geode-aes", "geodewdt", "via-rhine", "pata_cs5536"}, "Geode GX/LX WDT"},
		{"net6501", "386", "sse2", "686", 19200, 32, 4, []string{"e1000e", "lpc_sch", "ie6xx_wdt", "ahci"}, "Intel Atom E6xx Watchdog"},
		{"epia-c3", "386", "softfloat", "686", 115200, 32, 1, []string{"padlock-aes", "via-rhine", "via-rng", "pata_via"}, ""},
		{"epia-c7", "386", "sse2", "686", 115200, 32, 1, []string{"padlock-aes", "padlock-sha", "via-rhine", "via-rng"}, ""},
		{"apu2", "amd64", "", "amd64", 115200, 64, 3, []string{"igb", "sp5100_tco", "aesni-intel", "pcengines-apuv2"}, "SP5100 TCO"},
		{"generic-x86_64", "amd64", "", "amd64", 115200, 64, 2, []string{"e1000e", "ahci", "sd_mod"}, ""},
		{"qemu", "386", "softfloat", "686", 115200, 32, 2, []string{"e1000", "ata_piix", "i6300esb"}, "i6300ESB timer"},
		{"qemu-x86_64", "amd64", "", "amd64", 115200, 64, 2, []string{"e1000", "ata_piix", "i6300esb"}, "i6300ESB timer"},
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
			check("KernelFlavour", b.KernelFlavour, tc.flavour)
			check("console device", b.Console.Device, "ttyS0")
			check("console baud", b.Console.Baud, tc.baud)
			check("MinCardMB", b.MinCardMB, tc.minCardMB)
			check("number of NICs", len(b.NICs), tc.nics)
			check("watchdog identity", b.Watchdog, tc.watchdog)
			all := b.AllModules()
			for _, m := range tc.modules {
				if !slices.Contains(all, m) {
					t.Errorf("%s: module %s missing from AllModules %v", tc.name, m, all)
				}
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
			if len(b.AllModules()) != 0 {
				t.Errorf("unsupported board %s lists modules %v; nothing will load them", b.Name, b.AllModules())
			}
			continue
		}
		switch {
		case b.GOARCH == "386" && (b.GO386 == "softfloat" || b.GO386 == "sse2") && b.KernelFlavour == "686":
		case b.GOARCH == "amd64" && b.GO386 == "" && b.KernelFlavour == "amd64":
		default:
			t.Errorf("board %s: GOARCH %q, GO386 %q, kernel flavour %q do not go together", b.Name, b.GOARCH, b.GO386, b.KernelFlavour)
		}
		if b.Console.Device != "ttyS0" || b.Console.Baud <= 0 {
			t.Errorf("board %s: console %+v", b.Name, b.Console)
		}
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
			if nic.Driver != "" && !slices.Contains(b.Modules.NIC, nic.Driver) {
				t.Errorf("board %s: %s driver %s is not in Modules.NIC %v", b.Name, nic.Name, nic.Driver, b.Modules.NIC)
			}
		}
		if len(b.Modules.Disk) == 0 || len(b.Modules.NIC) == 0 {
			t.Errorf("board %s: no disk (%v) or NIC (%v) modules: it could not boot or network", b.Name, b.Modules.Disk, b.Modules.NIC)
		}
		if (b.Watchdog == "") != (len(b.Modules.Watchdog) == 0) {
			t.Errorf("board %s: watchdog identity %q but watchdog modules %v", b.Name, b.Watchdog, b.Modules.Watchdog)
		}
		all := b.AllModules()
		for _, m := range commonModules {
			if !slices.Contains(all, m) {
				t.Errorf("board %s: common module %s missing", b.Name, m)
			}
		}
		// Softdeps u-root's modprobe ignores: order is up to us.
		for _, pair := range [][2]string{{"crc32c_generic", "ext4"}, {"realtek", "r8169"}, {"cs5535-mfd", "cs5535-mfgpt"}, {"cs5535-mfd", "gpio-cs5535"}, {"lpc_sch", "ie6xx_wdt"}, {"gpio-amd-fch", "pcengines-apuv2"}} {
			i, j := slices.Index(all, pair[0]), slices.Index(all, pair[1])
			if j >= 0 && (i < 0 || i > j) {
				t.Errorf("board %s: %s must load before %s; AllModules = %v", b.Name, pair[0], pair[1], all)
			}
		}
		if (b.QEMU != nil) != (b.Family == "qemu") {
			t.Errorf("board %s: family %q but QEMU settings %v", b.Name, b.Family, b.QEMU)
		}
	}
}

// Boards hand out fresh slices: changing one board's modules changes no
// other board and no later All().
func TestAllReturnsIndependentCopies(t *testing.T) {
	a := mustLookup(t, "alix2d13")
	a.Modules.Extra[0] = "changed"
	a.Modules.Disk[0] = "changed"
	for _, b := range All() {
		if slices.Contains(b.AllModules(), "changed") {
			t.Errorf("board %s sees a change made to another board's copy", b.Name)
		}
	}
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
		{in: "wrt54g", wantError: `unknown board "wrt54g": valid boards are alix2d13, alix3d, net4801, net5501, net6501, epia-c3, epia-c7, apu2, generic-x86_64, qemu, qemu-x86_64`},
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
