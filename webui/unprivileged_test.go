package webui

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/services/configd/configdapi"
	"github.com/flashgate/flashgate/services/configd/configdtest"
)

// TestWebUIProcessHelper is the web UI service in a child process: see
// TestRunsAsItsOwnUserOnInheritedListeners.
func TestWebUIProcessHelper(t *testing.T) {
	args := os.Getenv("FG_WEBUI_ARGS")
	if args == "" {
		t.Skip("only as TestRunsAsItsOwnUserOnInheritedListeners's child")
	}
	os.Exit(Main(strings.Split(args, "\x1f")))
}

// The web UI as the box runs it: a process of its own user (no
// capabilities, no supplementary groups) serving on listeners bound by
// its parent and handed over as fds 3 and 4, with configd's restricted
// socket its group's. It serves the login page, keeps its certificate
// through configd and writes the fingerprint into its own directory.
func TestRunsAsItsOwnUserOnInheritedListeners(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: it runs the web UI as another user")
	}
	const uid, gid = 64043, 64044
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	// configd's full API root's, its restricted one the web UI's group's.
	cd := configdtest.Start(t, configdtest.Options{Dir: dir, Web: true, WebGroup: gid})
	fullSock, webSock := cd.Socket, cd.WebSocket
	runDir := filepath.Join(dir, "run-webui")
	os.Mkdir(runDir, 0o700)
	os.Chown(runDir, uid, gid)

	var inherited []*os.File
	var addrs []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		f, err := ln.(*net.TCPListener).File()
		ln.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		inherited = append(inherited, f)
		addrs = append(addrs, ln.Addr().String())
	}
	// go test keeps its binary in a 0700 directory: run a copy.
	exe := filepath.Join(dir, "webui.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"-listen-fd", "3", "-http-fd", "4", "-configd", webSock, "-iked", filepath.Join(dir, "iked.sock"),
		"-supervisor", filepath.Join(dir, "supervisor-web.sock"), "-cert-dir", runDir, "-cert-fallback-dir", "",
		"-fingerprint-file", filepath.Join(runDir, "fingerprint")}
	cmd := exec.Command(exe, "-test.run=^TestWebUIProcessHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FG_WEBUI_ARGS="+strings.Join(args, "\x1f"))
	cmd.ExtraFiles = inherited
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("the web UI exited with %v after SIGTERM:\n%s", err, out.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("the web UI did not stop on SIGTERM")
		}
	}()

	hc := &http.Client{Timeout: 5 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var page string
	var served []byte
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && page == ""; time.Sleep(100 * time.Millisecond) {
		if resp, err := hc.Get("https://" + addrs[0] + "/login"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			page, served = string(body), resp.TLS.PeerCertificates[0].Raw
		}
	}
	if !strings.Contains(page, "No admin password is set.") {
		t.Fatalf("login page from the unprivileged web UI: %.300q\nits output:\n%s", page, out.String())
	}
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Uid:\t64043\t64043\t64043\t64043", "Gid:\t64044\t64044\t64044\t64044", "CapEff:\t0000000000000000"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("the web UI's /proc status lacks %q:\n%s", want, status)
		}
	}
	if resp, err := hc.Get("http://" + addrs[1] + "/tunnels"); err != nil || resp.StatusCode != http.StatusMovedPermanently {
		t.Errorf("plain HTTP on the second inherited listener: %v %v", resp, err)
	}
	fp, err := os.ReadFile(filepath.Join(runDir, "fingerprint"))
	if err != nil || strings.TrimSpace(string(fp)) != Fingerprint(served) {
		t.Errorf("fingerprint file %q (%v), the certificate served is %s", fp, err, Fingerprint(served))
	}
	if stored, err := configdapi.New(fullSock).File(context.Background(), storedCertName); err != nil || !strings.Contains(string(stored), "BEGIN CERTIFICATE") {
		t.Errorf("the certificate was not kept through configd: %v", err)
	}
	if strings.Contains(out.String(), "falling back") {
		t.Errorf("the web UI fell back from configd:\n%s", out.String())
	}
}
