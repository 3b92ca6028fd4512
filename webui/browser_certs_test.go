package webui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/flashgate/flashgate/internal/pki"
)

// TestBrowserCertificates drives the Certificates page in Chromium against
// a real configd: create a CA, issue this box's certificate, issue a
// peer's bundle (refused without the password, PEM and PKCS#12 with it),
// revoke the peer (the CA gets a CRL), and a tunnel authenticating with
// the box's certificate and trusting the CA, committed. No page ever
// carries a private key but the bundle asked for.
func TestBrowserCertificates(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium")
	}
	cfg, full, _, _ := startConfigdAPIs(t)
	setAdmin(t, cfg, testAdmin, testPassword)
	cert, err := LoadOrCreateCertificate("flashgate", time.Now(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Config: cfg, Root: "/", Fingerprint: cert.Fingerprint, Logf: t.Logf,
		Board: BoardInfo{Name: "build host", Version: "test"}})
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
	ctx, cancel := context.WithTimeout(s.ctx, 3*time.Minute)
	defer cancel()
	s.ctx = ctx
	browserLogin(s)

	s.do("create a CA",
		chromedp.Navigate(s.base+"/certificates"), chromedp.WaitVisible(chromedp.ID("ca-form")),
		chromedp.SendKeys(chromedp.ID("ca-name"), "office-ca"),
		chromedp.SendKeys(chromedp.ID("ca-cn"), "Office VPN CA"),
		chromedp.Click(chromedp.CSS("#ca-form button.primary")),
		chromedp.WaitVisible(chromedp.ID("cert-office-ca")))
	if txt := s.text("#cert-office-ca"); !strings.Contains(txt, "CA (issues here)") || !strings.Contains(txt, "ECDSA P-256") {
		t.Fatalf("CA row: %q", txt)
	}
	s.do("issue this box's certificate",
		chromedp.SendKeys(chromedp.ID("is-name"), "box"),
		chromedp.SendKeys(chromedp.ID("is-cn"), "box.example.net"),
		chromedp.SetValue(chromedp.ID("is-names"), "box.example.net"),
		chromedp.Click(chromedp.CSS("#issue-form button.primary")),
		chromedp.WaitVisible(chromedp.ID("cert-box")))
	if txt := s.text("#cert-box"); !strings.Contains(txt, "this box") || !strings.Contains(txt, "box.example.net") {
		t.Fatalf("box row: %q", txt)
	}
	// The peer's bundle, as the form posts it (fetch, so the test reads the download).
	issuePeer := func(name, format, password string) string {
		js := `(async () => {
  const f = new FormData(document.getElementById('issue-form'));
  f.set('for', 'peer'); f.set('name', '` + name + `'); f.set('common_name', '` + name + `.example.net');
  f.set('names', '` + name + `.example.net'); f.set('format', '` + format + `'); f.set('passphrase', 'bundle passphrase');
  f.set('password', '` + password + `');
  const r = await fetch('/certificates/issue', {method: 'POST', body: new URLSearchParams(f)});
  const b = new Uint8Array(await r.arrayBuffer());
  return r.headers.get('content-type') + ' ' + b.length + ' ' + new TextDecoder().decode(b).includes('PRIVATE KEY');
})()`
		res, err := chromedp.Run(s.ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("issue %s: %v", name, err)
		}
		return res
	}
	if res := issuePeer("peer0", "pem", "wrong password"); strings.Contains(res, "x-pem-file") {
		t.Fatalf("a peer's key with a wrong password: %s", res)
	}
	if res := issuePeer("peer1", "pem", testPassword); !strings.HasPrefix(res, "application/x-pem-file") || !strings.HasSuffix(res, "true") {
		t.Fatalf("peer PEM bundle: %s", res)
	}
	if res := issuePeer("peer2", "p12", testPassword); !strings.HasPrefix(res, "application/x-pkcs12") {
		t.Fatalf("peer PKCS#12 bundle: %s", res)
	}
	s.do("revoke peer1",
		chromedp.Navigate(s.base+"/certificates"), chromedp.WaitVisible(chromedp.ID("cert-peer1")),
		chromedp.Click(chromedp.CSS("#cert-peer1 button.danger")),
		chromedp.WaitVisible(chromedp.CSS("#cert-office-ca form.crl")))
	if txt := s.text("#cert-peer1"); !strings.Contains(txt, "revoked") {
		t.Errorf("peer1 after revoking: %q", txt)
	}
	html, err := chromedp.Run(s.ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(html, "PRIVATE KEY") || strings.Contains(html, "BEGIN EC") {
		t.Error("the Certificates page carries a private key")
	}

	s.do("a certificate tunnel",
		chromedp.Navigate(s.base+"/tunnels/new"), chromedp.WaitVisible(chromedp.ID("f-name")),
		chromedp.SendKeys(chromedp.ID("f-name"), "hq"),
		chromedp.SendKeys(chromedp.ID("f-remote_address"), "198.51.100.7"),
		chromedp.SetValue(chromedp.ID("f-auth"), "cert"),
		chromedp.SetValue(chromedp.ID("f-local_cert"), "box"),
		chromedp.SetValue(chromedp.ID("f-trusted_cas"), "office-ca"),
		chromedp.SetValue(chromedp.ID("f-local_subnets"), "192.168.1.0/24"),
		chromedp.SetValue(chromedp.ID("f-remote_subnets"), "10.20.0.0/16"),
		chromedp.Click(chromedp.CSS("form.form button.primary")),
		chromedp.WaitVisible(chromedp.CSS(`[data-live="/live/tunnels"]`)))
	browserCommit(s)
	running, _, err := full.Running(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tun := running.Tunnel("hq")
	if tun == nil || tun.Auth != "cert" || tun.LocalCert != "box" || len(tun.TrustedCAs) != 1 {
		t.Fatalf("committed tunnel: %+v", tun)
	}
	box, err := running.Certificate("box").Parse()
	if err != nil || box.Key == nil || !pki.MatchesKey(box.Cert, box.Key) {
		t.Fatalf("the box's certificate in configd: %v", err)
	}
}
