package bench

import (
	"regexp"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/boards"
)

// issueFigures are the figures issues 17 and 22 ask make bench to report
// (per board, per size and per group where they say so).
func issueFigures() []string {
	names := []string{
		"ike.hub.setup_s.n100", "ike.hub.setup_s.n1000",
		"ike.hub.rss_per_sa_bytes.n100", "ike.hub.rss_per_sa_bytes.n1000",
		"config.commit_ms.n10", "config.commit_ms.n100", "config.commit_ms.n1000",
		"config.commit_written_bytes.n10", "config.commit_written_bytes.n100", "config.commit_written_bytes.n1000",
		"config.open_ms.n1000",
		"webui.page_bytes.tunnels_1000",
		"ike.setup_ms_386",
		"dh.modp2048_ms_386", "dh.ecp256_ms_386", "dh.ecp384_ms_386", "dh.curve25519_ms_386",
		"boot.qemu128.mem_available_kb", "boot.qemu.pss_total_kb",
		"boot.qemu.login_s",
	}
	for _, b := range boards.All() {
		if b.Unsupported != "" {
			continue
		}
		names = append(names, "image."+b.Name+".firmware_bytes", "boot."+b.Name+".login_s",
			"kernel."+b.Name+".build_s", "kernel."+b.Name+".cached_s")
	}
	return names
}

// TestFiguresNeverLeftOut: with nothing measured (every suite failed), every
// figure the issues name is still reported, without a value and with the
// reason, and no figure is reported twice (a name with several peers, like
// esp.tcp_1stream_mbps, has one row per peer).
func TestFiguresNeverLeftOut(t *testing.T) {
	figs := Figures(nil, []string{"./images: boom"})
	byName := map[string]Figure{}
	rows := map[string]bool{}
	for _, f := range figs {
		if rows[f.Name+"|"+f.Peer] {
			t.Errorf("figure %s (peer %q) reported twice", f.Name, f.Peer)
		}
		rows[f.Name+"|"+f.Peer] = true
		byName[f.Name] = f
	}
	for _, name := range issueFigures() {
		f, ok := byName[name]
		switch {
		case !ok:
			t.Errorf("figure %s is left out when nothing was measured", name)
		case f.Value != nil:
			t.Errorf("figure %s has value %v with nothing measured", name, *f.Value)
		case !strings.Contains(f.Notes, "boom"):
			t.Errorf("figure %s does not say why it is missing: %q", name, f.Notes)
		}
	}
}

