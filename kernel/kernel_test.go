package kernel

import (
	"strings"
	"testing"
)

func TestParseSettings(t *testing.T) {
	s, err := ParseSettings(
		Fragment{Name: "a", Text: []byte("# comment\nCONFIG_A=y\nCONFIG_B=m\n\nCONFIG_S=\"x y\"\n")},
		Fragment{Name: "b", Text: []byte("# CONFIG_A is not set\nCONFIG_N=16\n")},
	)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"CONFIG_A": "n", "CONFIG_B": "m", "CONFIG_S": `"x y"`, "CONFIG_N": "16"} {
		if s[k] != want {
			t.Errorf("%s = %q, want %q (later fragments win)", k, s[k], want)
		}
	}
	_, err = ParseSettings(Fragment{Name: "board/x.config", Text: []byte("CONFIG_A=y\nGEODE=y\n")})
	if err == nil || !strings.Contains(err.Error(), "board/x.config:2") {
		t.Errorf("a stray line: %v; want the fragment and line named", err)
	}
}

func TestMissing(t *testing.T) {
	want := Settings{"CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_C": "y", "CONFIG_D": "m"}
	got := Settings{"CONFIG_A": "y", "CONFIG_C": "m", "CONFIG_D": "m"}
	miss := want.Missing(got)
	if len(miss) != 1 || !strings.HasPrefix(miss[0], "CONFIG_C=y asked, got m") {
		t.Errorf("Missing = %q", miss)
	}
	got["CONFIG_B"] = "y"
	delete(got, "CONFIG_A")
	miss = want.Missing(got)
	if len(miss) != 3 || !strings.Contains(miss[0], "CONFIG_A=y asked, got unset") || !strings.Contains(miss[1], "CONFIG_B should be off") {
		t.Errorf("Missing = %q", miss)
	}
}

func TestFragmentsAndKey(t *testing.T) {
	alix, err := Fragments(ClassI586, "alix2d13")
	if err != nil {
		t.Fatal(err)
	}
	if len(alix) != 3 || alix[0].Name != "common.config" || alix[1].Name != "cpu/i586.config" || alix[2].Name != "board/alix2d13.config" {
		t.Fatalf("fragments %v", alix)
	}
	if _, err := Fragments("i686", "alix2d13"); err == nil {
		t.Error("an unknown class was accepted")
	}
	if _, err := Fragments(ClassI586, "nosuchboard"); err == nil {
		t.Error("a board without a fragment was accepted")
	}
	k1 := Key(ClassI586, alix, "gcc 12")
	if k1 != Key(ClassI586, alix, "gcc 12") {
		t.Error("Key is not stable")
	}
	changed := append([]Fragment(nil), alix...)
	changed[2] = Fragment{Name: changed[2].Name, Text: append([]byte("CONFIG_X=y\n"), changed[2].Text...)}
	for what, k := range map[string]string{
		"a fragment's bytes": Key(ClassI586, changed, "gcc 12"),
		"the compiler":       Key(ClassI586, alix, "gcc 13"),
		"the class":          Key(ClassX8664, alix, "gcc 12"),
	} {
		if k == k1 {
			t.Errorf("changing %s keeps the cache key", what)
		}
	}
}

// The class the net4801 (Geode GX1, no CMOV) boots with must not ask for a
// processor type that implies CMOV.
func TestI586AssumesNoCMOV(t *testing.T) {
	frags, err := Fragments(ClassI586, "net4801")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSettings(frags...)
	if err != nil {
		t.Fatal(err)
	}
	// Linux's X86_CMOV list (arch/x86/Kconfig.cpu, 6.1).
	for _, cmov := range []string{"CONFIG_MK8", "CONFIG_MK7", "CONFIG_MCORE2", "CONFIG_MPENTIUM4", "CONFIG_MPENTIUMM",
		"CONFIG_MPENTIUMIII", "CONFIG_MPENTIUMII", "CONFIG_M686", "CONFIG_MVIAC3_2", "CONFIG_MVIAC7", "CONFIG_MCRUSOE",
		"CONFIG_MEFFICEON", "CONFIG_X86_64", "CONFIG_MATOM", "CONFIG_MGEODE_LX", "CONFIG_64BIT"} {
		if v := s[cmov]; v != "" && v != "n" {
			t.Errorf("%s=%s implies CMOV", cmov, v)
		}
	}
	if s["CONFIG_M586MMX"] != "y" {
		t.Errorf("CONFIG_M586MMX = %q, want y", s["CONFIG_M586MMX"])
	}
}

// Go's 386 runtime and x/sys make system calls that tinyconfig leaves out:
// nanosleep, futex and ppoll with a 32-bit time_t (without them every
// sleep returns ENOSYS at once, so Go processes spin, and the console's
// ppoll fails), epoll for the netpoller, futexes for its locks.
func TestI586HasWhatGo386Needs(t *testing.T) {
	frags, err := Fragments(ClassI586, "qemu")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSettings(frags...)
	if err != nil {
		t.Fatal(err)
	}
	for _, sym := range []string{"CONFIG_COMPAT_32BIT_TIME", "CONFIG_FUTEX", "CONFIG_EPOLL", "CONFIG_POSIX_TIMERS"} {
		if s[sym] != "y" {
			t.Errorf("%s = %q, want y", sym, s[sym])
		}
	}
}

func TestLocalVersion(t *testing.T) {
	if lv := LocalVersion(); !strings.HasPrefix(lv, "-") || !strings.HasSuffix(lv, "-flashgate") || strings.Count(lv, "-") != 2 {
		t.Errorf("LocalVersion %q, want -<debian revision>-flashgate", lv)
	}
}

// Route-based tunnels (docs/tunnels.md) put each tunnel's SAs behind an XFRM
// interface (ipsecN, type xfrm, with an if_id), so every board's kernel
// needs XFRM interfaces besides ESP; the interface driver needs IPv6 in
// Kconfig, and the MSS clamp on tunnel interfaces reads the route's MTU
// (nft "rt mtu", built into nf_tables).
func TestEveryKernelHasXFRMInterfaces(t *testing.T) {
	for _, c := range []struct {
		class Class
		board string
	}{
		{ClassI586, "alix2d13"}, {ClassI586, "net4801"}, {ClassI586, "qemu"}, {ClassX8664, "apu2"}, {ClassX8664, "qemu-x86_64"},
	} {
		frags, err := Fragments(c.class, c.board)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ParseSettings(frags...)
		if err != nil {
			t.Fatal(err)
		}
		for _, sym := range []string{"CONFIG_XFRM_USER", "CONFIG_XFRM_INTERFACE", "CONFIG_INET_ESP", "CONFIG_IPV6", "CONFIG_NF_TABLES"} {
			if s[sym] != "y" {
				t.Errorf("%s: %s = %q, want y", c.board, sym, s[sym])
			}
		}
	}
}
