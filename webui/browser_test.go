package webui

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
	"github.com/flashgate/flashgate/ipsec/iked/ikedns"

	"github.com/chromedp/chromedp"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/internal/localapi"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec/hwcrypto"
	"github.com/flashgate/flashgate/ipsec/iked"
	"github.com/flashgate/flashgate/services/configd/configdapi"
)

// chromiumPath is Debian's chromium, which `make test` installs.
const chromiumPath = "/usr/bin/chromium"

// screenshotDir is where the browser test leaves its screenshots, relative
// to the repository root (tests run in webui/).
const screenshotDir = "../out/test/screenshots"

// browserSession is a headless Chromium driving a web UI served on
// loopback over the real TLS listener.
type browserSession struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

func (s *browserSession) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	s.t.Helper()
	if err := chromedp.Do(s.ctx, actions...); err != nil {
		s.t.Fatalf("%s: %v", what, err)
	}
}

func (s *browserSession) text(sel string) string {
	s.t.Helper()
	txt, err := chromedp.Run(s.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		s.t.Fatalf("text of %s: %v", sel, err)
	}
	return txt
}

func (s *browserSession) value(sel string) string {
	s.t.Helper()
	v, err := chromedp.Run(s.ctx, chromedp.Value(chromedp.CSS(sel)))
	if err != nil {
		s.t.Fatalf("value of %s: %v", sel, err)
	}
	return v
}