// TestImageAndBootFigures: each board's figures come from its own results,
// the qemu board's login time once (BenchmarkBootQEMU's, with the boards'
// boot of the same card in its notes), and a board whose boot failed is
// reported without a value.
func TestImageAndBootFigures(t *testing.T) {
	out := `pkg: github.com/flashgate/flashgate/images
BenchmarkImage/alix2d13-2   	1	 12.5 build_s	 8341432 firmware_bytes	 2900000 kernel_bytes	 5522872 initramfs_bytes	 1 init_bytes	 2000000 boot_free_bytes	 2029.8 kernel_build_s	 0.01 kernel_step_s
BenchmarkBootQEMU-2   	3	 5.30 login_s	 5.5 first_prompt_s	 7.1 first_login_s
BenchmarkBootBoards/qemu-2   	1	 5.90 login_s
BenchmarkBootBoards/net4801-2   	1	 6.90 login_s
PASS
`
	res, err := ParseBenchOutput(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	figs := map[string][]Figure{}
	for _, f := range Figures(res, nil) {
		figs[f.Name] = append(figs[f.Name], f)
	}
	value := func(name string) (float64, bool) {
		t.Helper()
		fs := figs[name]
		if len(fs) != 1 {
			t.Fatalf("%s reported %d times, want once", name, len(fs))
		}
		if fs[0].Value == nil {
			return 0, false
		}
		return *fs[0].Value, true
	}
	for _, c := range []struct {
		name string
		want float64
	}{
		{"image.alix2d13.firmware_bytes", 8341432},
		{"kernel.alix2d13.build_s", 2029.8},
		{"kernel.alix2d13.cached_s", 0.01},
		{"boot.qemu.login_s", 5.30},
		{"boot.net4801.login_s", 6.90},
	} {
		if v, ok := value(c.name); !ok || v != c.want {
			t.Errorf("%s = %v (measured %v), want %v", c.name, v, ok, c.want)
		}
	}
	if !strings.Contains(figs["boot.qemu.login_s"][0].Notes, "5.90 s") {
		t.Errorf("boot.qemu.login_s notes lack BenchmarkBootBoards' boot: %q", figs["boot.qemu.login_s"][0].Notes)
	}
	if f := figs["image.alix2d13.firmware_bytes"][0]; f.Target != "<= 8 MiB" {
		t.Errorf("alix2d13 firmware target %q, want <= 8 MiB (issue 17)", f.Target)
	}
	for _, name := range []string{"boot.alix2d13.login_s", "image.net4801.firmware_bytes", "kernel.apu2.cached_s"} {
		if _, ok := value(name); ok {
			t.Errorf("%s has a value, but its benchmark printed none", name)
		}
	}
}

// TestSuitesRunEveryFigure: every benchmark a figure is read from is run by
// some suite of make bench (go test -bench matches the first part of its
// pattern against the top-level benchmark's name). BenchmarkIKESetupCert,
// behind ike.setup_ms_cert, was in no suite, so the figure was never
// measured.
func TestSuitesRunEveryFigure(t *testing.T) {
	for pkg, benches := range map[string][]string{
		"./images":     {"BenchmarkImage", "BenchmarkBootQEMU", "BenchmarkBootBoards"},
		"./e2e":        {"BenchmarkApplianceRSS", "BenchmarkApplianceMem128", "BenchmarkE2ETunnelUp", "BenchmarkUpgradePowerCut"},
		"./config":     {"BenchmarkCommitSmallChange50Tunnels", "BenchmarkCommitSmallChangeTunnels"},
		"./ipsec/ike":  {"BenchmarkBytesPerSA", "BenchmarkDH", "BenchmarkSetup"},
		"./ipsec/esp":  {"BenchmarkEncap", "BenchmarkDecap"},
		"./webui":      {"BenchmarkPage", "BenchmarkIdleConns", "BenchmarkTunnelList"},
		"./ipsec/iked": {"BenchmarkIKEFloodSpoofed", "BenchmarkIKEFloodCookieEcho", "BenchmarkIKEFloodRSS"},
		"./bench": {"BenchmarkTunnelTCP", "BenchmarkRouteTunnelTCP", "BenchmarkRouteFailover", "BenchmarkIKESetup",
			"BenchmarkIKESetupRate", "BenchmarkIKESetupCert", "BenchmarkIKEv1Setup", "BenchmarkHub"},
	} {
		for _, name := range benches {
			run := false
			for _, s := range Suites {
				first, _, _ := strings.Cut(s.Pattern, "/")
				if s.Package == pkg && s.Board == "" && regexp.MustCompile(first).MatchString(name) {
					run = true
				}
			}
			if !run {
				t.Errorf("%s in %s: no suite of make bench runs it", name, pkg)
			}
		}
	}
}

// The marginal cost per SA at the hub is the difference of the two sizes'
// growth: 1000 SAs that grew 8 MB and 100 that grew 3.5 MB make 5 KB per
// SA from the 100th on.
func TestHubMarginalPerSA(t *testing.T) {
	res := []Result{
		{Name: "BenchmarkHub/n=100/flashgate", Metrics: map[string]float64{"rss_bytes/sa": 35000}},
		{Name: "BenchmarkHub/n=1000/flashgate", Metrics: map[string]float64{"rss_bytes/sa": 8000}},
		{Name: "BenchmarkHub/n=100/strongswan", Metrics: map[string]float64{"rss_bytes/sa": 38000}},
		{Name: "BenchmarkHub/n=1000/strongswan", Metrics: map[string]float64{"rss_bytes/sa": 23000}},
	}
	f := hubMarginal(res, "")
	if f.Value == nil || *f.Value != 5000 || f.PeerValue == nil || *f.PeerValue != (23000*1000-3800000)/900.0 {
		t.Fatalf("marginal figure %+v; want 5000 against %v", f, (23000*1000-3800000)/900.0)
	}
	if f := hubMarginal(res[1:], "no n=100"); f.Value != nil || !strings.Contains(f.Notes, "no n=100") {
		t.Errorf("with one size only: %+v; want unmeasured, with the reason", f)
	}
}
