package webui

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"

	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/ipsec"
)

// fakeIked serves GET /v1/tunnels and /v1/counters on a unix socket as iked does, with
// statuses the test sets, so that counters and states are exactly what the
// test wants (TestBrowser runs the real iked). The client under test is the
// real one.
type fakeIked struct {
	mu      sync.Mutex
	tunnels []ipsec.TunnelStatus
	actions []string // "up branch", "down branch"
	sock    string
}

func startFakeIked(t testing.TB) *fakeIked {
	t.Helper()
	return startFakeIkedAt(t, filepath.Join(t.TempDir(), "iked.sock"))
}

func startFakeIkedAt(t testing.TB, sock string) *fakeIked {
	t.Helper()
	f := &fakeIked{sock: sock}
	ln, err := net.Listen("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	list := func() []ipsec.TunnelStatus {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.tunnels
	}
	mux.HandleFunc("GET /v1/tunnels", ikedapi.ServeTunnels(list))
	mux.HandleFunc(ikedapi.RouteCounters, ikedapi.ServeCounters(list))
	for _, action := range []string{"up", "down"} {
		mux.HandleFunc("POST /v1/tunnels/{name}/"+action, func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, t := range f.tunnels {
				if t.Name == r.PathValue("name") {
					f.actions = append(f.actions, action+" "+t.Name)
					w.WriteHeader(http.StatusAccepted)
					return
				}
			}
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]string{"error": "no tunnel named " + r.PathValue("name")})
		})
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return f
}

func (f *fakeIked) set(ts ...ipsec.TunnelStatus) {
	f.mu.Lock()
	f.tunnels = ts
	f.mu.Unlock()
}

func upTunnel(name string, in, out uint64, spi string) ipsec.TunnelStatus {
	now := time.Now()
	return ipsec.TunnelStatus{Name: name, State: ipsec.StateUp, Since: now.Add(-time.Hour), DataPlane: "userspace",
		LocalAddr: "203.0.113.1", RemoteAddr: "198.51.100.7:4500",
		IKE: &ipsec.IKESAStatus{InitiatorSPI: "1122334455667788", ResponderSPI: "99aabbccddeeff00", Initiator: true,
			Proposal: "aes128gcm16-prfsha256-ecp256", NATT: true, Established: now.Add(-time.Hour), RekeyIn: 3 * time.Hour},
		Children: []ipsec.ChildSAStatus{{InboundSPI: spi, OutboundSPI: "c0ffee01", Proposal: "aes128gcm16",
			LocalTS: []string{"192.168.1.0/24"}, RemoteTS: []string{"10.20.0.0/16"}, BytesIn: in, BytesOut: out,
			PacketsIn: in / 1000, PacketsOut: out / 1000, Established: now.Add(-10 * time.Minute), RekeyIn: 50 * time.Minute}},
		Events:      []ipsec.TunnelEvent{{Time: now.Add(-time.Hour), Message: "IKE_SA established with 198.51.100.7"}},
		EventsTotal: 40,
	}
}

func TestIkedClient(t *testing.T) {
	c := ikedapi.NewClient(filepath.Join(t.TempDir(), "none.sock"))
	if _, err := c.Tunnels(context.Background()); !errors.Is(err, ikedapi.ErrNotRunning) {
		t.Errorf("no socket: %v, want ikedapi.ErrNotRunning", err)
	}
	stale := filepath.Join(t.TempDir(), "stale.sock")
	ln, _ := net.Listen("unix", stale)
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := ikedapi.NewClient(stale).Tunnels(context.Background()); !errors.Is(err, ikedapi.ErrNotRunning) {
		t.Errorf("stale socket: %v, want ikedapi.ErrNotRunning", err)
	}
	f := startFakeIked(t)
	f.set(upTunnel("branch", 1, 2, "aa000001"))
	got, err := ikedapi.NewClient(f.sock).Tunnels(context.Background())
	if err != nil || len(got) != 1 || got[0].State != ipsec.StateUp || got[0].Children[0].BytesOut != 2 {
		t.Errorf("tunnels %+v, %v", got, err)
	}
}