// screenshot saves a full-page PNG under out/test/screenshots.
func (s *browserSession) screenshot(name string) {
	s.t.Helper()
	buf, err := chromedp.Run(s.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		s.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	p := filepath.Join(screenshotDir, name)
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.t.Logf("screenshot %s (%d bytes)", p, len(buf))
}

// startBrowser runs Chromium headless with a fresh profile. Everything but
// loopback goes to a proxy address where nothing listens and every host
// name fails to resolve, so the browser cannot reach the network even if a
// feature tries.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the browser test needs Debian's chromium at %s (apt-get install chromium): %v", chromiumPath, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider"),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("ignore-certificate-errors", true), // our self-signed certificate
		chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
		chromedp.Flag("proxy-bypass-list", "127.0.0.1"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// The first action starts the browser, which then lives as long as the
	// context of that action: so not a context with a timeout, but a
	// timer that gives up on a browser that does not start.
	giveUp := time.AfterFunc(60*time.Second, cancelCtx)
	err := chromedp.Do(ctx)
	giveUp.Stop()
	if err != nil {
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	return ctx
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestBrowser logs in with a real browser, creates a tunnel through the
// form (seeing a validation message on the way), commits it, finds it in
// the list, brings a tunnel up against a strongSwan peer and sees it up on
// the dashboard, and keeps screenshots of the pages under
// out/test/screenshots.
//
// The steps are in order and share the browser. First without iked (the
// tunnel shows "unknown: iked is not running"), then with iked in a network
// namespace bringing a second tunnel, made in the same form, up against
// strongSwan.
func TestBrowser(t *testing.T) {
	cfg, fullCfg, _, _ := startConfigdAPIs(t)
	setAdmin(t, cfg, testAdmin, testPassword)
	report, err := hwcrypto.Detect("/")
	if err != nil {
		t.Logf("crypto engines of this machine: %v", err)
		report = nil
	}
	cert, err := LoadOrCreateCertificate("flashgate", time.Now(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// iked and the supervisor start in later steps, on these sockets:
	// until then the UI says they are not running.
	run := t.TempDir()
	ikedSock, superSock := filepath.Join(run, "iked.sock"), filepath.Join(run, "supervisor.sock")
	srv, err := New(Options{
		Config:      cfg,
		Tunnels:     ikedapi.NewClient(ikedSock),
		Supervisor:  supervisor.NewClient(superSock),
		Crypto:      report,
		Board:       BoardInfo{Name: "build host", Description: "browser test on the build machine", Version: "test"},
		Root:        "/",
		Links:       linkTable{links: testLinks},
		Fingerprint: cert.Fingerprint,
		Logf:        t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	addr := freeLoopbackAddr(t)
	served := make(chan error, 1)
	go srv.Run(sctx)
	go func() { served <- Serve(sctx, srv, cert, addr, "", t.Logf) }()
	t.Cleanup(func() { stop(); <-served })

	s := &browserSession{t: t, ctx: startBrowser(t), base: "https://" + addr}
	console := chromedp.Console(s.ctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			s.mu.Lock()
			s.console = append(s.console, m)
			s.mu.Unlock()
		}
	}()

	steps := []struct {
		name string
		run  func(*browserSession)
	}{
		{"login", browserLogin},
		{"tunnel form", browserTunnelForm},
		{"commit", browserCommit},
		{"tunnel list", browserTunnelList},
		{"dashboard without iked", browserDashboardNoIked},
		{"tunnel up with strongSwan", func(s *browserSession) { browserTunnelUp(s, fullCfg, ikedSock) }},
		{"other pages", func(s *browserSession) { browserOtherPages(s, superSock) }},
		{"import", browserImport},
		{"log out", browserLogout},
	}
	for _, step := range steps {
		ctx, cancel := context.WithTimeout(s.ctx, 90*time.Second)
		prev := s.ctx
		s.ctx = ctx
		t.Logf("step %s", step.name)
		step.run(s)
		s.ctx = prev
		cancel()
		if t.Failed() {
			t.Fatalf("step %s failed", step.name)
		}
	}

	// No script errors and no blocked resources (a CSP violation or a
	// missing static file would show here). The wrong login (401) and the
	// refused form (422) are the test's own doing.
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.console {
		expected := strings.Contains(m.Text, "status of 401") && strings.HasSuffix(m.URL, "/login") ||
			strings.Contains(m.Text, "status of 422") && strings.HasSuffix(m.URL, "/tunnels/new")
		if (m.IsException() || m.Type == "error") && !expected {
			t.Errorf("browser console: %s (%s:%d)", m, m.URL, m.Line+1)
		}
	}
}

// browserImport: Tunnels → Import with the flashboot gateway's
// isakmpd.conf pasted: the preview shows the IKEv1 tunnel marked weak and
// the Blowfish line with its reason; Save puts it into the pending changes.
func browserImport(s *browserSession) {
	data, err := os.ReadFile("testdata/isakmpd-flashboot-vpn.conf")
	if err != nil {
		s.t.Fatal(err)
	}
	s.do("open the import page from the tunnel list",
		chromedp.Navigate(s.base+"/tunnels"),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/tunnels/import"]`)),
		chromedp.Click(chromedp.CSS(`a[href="/tunnels/import"]`)),
		chromedp.WaitVisible(chromedp.ID("import-text")))
	s.do("paste and preview",
		chromedp.SetValue(chromedp.ID("import-text"), string(data)),
		chromedp.Click(chromedp.ID("import-preview-button")),
		chromedp.WaitVisible(chromedp.ID("import-preview")))
	preview := s.text("#import-preview")
	for _, want := range []string{"1 tunnel(s) from this isakmpd.conf", "VPN-A-B", "weak algorithms", "IKEv1", "aes128-sha1-modp1024",
		"192.168.2.0/24", "192.168.4.0/24", "taken from the file (not shown)"} {
		if !strings.Contains(preview, want) {
			s.t.Errorf("import preview lacks %q:\n%s", want, preview)
		}
	}
	if strings.Contains(preview, "yoursharedsecret") {
		s.t.Error("the preview shows the PSK")
	}
	if u := s.text("#unmapped"); !strings.Contains(u, "AES-SHA,BLF-SHA") || !strings.Contains(u, "BLF-SHA: blowfish is refused") {
		s.t.Errorf("unmapped lines: %q", u)
	}
	s.screenshot("tunnel-import-preview.png")
	s.do("save", chromedp.Click(chromedp.ID("import-save")), chromedp.WaitVisible(chromedp.CSS("p.flash")))
	if msg := s.text("p.flash"); !strings.Contains(msg, "Imported 1 tunnel(s) into the pending changes: VPN-A-B") {
		s.t.Errorf("after save: %q", msg)
	}
	if txt := s.text("main"); !strings.Contains(txt, "set tunnels VPN-A-B ike_version 1") || !strings.Contains(txt, "set tunnels VPN-A-B legacy_algorithms true") {
		s.t.Errorf("pending changes after the import: %q", txt)
	}
}

func browserLogin(s *browserSession) {
	s.do("open the UI", chromedp.Navigate(s.base+"/"), chromedp.WaitVisible(chromedp.ID("user")))
	if loc, _ := chromedp.Run(s.ctx, chromedp.Location()); !strings.Contains(loc, "/login?next=") {
		s.t.Errorf("without a session the UI is at %s, want the login page", loc)
	}
	s.do("wrong password",
		chromedp.SendKeys(chromedp.ID("user"), testAdmin),
		chromedp.SendKeys(chromedp.ID("password"), "not the password"),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.CSS(".flash.error")))
	if msg := s.text(".flash.error"); msg != wrongLogin {
		s.t.Errorf("wrong login says %q, want %q", msg, wrongLogin)
	}
	s.do("log in",
		chromedp.SetValue(chromedp.ID("user"), testAdmin),
		chromedp.SendKeys(chromedp.ID("password"), testPassword),
		chromedp.Submit(chromedp.ID("password")),
		chromedp.WaitVisible(chromedp.CSS(`[data-live="/live/dashboard"]`)))
}

func browserTunnelForm(s *browserSession) {
	s.do("open the tunnel form",
		chromedp.Navigate(s.base+"/tunnels/new"),
		chromedp.WaitVisible(chromedp.ID("f-name")))
	first := s.value("#f-psk")
	s.do("generate a key", chromedp.Click(chromedp.CSS("button[data-psk]")), chromedp.Sleep(300*time.Millisecond))
	if psk := s.value("#f-psk"); len(psk) != 43 || psk == first {
		s.t.Errorf("PSK after Generate: %q (was %q), want a new 43-character key", psk, first)
	}
	s.do("fill the form with a wrong peer address",
		chromedp.SendKeys(chromedp.ID("f-name"), "branch"),
		chromedp.SendKeys(chromedp.ID("f-remote_address"), "198.51.100.300"),
		chromedp.SetValue(chromedp.ID("f-local_subnets"), "192.168.1.0/24"),
		chromedp.SetValue(chromedp.ID("f-remote_subnets"), "10.20.0.0/16\n10.21.0.0/16"))
	s.screenshot("tunnel-form.png")
	s.do("submit", chromedp.Click(chromedp.CSS("form.form button.primary")),
		chromedp.WaitVisible(chromedp.ID("f-remote_address-err")))
	if msg := s.text("#f-remote_address-err"); !strings.Contains(msg, "not an IP address") {
		s.t.Errorf("message under the peer address: %q", msg)
	}
	s.screenshot("tunnel-form-errors.png")
	s.do("correct the address and save",
		chromedp.SetValue(chromedp.ID("f-remote_address"), "198.51.100.7"),
		chromedp.Click(chromedp.CSS("form.form button.primary")),
		chromedp.WaitVisible(chromedp.CSS(`[data-live="/live/tunnels"]`)))
	if txt := s.text("main"); !strings.Contains(txt, "branch") || !strings.Contains(txt, "not committed yet") {
		s.t.Errorf("tunnel list after saving: %q", txt)
	}
}

func browserCommit(s *browserSession) {
	s.do("commit",
		chromedp.Navigate(s.base+"/changes"),
		chromedp.WaitVisible(chromedp.CSS(`button[value="plain"]`)),
		chromedp.Click(chromedp.CSS(`button[value="plain"]`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")))
	if msg := s.text("p.flash"); !strings.Contains(msg, "is running") {
		s.t.Errorf("after commit: %q", msg)
	}
	s.screenshot("changes.png")
}

func browserTunnelList(s *browserSession) {
	s.do("tunnel list", chromedp.Navigate(s.base+"/tunnels"), chromedp.WaitVisible(chromedp.CSS(`[data-live="/live/tunnels"]`)))
	txt := s.text("main")
	for _, want := range []string{"branch", "198.51.100.7", "unknown", "iked is not running"} {
		if !strings.Contains(txt, want) {
			s.t.Errorf("tunnel list %q does not show %q", txt, want)
		}
	}
	if strings.Contains(txt, "pending") {
		s.t.Errorf("committed tunnel still marked pending: %q", txt)
	}
	s.screenshot("tunnels.png")
	s.do("detail", chromedp.Navigate(s.base+"/tunnels/branch"), chromedp.WaitVisible(chromedp.CSS(".bigstate")))
	s.screenshot("tunnel-detail.png")
}

func browserDashboardNoIked(s *browserSession) {
	s.do("dashboard", chromedp.Navigate(s.base+"/"), chromedp.WaitVisible(chromedp.CSS(".tunnels")))
	txt := s.text("main")
	for _, want := range []string{"build host", "branch", "iked is not running", "Crypto engine"} {
		if !strings.Contains(txt, want) {
			s.t.Errorf("dashboard does not show %q", want)
		}
	}
	s.screenshot("dashboard-iked-not-running.png")
}

func browserOtherPages(s *browserSession, superSock string) {
	for _, p := range []struct{ path, wait, shot string }{
		{"/firewall", "main h1", "firewall.png"},
		{"/routes", "main h1", "routes.png"},
		{"/interfaces", "main table", "interfaces.png"},
		{"/system", "form.form", "system.png"},
	} {
		s.do(p.path, chromedp.Navigate(s.base+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		s.screenshot(p.shot)
	}
	// The supervisor starts only now: its reaper waits for every child
	// of this process, which would take the exit status of the ping and
	// ip commands of the tunnel step from under them.
	startSupervisor(s.t, superSock)
	s.do("logs of a service", chromedp.Navigate(s.base+"/logs/uname"), chromedp.WaitVisible(chromedp.CSS("pre.log span")))
	if txt := s.text("pre.log"); !strings.Contains(txt, "Linux") {
		s.t.Errorf("log of the uname service: %q", txt)
	}
	s.screenshot("logs.png")
}

func browserLogout(s *browserSession) {
	s.do("log out", chromedp.Navigate(s.base+"/"), chromedp.WaitVisible(chromedp.CSS(".who button")),
		chromedp.Click(chromedp.CSS(".who button")), chromedp.WaitVisible(chromedp.ID("user")))
	s.do("a page after logout", chromedp.Navigate(s.base+"/tunnels"), chromedp.WaitVisible(chromedp.ID("user")))
}

// browserTunnelUp brings a tunnel up for real: two gateways and two hosts
// in network namespaces made for this test, strongSwan's charon on
// gateway B, our iked on gateway A following configd's commits and serving
// its status on the socket the UI reads. The tunnel is made through the
// form and committed in the browser; the test then waits for the UI to
// show it up, sends pings through it, and keeps the dashboard and the
// tunnel's page with their graphs.
// cfg is configd's full API: iked reads PSKs, as on the box.
func browserTunnelUp(s *browserSession, cfg *configdapi.Client, ikedSock string) {
	t := s.t
	topo := testnet.NewSiteToSite(t)
	const psk = "browser-test-psk-0123456789abcdef"
	testnet.StartCharon(t, topo.GwB, testnet.CharonConn{Name: "s2s", LocalAddr: topo.GwBWAN, RemoteAddr: topo.GwAWAN,
		LocalID: "gwB", RemoteID: "gwA", PSK: psk, Proposals: config.DefaultIKEProposal, ESPProposals: "aes128gcm16",
		LocalTS: []netip.Prefix{topo.LANB}, RemoteTS: []netip.Prefix{topo.LANA}})
	startIked(t, topo.GwA, cfg, ikedSock)

	s.do("open the tunnel form",
		chromedp.Navigate(s.base+"/tunnels/new"),
		chromedp.WaitVisible(chromedp.ID("f-name")),
		chromedp.SendKeys(chromedp.ID("f-name"), "site-b"),
		chromedp.SendKeys(chromedp.ID("f-remote_address"), topo.GwBWAN.String()),
		chromedp.SendKeys(chromedp.ID("f-local_address"), topo.GwAWAN.String()),
		chromedp.SendKeys(chromedp.ID("f-remote_id"), "gwB"),
		chromedp.SendKeys(chromedp.ID("f-local_id"), "gwA"),
		chromedp.SetValue(chromedp.ID("f-psk"), psk),
		chromedp.SetValue(chromedp.ID("f-local_subnets"), topo.LANA.String()),
		chromedp.SetValue(chromedp.ID("f-remote_subnets"), topo.LANB.String()),
		// ESP without PFS, as the peer is configured.
		chromedp.Click(chromedp.CSS(`input[name="esp_proposals"][value="`+config.DefaultESPProposal+`"]`)),
		chromedp.Click(chromedp.CSS(`input[name="esp_proposals"][value="aes128gcm16"]`)),
		chromedp.Click(chromedp.CSS("form.form button.primary")),
		chromedp.WaitVisible(chromedp.CSS(`[data-live="/live/tunnels"]`)))
	s.do("commit",
		chromedp.Navigate(s.base+"/changes"),
		chromedp.WaitVisible(chromedp.CSS(`button[value="plain"]`)),
		chromedp.Click(chromedp.CSS(`button[value="plain"]`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")))

	state := ""
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); {
		s.do("tunnel page", chromedp.Navigate(s.base+"/tunnels/site-b"), chromedp.WaitVisible(chromedp.CSS(".bigstate")))
		if state = s.text(".bigstate"); strings.HasPrefix(strings.TrimSpace(state), "up") {
			break
		}
		time.Sleep(time.Second)
	}
	if !strings.HasPrefix(strings.TrimSpace(state), "up") {
		t.Fatalf("tunnel site-b is not shown up within 45 s: %q", state)
	}
	if err := testnet.Ping(topo.HostA, topo.HostBIP, 3); err != nil {
		t.Errorf("hostA cannot reach hostB through the tunnel: %v", err)
	}
	// Some traffic over a few sampling intervals, for the graphs: 240
	// pings of 1200 bytes in 12 s, bounded in count and time.
	if _, err := topo.HostA.Output("ping", "-q", "-n", "-c", "240", "-i", "0.05", "-s", "1200", "-w", "20", topo.HostBIP.String()); err != nil {
		t.Errorf("traffic through the tunnel: %v", err)
	}
	s.do("dashboard", chromedp.Navigate(s.base+"/"), chromedp.WaitVisible(chromedp.CSS(".tunnels polyline")))
	txt := s.text(".tunnels")
	if !strings.Contains(txt, "site-b") || !strings.Contains(txt, "up") {
		t.Errorf("dashboard tunnels: %q, want site-b up", txt)
	}
	s.screenshot("dashboard.png")
	s.do("tunnel page", chromedp.Navigate(s.base+"/tunnels/site-b"), chromedp.WaitVisible(chromedp.CSS(".graphbox polyline")))
	txt = s.text("main")
	for _, want := range []string{"IKE SA", "ESP SAs", config.DefaultIKEProposal, topo.LANB.String()} {
		if !strings.Contains(txt, want) {
			t.Errorf("tunnel page does not show %q", want)
		}
	}
	s.screenshot("tunnel-detail-up.png")
}

// startIked runs our iked inside gateway A's namespace (userspace data
// plane: this kernel has no ESP), applying configd's running configuration
// at start and after each commit that changes the tunnels, and serving its
// status on sock.
func startIked(t *testing.T, ns *testnet.NS, cfg *configdapi.Client, sock string) {
	t.Helper()
	d := ikedns.Start(t, ns, iked.Options{Logf: t.Logf}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done, served := make(chan struct{}), make(chan error, 1)
	t.Cleanup(func() { cancel(); <-done; <-served })
	go func() { served <- d.Serve(ctx, sock, localapi.RootOnly) }()
	go func() {
		defer close(done)
		// Apply adds routes and SAs: in the gateway's namespace.
		ns.Do(func() error { d.Follow(ctx, cfg, t.Logf); return nil })
	}()
}

// startSupervisor runs a real supervisor with one service whose output is
// real (uname), serving its API on sock, for the Logs page.
func startSupervisor(t *testing.T, sock string) {
	t.Helper()
	sup, err := supervisor.New(supervisor.Config{
		Services: []supervisor.Service{{Name: "uname", Path: "/bin/sh", Args: []string{"-c", "uname -a; exec sleep 600"}, StopTimeout: time.Second}},
		Logf:     t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sup.Run(ctx); close(done) }()
	t.Cleanup(func() { sup.Shutdown(2 * time.Second); cancel(); <-done })
	if err := sup.Serve(ctx, sock); err != nil {
		t.Fatal(err)
	}
}
