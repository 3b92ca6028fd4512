package supervisor

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// serve starts the API of s on a unix socket in a temporary directory and
// returns a client for it.
func serve(t *testing.T, s *Supervisor) *Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sock := filepath.Join(t.TempDir(), "run", "flashgate", "supervisor.sock")
	if err := s.Serve(ctx, sock); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a root-only socket (0600)", fi.Mode())
	}
	return NewClient(sock)
}

func TestAPI(t *testing.T) {
	var mu sync.Mutex
	var power []PowerAction
	s := start(t, Config{
		Services: []Service{sh("svc", "echo hello; exec sleep 1000"), sh("dep", "exec sleep 1000", "svc")},
		Power: func(a PowerAction) error {
			mu.Lock()
			defer mu.Unlock()
			power = append(power, a)
			return nil
		},
	})
	c := serve(t, s)
	ctx := context.Background()
	waitFor(t, "services running", running(s, "svc", "dep"))

	list, err := c.Services(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "svc" || list[1].Name != "dep" || list[0].PID == 0 || list[0].State != StateRunning {
		t.Errorf("services %+v, want svc then dep, running", list)
	}
	if _, err := c.Service(ctx, "nosuch"); err == nil || !strings.Contains(err.Error(), `unknown service "nosuch"`) {
		t.Errorf("Service(nosuch) error %v, want unknown service", err)
	}

	waitFor(t, "svc's output", func() bool {
		logs, err := c.Logs(ctx, "svc", 10)
		return err == nil && len(logs.Lines) == 1 && logs.Lines[0].Text == "hello"
	})
	if logs, err := c.Logs(ctx, "supervisor", 0); err != nil || len(logs.Lines) < 2 {
		t.Errorf("supervisor log %+v, %v; want its start messages", logs, err)
	}
	if _, err := c.Logs(ctx, "nosuch", 0); err == nil {
		t.Error("logs of an unknown service succeeded")
	}
	if err := c.do(ctx, http.MethodGet, "/v1/logs/svc?lines=-1", nil, nil); err == nil || !strings.Contains(err.Error(), "non-negative") {
		t.Errorf("lines=-1: %v, want a bad request", err)
	}

	old := list[0].PID
	if err := c.Restart(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "svc restarted", func() bool {
		st, err := c.Service(ctx, "svc")
		return err == nil && st.State == StateRunning && st.PID != old && st.Restarts == 1
	})
	if err := c.Stop(ctx, "dep"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "dep stopped", func() bool { st, _ := c.Service(ctx, "dep"); return st.State == StateStopped })

	for _, a := range []PowerAction{Reboot, PowerOff} {
		if err := c.Power(ctx, a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	mu.Lock()
	if len(power) != 2 || power[0] != Reboot || power[1] != PowerOff {
		t.Errorf("power requests %v, want [reboot poweroff]", power)
	}
	mu.Unlock()

	if err := c.StopPetting(ctx); err == nil || !strings.Contains(err.Error(), "no watchdog") {
		t.Errorf("stop-petting without a watchdog: %v, want an error saying so", err)
	}
	sys, err := c.System(ctx)
	if err != nil || sys.PID != os.Getpid() || sys.RSSKiB <= 0 {
		t.Errorf("system %+v, %v; want our pid and a positive RSS", sys, err)
	}
	if m := sys.Memory; m == nil || m.PSS <= 0 || m.Private <= 0 || m.PSS > m.RSS {
		t.Errorf("system memory %+v; want PSS and private sizes no larger than RSS", m)
	}
	if err := c.SetSyslog(ctx, SyslogConfig{Addr: "127.0.0.1:5514", Format: "bsd"}); err == nil {
		t.Error("PUT /v1/syslog accepted format bsd")
	}
	for _, tc := range []struct{ method, path, want string }{
		{http.MethodPost, "/v1/services", "use GET"},
		{http.MethodGet, "/v1/reboot", "use POST"},
		{http.MethodGet, "/v1/services/svc/restart", "use POST"},
		{http.MethodGet, "/v1/nosuch", "no such route"},
		{http.MethodGet, "/v2/services", "no such route"},
		{http.MethodGet, "/", "no such route"},
	} {
		if err := c.do(ctx, tc.method, tc.path, nil, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want an error containing %q", tc.method, tc.path, err, tc.want)
		}
	}
}

func TestAPIPowerWithoutPID1(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, s)
	if err := c.Power(context.Background(), Reboot); err == nil || !strings.Contains(err.Error(), "not running as PID 1") {
		t.Errorf("reboot without a Power hook: %v, want not running as PID 1", err)
	}
}

func TestWriteStatus(t *testing.T) {
	var b strings.Builder
	WriteStatus(&b, []ServiceStatus{
		{Name: "configd", State: StateRunning, PID: 42, Uptime: 65, LastExit: "", Restarts: 0},
		{Name: "iked", State: StateBackoff, Restarts: 3, NextStartIn: 4, LastExit: "exit status 1"},
		{Name: "webui", State: StateWaiting, WaitingFor: []string{"iked"}},
	}, System{PID: 1, RSSKiB: 5120, Memory: &Memory{RSS: 5120, PSS: 2000, Private: 1500}, Watchdog: WatchdogState{Open: true, Timeout: 30, Petting: true}})
	want := `SERVICE  STATE                  PID  RESTARTS  UPTIME  LAST EXIT
configd  running                42   0         1m5s    -
iked     backoff (retry in 4s)  -    3         -       exit status 1
webui    waiting (for iked)     -    0         -       -

pid 1: rss 5120 KiB (pss 2000 KiB, private 1500 KiB), watchdog timeout 30s, 0 orphans reaped
`
	if got := b.String(); got != want {
		t.Errorf("status table:\n%s\nwant:\n%s", got, want)
	}
}

func TestReadMemory(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "smaps_rollup")
	os.WriteFile(p, []byte(`08048000-bfba8000 ---p 00000000 00:00 0          [rollup]
Rss:               11360 kB
Pss:                2867 kB
Pss_Dirty:          2866 kB
Shared_Clean:          8 kB
Shared_Dirty:       9828 kB
Private_Clean:         4 kB
Private_Dirty:      1520 kB
`), 0o600)
	m, err := ReadMemory(p)
	if err != nil || m != (Memory{RSS: 11360, PSS: 2867, Private: 1524}) {
		t.Errorf("ReadMemory = %+v, %v; want rss 11360, pss 2867, private 1524", m, err)
	}
	os.WriteFile(p, []byte("Rss: 12 MB\nPss: 1 kB\nPrivate_Clean: 1 kB\nPrivate_Dirty: 1 kB\n"), 0o600)
	if _, err := ReadMemory(p); err == nil {
		t.Error("ReadMemory accepted a size in MB")
	}
	os.WriteFile(p, []byte("Rss: 12 kB\n"), 0o600)
	if _, err := ReadMemory(p); err == nil {
		t.Error("ReadMemory accepted a file without Pss")
	}
}

func TestReadRSS(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		content string
		want    int
		wantErr bool
	}{
		{"Name:\tx\nVmRSS:\t    5120 kB\nThreads: 3\n", 5120, false},
		{"Name:\tx\n", 0, true},
		{"VmRSS:\t5 MB\n", 0, true},
	} {
		p := filepath.Join(dir, "status")
		os.WriteFile(p, []byte(tc.content), 0o600)
		got, err := ReadRSSKiB(p)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("ReadRSSKiB(%q) = %d, %v; want %d, error %v", tc.content, got, err, tc.want, tc.wantErr)
		}
	}
}

