package webui

import (
	"context"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/hwcrypto"
	"github.com/flashgate/flashgate/services/configd"
	"github.com/flashgate/flashgate/services/configd/client"
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
// form (seeing a validation message on the way), commits it and finds it in
// the list, and keeps screenshots of the pages under out/test/screenshots.
//
// The steps are in order and share the browser. When iked lands, the step
// that brings the tunnel up against a strongSwan peer in a network
// namespace (internal/testnet) goes between "commit" and "dashboard", and
// the dashboard step then expects "up" instead of "iked is not running".
func TestBrowser(t *testing.T) {
	cfg, _ := startConfigd(t)
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
	ikedSock := filepath.Join(t.TempDir(), "iked.sock")
	srv, err := New(Options{
		Config:      cfg,
		Tunnels:     NewIkedClient(ikedSock), // nothing listens yet: iked is not running
		Supervisor:  startSupervisor(t),
		Crypto:      report,
		Board:       BoardInfo{Name: "build host", Description: "browser test on the build machine", Version: "test"},
		Root:        "/",
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
		{"dashboard", browserDashboard},
		{"other pages", browserOtherPages},
		{"stand-in iked", func(s *browserSession) { browserStandInIked(s, srv, cfg, ikedSock) }},
		{"log out", browserLogout},
	}
	for _, step := range steps {
		ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
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

func browserDashboard(s *browserSession) {
	s.do("dashboard", chromedp.Navigate(s.base+"/"), chromedp.WaitVisible(chromedp.CSS(".tunnels")))
	txt := s.text("main")
	for _, want := range []string{"build host", "branch", "iked is not running", "Crypto engine"} {
		if !strings.Contains(txt, want) {
			s.t.Errorf("dashboard does not show %q", want)
		}
	}
	// The live region refreshes itself from /live/dashboard.
	s.do("live refresh", chromedp.Sleep(6*time.Second))
	s.screenshot("dashboard.png")
}

func browserOtherPages(s *browserSession) {
	for _, p := range []struct{ path, wait, shot string }{
		{"/firewall", "main h1", "firewall.png"},
		{"/interfaces", "main table", "interfaces.png"},
		{"/system", "form.form", "system.png"},
	} {
		s.do(p.path, chromedp.Navigate(s.base+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		s.screenshot(p.shot)
	}
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

// browserStandInIked starts a stand-in for iked on the socket the UI
// reads (iked itself is not written yet) and feeds the sampler six minutes
// of made-up counters, to see the up state, a failure reason and the
// graphs in a real browser. Its screenshot is named for what it is.
func browserStandInIked(s *browserSession, srv *Server, cfg *client.Client, sock string) {
	ctx := context.Background()
	cand, err := cfg.Candidate(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	depot := config.NewTunnel("depot")
	depot.RemoteAddress = config.MustAddr("203.0.113.40")
	depot.PSK = config.NewSecret(generatePSK())
	depot.LocalSubnets = []config.Prefix{config.MustPrefix("192.168.1.0/24")}
	depot.RemoteSubnets = []config.Prefix{config.MustPrefix("10.40.0.0/16")}
	cand.Config.Tunnels = append(cand.Config.Tunnels, depot)
	if _, err := cfg.ReplaceCandidate(ctx, cand.Etag, cand.Config); err != nil {
		s.t.Fatal(err)
	}
	if _, err := cfg.Commit(ctx, configd.CommitRequest{Who: "test", Message: "second tunnel"}); err != nil {
		s.t.Fatal(err)
	}
	f := startFakeIkedAt(s.t, sock)
	failed := ipsec.TunnelStatus{Name: "depot", State: ipsec.StateFailed, Since: time.Now().Add(-2 * time.Minute),
		Reason: "peer answered NO_PROPOSAL_CHOSEN: we offered aes128gcm16-prfsha256-ecp256, it wants aes256-sha1-modp2048"}
	now := time.Now()
	var in, out uint64
	for i := 0; i < sampleKeep; i++ {
		rate := 1.5e6 * (1.1 + math.Sin(float64(i)/6))
		in += uint64(rate * sampleInterval.Seconds())
		out += uint64(rate * 0.35 * sampleInterval.Seconds())
		st := upTunnel("branch", in, out, "c1a2b3c4")
		srv.sampler.record([]ipsec.TunnelStatus{st, failed}, now.Add(time.Duration(i-sampleKeep)*sampleInterval))
		f.set(st, failed)
	}
	s.do("dashboard with the stand-in", chromedp.Navigate(s.base+"/"), chromedp.WaitVisible(chromedp.CSS(".tunnels polyline")))
	if txt := s.text(".tunnels"); !strings.Contains(txt, "up") || !strings.Contains(txt, "NO_PROPOSAL_CHOSEN") {
		s.t.Errorf("dashboard tunnels with the stand-in iked: %q", txt)
	}
	s.screenshot("dashboard-stand-in-iked.png")
	s.do("detail with the stand-in", chromedp.Navigate(s.base+"/tunnels/branch"), chromedp.WaitVisible(chromedp.CSS(".graphbox polyline")))
	s.screenshot("tunnel-detail-stand-in-iked.png")
}

// startSupervisor runs a real supervisor with one service whose output is
// real (uname), serving its API on a unix socket, for the Logs page.
func startSupervisor(t *testing.T) *supervisor.Client {
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
	sock := filepath.Join(t.TempDir(), "supervisor.sock")
	if err := sup.Serve(ctx, sock); err != nil {
		t.Fatal(err)
	}
	return supervisor.NewClient(sock)
}
