package pid1

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/firmware/supervisor"
)

// TestHealthChecks runs the test boot's checks against a real supervisor
// with real processes, a configd stand-in answering HTTP on a unix socket
// and a listening "web UI": each missing piece is named, and a crash loop
// is hopeless at once.
func TestHealthChecks(t *testing.T) {
	dir := t.TempDir()
	healthy := startUnreaped(t, []supervisor.Service{{Name: "configd", Path: "/bin/sleep", Args: []string{"1000"}, StopTimeout: time.Second}})
	sock := filepath.Join(dir, "configd.sock")
	// The web UI's port as PID 1 holds it: the kernel accepts on it
	// whether or not a server answers.
	web, _ := net.Listen("tcp", "127.0.0.1:0")
	defer web.Close()
	h := healthChecks{status: func() ([]supervisor.ServiceStatus, bool) { return healthy.Status(), true }, stable: 300 * time.Millisecond,
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
	wait("configd has run for")
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
	wait("the web UI does not answer") // nothing serves its socket yet
	ui := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	ui.Listener = web
	ui.StartTLS()
	defer ui.Close()
	wait("") // lo has 127.0.0.1
	h.waitFor = []string{"nosuch0"}
	wait("nosuch0 has no IPv4 address yet")
	h.waitFor = nil
	h.webuiAddr = "127.0.0.1:1"
	wait("the web UI does not answer")

	// What the supervisor reports of a service in a crash loop (its
	// exits reach it through PID 1's reaper, which a test process cannot
	// be) fails the test boot at once.
	crash := healthChecks{status: func() ([]supervisor.ServiceStatus, bool) {
		return []supervisor.ServiceStatus{{Name: "webui", State: supervisor.StateBackoff, Restarts: 4, LastExit: "exit status 1", LastExitCode: 1}}, true
	}}
	if got, fatal := crash.problem(); !fatal || got != "webui restarted 4 times (last: exit status 1)" {
		t.Errorf("crash loop: %q, fatal %v", got, fatal)
	}
	// A service that runs but has not said it is ready (configd before
	// its database is open, the console before its prompt) is not
	// healthy yet, however long it has run.
	notReady := healthChecks{status: func() ([]supervisor.ServiceStatus, bool) {
		return []supervisor.ServiceStatus{{Name: "console", State: supervisor.StateRunning, Uptime: 600, NotReady: true}}, true
	}, stable: time.Second}
	if got, fatal := notReady.problem(); fatal || got != "console runs but is not ready yet" {
		t.Errorf("not ready: %q, fatal %v", got, fatal)
	}
	none := healthChecks{status: func() ([]supervisor.ServiceStatus, bool) { return nil, false }}
	if got, fatal := none.problem(); !fatal || !strings.Contains(got, "supervisor did not start") {
		t.Errorf("no supervisor: %q, fatal %v", got, fatal)
	}
}

// TestHealthUnrunnable: a service whose binary the kernel will not run
// fails the test boot at once (the broken-services image of the qemu
// test): a real supervisor failing a real exec.
func TestHealthUnrunnable(t *testing.T) {
	dir := t.TempDir()
	notProgram := filepath.Join(dir, "flashgate")
	os.WriteFile(notProgram, []byte("not a program\n"), 0o755)
	broken := startUnreaped(t, []supervisor.Service{{Name: "netd", Path: notProgram, Restart: supervisor.RestartAlways}})
	h := healthChecks{status: func() ([]supervisor.ServiceStatus, bool) { return broken.Status(), true }, stable: time.Second}
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

// startUnreaped runs a supervisor without a reaper: enough for services
// that do not exit.
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