func TestTunnelStateFromIked(t *testing.T) {
	f := startFakeIked(t)
	h := newHarness(t, true, func(o *Options) { o.Tunnels = ikedapi.NewClient(f.sock) })
	b := h.browser()
	b.login()
	for _, n := range []string{"branch", "depot"} {
		form := tunnelForm(n)
		if n == "depot" {
			form.Set("remote_subnets", "10.30.0.0/16")
		}
		b.post("/tunnels/new", form)
	}
	b.post("/changes/commit", url.Values{"mode": {"plain"}})
	failed := ipsec.TunnelStatus{Name: "depot", State: ipsec.StateFailed, Since: time.Now(),
		Reason: "peer answered NO_PROPOSAL_CHOSEN: we offered aes128gcm16-prfsha256-ecp256, it wants aes256-sha1-modp2048"}

	// Samples: the sampler turns counters into rates; a rekey (new SPI,
	// counters from zero) is not a negative rate.
	start := time.Now()
	for i, st := range []ipsec.TunnelStatus{
		upTunnel("branch", 0, 0, "aa000001"),
		upTunnel("branch", 5_000_000, 1_000_000, "aa000001"),
		upTunnel("branch", 10_000_000, 2_000_000, "aa000001"),
		upTunnel("branch", 500_000, 100_000, "aa000002"), // rekeyed
	} {
		f.set(st, failed)
		h.srv.sampler.record(mustCounters(t, f), start.Add(time.Duration(i)*sampleInterval))
	}
	rates := h.srv.sampler.rates("branch")
	if len(rates) != 3 {
		t.Fatalf("%d rates, want 3 (four samples)", len(rates))
	}
	if rates[0].In != 1_000_000 || rates[0].Out != 200_000 || rates[2].In != 100_000 {
		t.Errorf("rates %+v, want 1 MB/s in, 200 kB/s out, then 100 kB/s in after the rekey", rates)
	}

	page := b.get("/tunnels")
	mustContain(t, "tunnel list", page.Body, ">up<", ">failed<", "NO_PROPOSAL_CHOSEN", "<polyline")
	detail := b.get("/tunnels/branch")
	mustContain(t, "tunnel detail", detail.Body, "1122334455667788", "aa000002 / c0ffee01", "aes128gcm16", "NAT-T",
		"IKE_SA established", "Recent events (the last 1 of 40)", "10.20.0.0/16", "rekey in 3h 00m")
	dash := b.get("/")
	mustContain(t, "dashboard", dash.Body, "branch", "depot", "Mbit/s")
	live := b.get("/live/dashboard")
	if live.Code != http.StatusOK || strings.Contains(live.Body, "<html") || !strings.Contains(live.Body, "NO_PROPOSAL_CHOSEN") {
		t.Errorf("live dashboard fragment: %d, %.200s", live.Code, live.Body)
	}
}

func TestTunnelUpDown(t *testing.T) {
	f := startFakeIked(t)
	h := newHarness(t, true, func(o *Options) { o.Tunnels = ikedapi.NewClient(f.sock) })
	b := h.browser()
	b.login()
	b.post("/tunnels/new", tunnelForm("branch"))
	if msg := b.flashOf(b.post("/tunnels/branch/up", nil)); !strings.Contains(msg, "commit it first") {
		t.Errorf("up of an uncommitted tunnel said %q", msg)
	}
	b.post("/changes/commit", url.Values{"mode": {"plain"}})
	f.set(upTunnel("branch", 0, 0, "aa000001"))
	mustContain(t, "tunnel page", b.get("/tunnels/branch").Body, "Connect now", "Disconnect")
	if msg := b.flashOf(b.post("/tunnels/branch/up", nil)); !strings.Contains(msg, "bringing tunnel branch up") {
		t.Errorf("up said %q", msg)
	}
	if r, _ := b.api("POST", "/api/v1/tunnels/branch/down", ""); r.Code != http.StatusAccepted {
		t.Errorf("API down: %d %s", r.Code, r.Body)
	}
	f.mu.Lock()
	got := strings.Join(f.actions, ", ")
	f.mu.Unlock()
	if got != "up branch, down branch" {
		t.Errorf("iked was asked %q, want up then down", got)
	}

	// Without iked the page says so.
	h2 := newHarness(t, true, func(o *Options) { o.Tunnels = ikedapi.NewClient(filepath.Join(t.TempDir(), "none.sock")) })
	b2 := h2.browser()
	b2.login()
	b2.post("/tunnels/new", tunnelForm("branch"))
	b2.post("/changes/commit", url.Values{"mode": {"plain"}})
	if msg := b2.flashOf(b2.post("/tunnels/branch/down", nil)); !strings.Contains(msg, "Not done: iked is not running") {
		t.Errorf("down without iked said %q", msg)
	}
}

