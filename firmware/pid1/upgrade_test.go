package pid1

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/firmware/supervisor"
	"golang.org/x/sys/unix"
)

// TestHealthChecks runs the test boot's checks against a real supervisor
// with real processes, a configd stand-in answering HTTP on a unix socket
// and a listening "web UI": each missing piece is named, and a crash loop
// is hopeless at once.
func TestHealthChecks(t *testing.T) {
	dir := t.TempDir()
	// PID 1's reaper, one for the process: each exit goes to the
	// supervisor that started the child.
	var mu sync.Mutex
	var sups []*supervisor.Supervisor
	reapCtx, stopReap := context.WithCancel(context.Background())
	defer stopReap()
	go supervisor.Reap(reapCtx, func(pid int, ws unix.WaitStatus) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range sups {
			if s.Exited(pid, ws) {
				return
			}
		}
	})
	start := func(services []supervisor.Service) *supervisor.Supervisor {
		s, err := supervisor.New(supervisor.Config{Services: services})
		if err != nil {
			t.Fatal(err)
		}
		// Known to the reaper before its first child can exit.
		mu.Lock()
		sups = append(sups, s)
		mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		t.Cleanup(func() { s.Shutdown(2 * time.Second); cancel(); <-done })
		return s
	}
	healthy := start([]supervisor.Service{{Name: "configd", Path: "/bin/sleep", Args: []string{"1000"}, StopTimeout: time.Second}})
	sock := filepath.Join(dir, "configd.sock")
	web, _ := net.Listen("tcp", "127.0.0.1:0")
	defer web.Close()
	h := healthChecks{sup: func() *supervisor.Supervisor { return healthy }, stable: 300 * time.Millisecond,
		configdSock: sock, webuiAddr: web.Addr().String(), waitFor: []string{"lo"}}

	wait := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, _ := h.problem()
			if (want == "" && got == "") || (want != "" && strings.Contains(got, want)) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("health: %q, want %q", got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	wait("configd does not answer")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.NotFound(w, r)
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	wait("") // lo has 127.0.0.1
	h.waitFor = []string{"nosuch0"}
	wait("nosuch0 has no IPv4 address yet")
	h.waitFor = nil
	h.webuiAddr = "127.0.0.1:1"
	wait("the web UI does not answer")

	crashing := start([]supervisor.Service{{Name: "webui", Path: "/bin/false", Restart: supervisor.RestartAlways}})
	h = healthChecks{sup: func() *supervisor.Supervisor { return crashing }, stable: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, fatal := h.problem()
		if fatal {
			if !strings.Contains(got, "webui restarted") {
				t.Fatalf("crash loop reported as %q", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no crash loop seen: %q (%+v)", got, crashing.Status())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestHealthUnrunnable: a service whose binary the kernel will not run
// fails the test boot at once (the broken-services image of the qemu
// test); no exit is involved, so no reaper is needed.
func TestHealthUnrunnable(t *testing.T) {
	dir := t.TempDir()
	var h healthChecks
	// A binary that cannot be run is hopeless at once.
	notProgram := filepath.Join(dir, "flashgate")
	os.WriteFile(notProgram, []byte("not a program\n"), 0o755)
	broken := startUnreaped(t, []supervisor.Service{{Name: "netd", Path: notProgram, Restart: supervisor.RestartAlways}})
	h = healthChecks{sup: func() *supervisor.Supervisor { return broken }, stable: time.Second}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, fatal := h.problem()
		if fatal {
			if !strings.Contains(got, "netd cannot start: exec ") {
				t.Fatalf("unrunnable binary reported as %q", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("unrunnable binary not seen: %q", got)
		}
	}

}

func startUnreaped(t *testing.T, services []supervisor.Service) *supervisor.Supervisor {
	s, err := supervisor.New(supervisor.Config{Services: services})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { s.Shutdown(time.Second); cancel(); <-done })
	return s
}
