package webui

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/pki"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
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
	ikedSock := filepath.Join(t.TempDir(), "iked.sock")
	srv, err := New(Options{Config: cfg, Tunnels: ikedapi.NewClient(ikedSock), Root: "/", Fingerprint: cert.Fingerprint, Logf: t.Logf,
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
  const text = new TextDecoder().decode(b);
  return r.headers.get('content-type') + ' ' + b.length + ' ' + text.includes('PRIVATE KEY') + (text.startsWith('-----BEGIN') ? '\n' + text : '');
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
	res := issuePeer("peer1", "pem", testPassword)
	head, bundle, _ := strings.Cut(res, "\n")
	if !strings.HasPrefix(head, "application/x-pem-file") || !strings.HasSuffix(head, "true") {
		t.Fatalf("peer PEM bundle: %s", head)
	}
	peerCerts, peerKey, _, err := pki.ParsePEM([]byte(bundle))
	if err != nil || len(peerCerts) != 2 || peerKey == nil {
		t.Fatalf("peer PEM bundle: %d certificates, key %v: %v", len(peerCerts), peerKey != nil, err)
	}
	// The bundle for the tunnel's peer (peer1 is revoked below).
	_, tpBundle, _ := strings.Cut(issuePeer("tunnelpeer", "pem", testPassword), "\n")
	tpCerts, tpKey, _, err := pki.ParsePEM([]byte(tpBundle))
	if err != nil || len(tpCerts) != 2 || tpKey == nil {
		t.Fatalf("the tunnel peer's bundle: %v", err)
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

	// The tunnel for real: charon on gateway B with the peer's bundle as
	// downloaded, iked on gateway A following configd, the tunnel made in
	// the form with the box's certificate and the CA, committed in the
	// browser; the UI must show it up and hosts ping through it.
	topo := testnet.NewSiteToSite(t)
	tpKeyPEM, _ := pki.KeyPEM(tpKey)
	testnet.StartCharon(t, topo.GwB, testnet.CharonConn{Name: "s2s", LocalAddr: topo.GwBWAN, RemoteAddr: topo.GwAWAN,
		LocalID: "tunnelpeer.example.net", RemoteID: "box.example.net", Proposals: config.DefaultIKEProposal, ESPProposals: "aes128gcm16",
		LocalTS: []netip.Prefix{topo.LANB}, RemoteTS: []netip.Prefix{topo.LANA},
		CertPEM: string(pki.CertPEM(tpCerts[0])), KeyPEM: string(tpKeyPEM), CAPEM: string(pki.CertPEM(tpCerts[1]))})
	startIked(t, topo.GwA, full, ikedSock)
	s.do("a certificate tunnel",
		chromedp.Navigate(s.base+"/tunnels/new"), chromedp.WaitVisible(chromedp.ID("f-name")),
		chromedp.SendKeys(chromedp.ID("f-name"), "hq"),
		chromedp.SendKeys(chromedp.ID("f-remote_address"), topo.GwBWAN.String()),
		chromedp.SendKeys(chromedp.ID("f-local_address"), topo.GwAWAN.String()),
		chromedp.SendKeys(chromedp.ID("f-remote_id"), "tunnelpeer.example.net"),
		chromedp.SendKeys(chromedp.ID("f-local_id"), "box.example.net"),
		chromedp.SetValue(chromedp.ID("f-auth"), "cert"),
		chromedp.SetValue(chromedp.ID("f-local_cert"), "box"),
		chromedp.SetValue(chromedp.ID("f-trusted_cas"), "office-ca"),
		chromedp.SetValue(chromedp.ID("f-local_subnets"), topo.LANA.String()),
		chromedp.SetValue(chromedp.ID("f-remote_subnets"), topo.LANB.String()),
		chromedp.Click(chromedp.CSS(`input[name="esp_proposals"][value="`+config.DefaultESPProposal+`"]`)),
		chromedp.Click(chromedp.CSS(`input[name="esp_proposals"][value="aes128gcm16"]`)),
		chromedp.Click(chromedp.CSS("form.form button.primary")),
		chromedp.WaitVisible(chromedp.CSS(`[data-live="/live/tunnels"]`)))
	browserCommit(s)
	state := ""
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); {
		s.do("tunnel page", chromedp.Navigate(s.base+"/tunnels/hq"), chromedp.WaitVisible(chromedp.CSS(".bigstate")))
		if state = s.text(".bigstate"); strings.HasPrefix(strings.TrimSpace(state), "up") {
			break
		}
		time.Sleep(time.Second)
	}
	if !strings.HasPrefix(strings.TrimSpace(state), "up") {
		t.Fatalf("the certificate tunnel is not shown up within 45 s: %q; page:\n%s", state, s.text("main"))
	}
	if err := testnet.Ping(topo.HostA, topo.HostBIP, 3); err != nil {
		t.Errorf("hostA cannot reach hostB through the certificate tunnel: %v", err)
	}
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