func mustCounters(t *testing.T, f *fakeIked) []ikedapi.TunnelCounters {
	got, err := ikedapi.NewClient(f.sock).Counters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestRateGraph(t *testing.T) {
	if g := string(rateGraph(nil, 200, 40)); !strings.Contains(g, "no traffic yet") || strings.Contains(g, "polyline") {
		t.Errorf("empty graph %s", g)
	}
	rates := []Rate{{In: 100, Out: 50}, {In: 120_000, Out: 3_000}, {In: 60_000, Out: 0}}
	g := string(rateGraph(rates, 200, 40))
	if strings.Count(g, "<polyline") != 2 || !strings.Contains(g, ">1 Mbit/s<") {
		t.Errorf("graph of a 120 kB/s (960 kbit/s) peak: %s; want two lines and a 1 Mbit/s scale", g)
	}
	for _, tc := range []struct {
		v    float64
		want float64
	}{{0, 1000}, {999, 1000}, {1001, 2000}, {4500, 5000}, {120_000, 200_000}, {7e8, 1e9}} {
		if got := niceCeil(tc.v); got != tc.want {
			t.Errorf("niceCeil(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestHostInfo(t *testing.T) {
	for _, tc := range []struct {
		line        string
		busy, total uint64
		bad         bool
	}{
		{"cpu  100 0 50 800 50 0 0 0 0 0", 150, 1000, false},
		{"cpu  1 2 3 4", 6, 10, false},
		{"cpu  1 2 3 4 5 6 7 8 9 10", 1 + 2 + 3 + 6 + 7 + 8, 36, false},
		{"cpu0 1 2 3 4", 0, 0, true},
		{"cpu  x 2 3 4", 0, 0, true},
		{"", 0, 0, true},
	} {
		got, err := parseCPULine(tc.line)
		if (err != nil) != tc.bad || got.Busy != tc.busy || got.Total != tc.total {
			t.Errorf("parseCPULine(%q) = %+v, %v; want busy %d total %d (error %v)", tc.line, got, err, tc.busy, tc.total, tc.bad)
		}
	}
	m, err := readMemory("testdata/root")
	if err != nil || m.TotalKiB != 251904 || m.AvailableKiB != 180000 {
		t.Errorf("memory %+v, %v", m, err)
	}
	up, err := readUptime("testdata/root")
	if err != nil || up != 1234*time.Second {
		t.Errorf("uptime %v, %v", up, err)
	}
	// The real machine too: the dashboard must work on whatever runs it.
	if _, err := readCPUTimes("/"); err != nil {
		t.Errorf("CPU times of this machine: %v", err)
	}
}

func FuzzParseCPULine(f *testing.F) {
	f.Add("cpu  100 0 50 800 50 0 0 0 0 0")
	f.Add("cpu 1")
	f.Add("cpu  18446744073709551615 18446744073709551615 1 1 1")
	f.Fuzz(func(t *testing.T, line string) {
		got, err := parseCPULine(line)
		if err == nil && !strings.HasPrefix(strings.TrimSpace(line), "cpu") {
			t.Errorf("accepted %q", line)
		}
		_ = got
	})
}

// TestLogsAndReboot runs a real supervisor with one service and serves
// its API on a unix socket.
// TestLinksFromNetd: the dashboard and the interfaces page show the links
// netd reports (the web UI reads no /sys), and say so when netd does not
// answer instead of showing no ports.
func TestLinksFromNetd(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()
	var d Dashboard
	r, _ := b.api("GET", "/api/v1/dashboard", "")
	if err := json.Unmarshal([]byte(r.Body), &d); r.Code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/v1/dashboard: %d %s (%v)", r.Code, r.Body, err)
	}
	want := []Link{
		{Name: "eth0", State: "up", MAC: "00:0d:b9:00:00:01", MTU: 1500, Addresses: []string{"10.0.2.15/24"}, RxBytes: 123456789, TxBytes: 98765432},
		{Name: "eth1", State: "down", MAC: "00:0d:b9:00:00:02", MTU: 1500, Addresses: []string{"192.168.1.1/24"}},
	}
	if !reflect.DeepEqual(d.Links, want) || slices.ContainsFunc(d.Problems, func(p string) bool { return strings.HasPrefix(p, "interfaces") }) {
		t.Errorf("dashboard interfaces %+v, problems %q; want netd's links %+v", d.Links, d.Problems, want)
	}
	mustContain(t, "the interfaces page", b.get("/interfaces").Body, "10.0.2.15/24", "117.7 MiB")

	down := newHarness(t, true, func(o *Options) {
		o.Links = linkTable{err: errors.New("dial unix /run/flashgate/netd-web.sock: connect: no such file or directory")}
	})
	b = down.browser()
	b.login()
	d = Dashboard{}
	r, _ = b.api("GET", "/api/v1/dashboard", "")
	json.Unmarshal([]byte(r.Body), &d)
	if len(d.Links) != 0 || !slices.ContainsFunc(d.Problems, func(p string) bool {
		return strings.HasPrefix(p, "interfaces: netd did not answer") && strings.Contains(p, "netd-web.sock")
	}) {
		t.Errorf("dashboard without netd: interfaces %+v, problems %q; want none and a problem saying netd did not answer", d.Links, d.Problems)
	}
}

func TestLogsAndReboot(t *testing.T) {
	var mu sync.Mutex
	var power []supervisor.PowerAction
	sup, err := supervisor.New(supervisor.Config{
		Services: []supervisor.Service{{Name: "iked", Path: "/bin/sh", Args: []string{"-c", "echo 'iked: hello <b>'; exec sleep 100"}, StopTimeout: time.Second}},
		Power: func(a supervisor.PowerAction) error {
			mu.Lock()
			power = append(power, a)
			mu.Unlock()
			return nil
		},
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sup.Run(ctx); close(done) }()
	t.Cleanup(func() { sup.Shutdown(2 * time.Second); cancel(); <-done })
	sock := filepath.Join(t.TempDir(), "supervisor.sock")
	if err := sup.Serve(ctx, sock); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, true, func(o *Options) { o.Supervisor = supervisor.NewClient(sock) })
	b := h.browser()
	b.login()
	deadline := time.Now().Add(10 * time.Second)
	var page response
	for time.Now().Before(deadline) {
		page = b.get("/logs/iked")
		if strings.Contains(page.Body, "hello") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mustContain(t, "logs page", page.Body, "iked: hello <b>", "running", `data-live="/live/logs/iked"`)
	if strings.Contains(page.Body, "hello <b>") {
		t.Error("log text is not escaped")
	}
	if live := b.get("/live/logs/iked"); !strings.Contains(live.Body, "iked: hello") {
		t.Errorf("live logs fragment: %.200s", live.Body)
	}
	if r := b.post("/system/reboot", nil); !strings.Contains(b.flashOf(r), "Rebooting") {
		t.Error("reboot did not say it is rebooting")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(power) != 1 || power[0] != supervisor.Reboot {
		t.Errorf("power actions %v, want one reboot", power)
	}
}
