package webui

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRun starts the service as the supervisor does, on loopback ports,
// against a real configd: it makes and keeps its certificate, writes the
// fingerprint for the console, serves the login page over HTTPS and
// redirects plain HTTP, and stops with its context.
func TestRun(t *testing.T) {
	_, _, cfgSock := startConfigdSocket(t)
	dir := t.TempDir()
	certDir := filepath.Join(dir, "cfg", "webui")
	fp := filepath.Join(dir, "run", "webui.fingerprint")
	httpsAddr, httpAddr := freeLoopbackAddr(t), freeLoopbackAddr(t)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	args := []string{"-listen", httpsAddr, "-http", httpAddr, "-configd", cfgSock, "-cert-dir", certDir, "-cert-fallback-dir", filepath.Join(dir, "run", "webui"),
		"-fingerprint-file", fp, "-iked", filepath.Join(dir, "iked.sock"), "-supervisor", filepath.Join(dir, "supervisor.sock")}
	go func() { done <- run(ctx, args) }()

	hc := &http.Client{Timeout: 5 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err = hc.Get("https://" + httpsAddr + "/login"); err == nil {
			break
		}
	}
	if err != nil {
		cancel()
		t.Fatalf("the service did not answer on %s: %v", httpsAddr, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "No admin password is set.") {
		t.Errorf("login page of a fresh box: %.300s", body)
	}
	fingerprint, err := os.ReadFile(fp)
	if err != nil {
		t.Fatalf("fingerprint for the console: %v", err)
	}
	if got := Fingerprint(resp.TLS.PeerCertificates[0].Raw) + "\n"; string(fingerprint) != got {
		t.Errorf("fingerprint file %q, the certificate served is %q", fingerprint, got)
	}
	if _, err := os.Stat(filepath.Join(certDir, keyFile)); err != nil {
		t.Errorf("key not kept: %v", err)
	}
	resp, err = hc.Get("http://" + httpAddr + "/tunnels")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusMovedPermanently || !strings.HasPrefix(loc, "https://") {
		t.Errorf("plain HTTP: %d to %q", resp.StatusCode, loc)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code %d after a clean stop", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the service did not stop with its context")
	}
	if _, err := net.Dial("tcp", httpsAddr); err == nil {
		t.Error("still listening after stop")
	}
}
