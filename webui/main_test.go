package webui

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// service is one start of the web UI service as the supervisor runs it.
type service struct {
	httpsAddr, httpAddr string
	cancel              context.CancelFunc
	done                chan int
	hc                  *http.Client
}

// startService runs the service with args plus loopback listeners, and
// waits until it answers over HTTPS.
func startService(t *testing.T, args ...string) (*service, *http.Response) {
	t.Helper()
	s := &service{httpsAddr: freeLoopbackAddr(t), httpAddr: freeLoopbackAddr(t), done: make(chan int, 1),
		hc: &http.Client{Timeout: 5 * time.Second,
			Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	var ctx context.Context
	ctx, s.cancel = context.WithCancel(context.Background())
	args = append([]string{"-listen", s.httpsAddr, "-http", s.httpAddr}, args...)
	go func() { s.done <- run(ctx, args) }()
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err = s.hc.Get("https://" + s.httpsAddr + "/login"); err == nil {
			return s, resp
		}
	}
	s.cancel()
	t.Fatalf("the service did not answer on %s: %v", s.httpsAddr, err)
	return nil, nil
}

// stop stops the service and checks that it stopped cleanly.
func (s *service) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case code := <-s.done:
		if code != 0 {
			t.Errorf("exit code %d after a clean stop", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the service did not stop with its context")
	}
	if c, err := net.Dial("tcp", s.httpsAddr); err == nil {
		c.Close()
		t.Error("still listening after stop")
	}
}

// TestRun starts the service as the supervisor does, on loopback ports,
// against a real configd: it makes its certificate and has configd keep
// it, writes the fingerprint for the console, serves the login page over
// HTTPS and redirects plain HTTP, and stops with its context.
func TestRun(t *testing.T) {
	cfg, _, cfgSock := startConfigdSocket(t)
	dir := t.TempDir()
	certDir := filepath.Join(dir, "cfg", "webui")
	fp := filepath.Join(dir, "run", "webui.fingerprint")
	s, resp := startService(t, "-configd", cfgSock, "-cert-dir", certDir, "-cert-fallback-dir", filepath.Join(dir, "run", "webui"),
		"-fingerprint-file", fp, "-iked", filepath.Join(dir, "iked.sock"), "-supervisor", filepath.Join(dir, "supervisor.sock"))
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "No admin password is set.") {
		t.Errorf("login page of a fresh box: %.300s", body)
	}
	served := resp.TLS.PeerCertificates[0].Raw
	fingerprint, err := os.ReadFile(fp)
	if err != nil {
		t.Fatalf("fingerprint for the console: %v", err)
	}
	if got := Fingerprint(served) + "\n"; string(fingerprint) != got {
		t.Errorf("fingerprint file %q, the certificate served is %q", fingerprint, got)
	}
	// configd keeps the pair; nothing is written to the directories that
	// are only the fallback.
	stored, err := cfg.File(context.Background(), storedCertName)
	if err != nil || !bytes.Contains(stored, []byte("BEGIN CERTIFICATE")) {
		t.Errorf("certificate kept by configd: %.40q, %v", stored, err)
	} else if pair, err := tls.X509KeyPair(stored, must(cfg.File(context.Background(), storedKeyName))); err != nil || !bytes.Equal(pair.Certificate[0], served) {
		t.Errorf("pair kept by configd: %v, or not the certificate served", err)
	}
	if _, err := os.Stat(certDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s written although configd keeps the pair: %v", certDir, err)
	}
	resp, err = s.hc.Get("http://" + s.httpAddr + "/tunnels")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusMovedPermanently || !strings.HasPrefix(loc, "https://") {
		t.Errorf("plain HTTP: %d to %q", resp.StatusCode, loc)
	}
	s.stop(t)
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestRestartKeepsCertificate: a second start of the service against the
// same configd (a reboot, with /run empty again) serves the same
// certificate, so the fingerprint the admin pinned stays valid.
func TestRestartKeepsCertificate(t *testing.T) {
	_, _, cfgSock := startConfigdSocket(t)
	start := func() (string, string) {
		dir := t.TempDir() // a fresh /run and an unused card directory at every start
		fp := filepath.Join(dir, "webui.fingerprint")
		s, resp := startService(t, "-configd", cfgSock, "-cert-dir", filepath.Join(dir, "cfg"), "-cert-fallback-dir", filepath.Join(dir, "run"),
			"-fingerprint-file", fp, "-iked", filepath.Join(dir, "iked.sock"), "-supervisor", filepath.Join(dir, "supervisor.sock"))
		resp.Body.Close()
		s.stop(t)
		file, err := os.ReadFile(fp)
		if err != nil {
			t.Fatalf("fingerprint for the console: %v", err)
		}
		return Fingerprint(resp.TLS.PeerCertificates[0].Raw), strings.TrimSpace(string(file))
	}
	served1, file1 := start()
	served2, file2 := start()
	if served1 != served2 || file1 != file2 || served1 != file1 {
		t.Errorf("after a restart the certificate served is %s (file %s), before it was %s (file %s); want the same", served2, file2, served1, file1)
	}
}

// TestRunWithoutConfigd: when configd does not answer, the service still
// starts, keeping its pair in -cert-dir as it did before configd kept it.
func TestRunWithoutConfigd(t *testing.T) {
	dir := t.TempDir()
	certDir := filepath.Join(dir, "cfg", "webui")
	s, resp := startService(t, "-configd", filepath.Join(dir, "no-configd.sock"), "-configd-wait", "0", "-cert-dir", certDir,
		"-cert-fallback-dir", filepath.Join(dir, "run", "webui"), "-fingerprint-file", filepath.Join(dir, "webui.fingerprint"),
		"-iked", filepath.Join(dir, "iked.sock"), "-supervisor", filepath.Join(dir, "supervisor.sock"))
	resp.Body.Close()
	s.stop(t)
	pair, err := tls.LoadX509KeyPair(filepath.Join(certDir, certFile), filepath.Join(certDir, keyFile))
	if err != nil {
		t.Fatalf("without configd the pair is not in %s: %v", certDir, err)
	}
	if !bytes.Equal(pair.Certificate[0], resp.TLS.PeerCertificates[0].Raw) {
		t.Error("the pair in -cert-dir is not the certificate served")
	}
}
