package webui

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestCertificateMadeOnceAndKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cfg", "webui")
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	c1, err := LoadOrCreateCertificate("gw-1", now, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !c1.Stored {
		t.Error("certificate not stored in a writable directory")
	}
	if !regexp.MustCompile(`^([0-9A-F]{2}:){31}[0-9A-F]{2}$`).MatchString(c1.Fingerprint) {
		t.Errorf("fingerprint %q, want 32 colon-separated hex pairs", c1.Fingerprint)
	}
	fi, err := os.Stat(filepath.Join(dir, keyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file %v, %v; want mode 0600", fi, err)
	}
	cert, _ := x509.ParseCertificate(c1.TLS.Certificate[0])
	if cert.PublicKeyAlgorithm != x509.ECDSA || cert.Subject.CommonName != "gw-1" || !cert.NotAfter.After(now.Add(10*365*24*time.Hour)) {
		t.Errorf("certificate %v %q until %v, want ECDSA for gw-1, valid for years", cert.PublicKeyAlgorithm, cert.Subject.CommonName, cert.NotAfter)
	}
	c2, err := LoadOrCreateCertificate("gw-1", now.Add(time.Hour), dir)
	if err != nil || c2.Fingerprint != c1.Fingerprint {
		t.Errorf("second start: %v, fingerprint %s, want the same certificate %s", err, c2.Fingerprint, c1.Fingerprint)
	}
	// A damaged key is reported, never silently replaced.
	os.WriteFile(filepath.Join(dir, keyFile), []byte("garbage"), 0o600)
	if _, err := LoadOrCreateCertificate("gw-1", now, dir); err == nil {
		t.Error("a damaged key file was replaced without a word")
	}
	// An unwritable card (a file where the directory should be) falls
	// back to the second directory, which then keeps it across restarts.
	ro := filepath.Join(t.TempDir(), "file")
	os.WriteFile(ro, nil, 0o644)
	card, run := filepath.Join(ro, "sub"), filepath.Join(t.TempDir(), "run")
	c3, err := LoadOrCreateCertificate("gw-1", now, card, run)
	if err != nil || c3.Stored || c3.Dir != run {
		t.Fatalf("unwritable card: %v, %+v; want the pair kept in %s and not stored", err, c3, run)
	}
	c4, err := LoadOrCreateCertificate("gw-1", now, card, run)
	if err != nil || c4.Fingerprint != c3.Fingerprint {
		t.Errorf("restart with an unwritable card: %v, a different certificate", err)
	}
	c5, err := LoadOrCreateCertificate("gw-1", now, card)
	if err != nil || c5.Dir != "" || c5.Stored {
		t.Errorf("nowhere to keep it: %v, %+v; want a working certificate kept nowhere", err, c5)
	}
}

func TestTLSVersionsAndSuites(t *testing.T) {
	cert, err := LoadOrCreateCertificate("gw", time.Now(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	ts.TLS = TLSConfig(cert)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	ts.StartTLS()
	defer ts.Close()
	addr := ts.Listener.Addr().String()
	dial := func(cfg *tls.Config) (*tls.ConnectionState, error) {
		cfg.InsecureSkipVerify = true
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		st := c.ConnectionState()
		return &st, nil
	}
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		if _, err := dial(&tls.Config{MinVersion: v, MaxVersion: v}); err == nil {
			t.Errorf("handshake with %s succeeded", tls.VersionName(v))
		}
	}
	if _, err := dial(&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}); err == nil {
		t.Error("TLS 1.2 handshake with a CBC-SHA1 suite succeeded")
	}
	st, err := dial(&tls.Config{MaxVersion: tls.VersionTLS12})
	if err != nil || st.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 && st.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305 && st.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 {
		t.Errorf("TLS 1.2: %v, suite %v", err, st)
	}
	if st, err := dial(&tls.Config{}); err != nil || st.Version != tls.VersionTLS13 {
		t.Errorf("default client: %v, state %+v; want TLS 1.3", err, st)
	}
}

func TestPlainHTTPRedirects(t *testing.T) {
	cases := []struct{ port, host, path, want string }{
		{"", "192.168.1.1", "/tunnels?x=1", "https://192.168.1.1/tunnels?x=1"},
		{"", "192.168.1.1:80", "/", "https://192.168.1.1/"},
		{"8443", "gw.lan:8080", "/login", "https://gw.lan:8443/login"},
		{"", "[fe80::1]", "/", "https://[fe80::1]/"},
	}
	for _, tc := range cases {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", tc.path, nil)
		req.Host = tc.host
		RedirectToHTTPS(tc.port).ServeHTTP(rec, req)
		if rec.Code != http.StatusMovedPermanently || rec.Header().Get("Location") != tc.want {
			t.Errorf("http://%s%s: %d to %q, want 301 to %q", tc.host, tc.path, rec.Code, rec.Header().Get("Location"), tc.want)
		}
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/", nil)
	req.Host = "evil.example/@x"
	RedirectToHTTPS("").ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Errorf("malformed Host: %d, want 400", rec.Code)
	}
}

// TestServe runs the real listeners on loopback: HTTPS answers, plain HTTP
// redirects, both stop with the context.
func TestServe(t *testing.T) {
	cert, _ := LoadOrCreateCertificate("gw", time.Now(), t.TempDir())
	free := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		return ln.Addr().String()
	}
	httpsAddr, httpAddr := free(), free()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }),
			cert, httpsAddr, httpAddr, t.Logf)
	}()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var resp *http.Response
	var err error
	for i := 0; i < 50; i++ {
		if resp, err = hc.Get("https://" + httpsAddr + "/"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" {
		t.Errorf("HTTPS answered %q", body)
	}
	resp, err = hc.Get("http://" + httpAddr + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_, port, _ := net.SplitHostPort(httpsAddr)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusMovedPermanently || !strings.HasSuffix(loc, ":"+port+"/x") {
		t.Errorf("plain HTTP: %d to %q", resp.StatusCode, loc)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not stop with its context")
	}
}

func TestStoredCertificate(t *testing.T) {
	cfg, store := startConfigd(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var logged []string
	logf := func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }

	c1, err := LoadStoredCertificate(ctx, cfg, "gw-1", now, logf)
	if err != nil {
		t.Fatal(err)
	}
	if c1.Dir != "" || len(logged) != 0 {
		t.Errorf("first start: dir %q, logged %q; want the pair kept by configd, nothing to say", c1.Dir, logged)
	}
	key, err := cfg.File(ctx, storedKeyName)
	if err != nil || !bytes.Contains(key, []byte("PRIVATE KEY")) {
		t.Fatalf("key kept by configd: %v", err)
	}
	c2, err := LoadStoredCertificate(ctx, cfg, "gw-1", now.Add(time.Hour), logf)
	if err != nil || c2.Fingerprint != c1.Fingerprint || len(logged) != 0 {
		t.Fatalf("second start: %v, fingerprint %s, logged %q; want the same certificate %s, silently", err, c2.Fingerprint, logged, c1.Fingerprint)
	}

	// The pair is replaced, and the log says so, when what configd keeps
	// cannot be used.
	other, otherKey, _ := makeSelfSigned("other", now)
	cases := []struct {
		name      string
		cert, key []byte
	}{
		{"damaged key", nil, []byte("garbage")},
		{"key of another certificate", nil, otherKey},
		{"damaged certificate", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), key},
		{"certificate of another key", other, key},
	}
	for _, tc := range cases {
		good, _ := LoadStoredCertificate(ctx, cfg, "gw-1", now, logf)
		certPEM := must(cfg.File(ctx, storedCertName))
		if tc.cert != nil {
			certPEM = tc.cert
		}
		keyPEM := tc.key
		cfg.PutFile(ctx, storedCertName, certPEM)
		cfg.PutFile(ctx, storedKeyName, keyPEM)
		logged = nil
		c, err := LoadStoredCertificate(ctx, cfg, "gw-1", now, logf)
		if err != nil || c.Fingerprint == good.Fingerprint || len(logged) != 1 || !strings.Contains(logged[0], "new fingerprint") {
			t.Errorf("%s: %v, logged %q; want a new certificate, and a log line saying so", tc.name, err, logged)
			continue
		}
		again, _ := LoadStoredCertificate(ctx, cfg, "gw-1", now, logf)
		if again.Fingerprint != c.Fingerprint {
			t.Errorf("%s: the replacement was not kept", tc.name)
		}
	}
	// A power cut between storing the key and the certificate leaves the
	// key alone (there is no route to delete a file: do it on disk).
	good, _ := LoadStoredCertificate(ctx, cfg, "gw-1", now, logf)
	os.Remove(filepath.Join(filepath.Dir(store.Path()), "files", storedCertName))
	logged = nil
	c, err := LoadStoredCertificate(ctx, cfg, "gw-1", now, logf)
	if err != nil || c.Fingerprint == good.Fingerprint || len(logged) != 1 || !strings.Contains(logged[0], "half") {
		t.Errorf("key without certificate: %v, logged %q; want a new certificate, and a log line saying so", err, logged)
	}
}