// FuzzRoute feeds the hand-written router arbitrary methods and paths: it
// must answer every request with a status, never panic, and reach the
// power hook only through POST /v1/reboot or /v1/poweroff.
func FuzzRoute(f *testing.F) {
	for _, seed := range [][2]string{
		{"GET", "/v1/services"}, {"GET", "/v1/services/console"}, {"POST", "/v1/services/console/restart"},
		{"GET", "/v1/logs/kernel?lines=5"}, {"POST", "/v1/reboot"}, {"PUT", "/v1/syslog"},
		{"POST", "/v1/watchdog/stop-petting"}, {"GET", "//v1//services//"}, {"DELETE", "/v1/"},
	} {
		f.Add(seed[0], seed[1])
	}
	s, err := New(Config{Services: []Service{{Name: "console", Path: "/nonexistent"}}})
	if err != nil {
		f.Fatal(err)
	}
	var powered []PowerAction
	s.cfg.Power = func(a PowerAction) error { powered = append(powered, a); return nil }
	f.Fuzz(func(t *testing.T, method, path string) {
		req, err := http.NewRequest(method, "http://supervisor"+path, strings.NewReader("{}"))
		if err != nil {
			return // not a request a client could send
		}
		powered = powered[:0]
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code < 200 || rec.Code > 599 {
			t.Errorf("%s %s: status %d", method, path, rec.Code)
		}
		if len(powered) > 0 {
			p := strings.Trim(req.URL.Path, "/")
			if method != http.MethodPost || (p != "v1/reboot" && p != "v1/poweroff") {
				t.Errorf("%s %s reached the power hook", method, path)
			}
		}
	})
}
