package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/waitfor"

	"github.com/flashgate/flashgate/internal/localsock"
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
	waitfor.Cond(t, 10*time.Second, "services running", running(s, "svc", "dep"))

	list, err := c.Services(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "svc" || list[1].Name != "dep" || list[0].PID == 0 || list[0].State != StateRunning {
		t.Errorf("services %+v, want svc then dep, running", list)
	}
	for _, call := range []struct {
		what string
		err  error
	}{
		{"Service", func() error { _, err := c.Service(ctx, "nosuch"); return err }()},
		{"Logs", func() error { _, err := c.Logs(ctx, "nosuch", 0); return err }()},
		{"Restart", c.Restart(ctx, "nosuch")},
		{"Stop", c.Stop(ctx, "nosuch")},
	} {
		if err := call.err; err == nil || err.Error() != `unknown service "nosuch"` || !errors.Is(err, ErrUnknownService) {
			t.Errorf("%s(nosuch) error %v, want `unknown service \"nosuch\"`, matching ErrUnknownService", call.what, err)
		}
	}

	waitfor.Cond(t, 10*time.Second, "svc's output", func() bool {
		logs, err := c.Logs(ctx, "svc", 10)
		return err == nil && len(logs.Lines) == 1 && logs.Lines[0].Text == "hello"
	})
	if logs, err := c.Logs(ctx, "supervisor", 0); err != nil || len(logs.Lines) < 2 {
		t.Errorf("supervisor log %+v, %v; want its start messages", logs, err)
	}
	if _, err := c.Logs(ctx, "svc", -1); err == nil || !strings.Contains(err.Error(), "non-negative") {
		t.Errorf("Logs(svc, -1): %v, want an error asking for a non-negative number", err)
	}

	old := list[0].PID
	if err := c.Restart(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 10*time.Second, "svc restarted", func() bool {
		st, err := c.Service(ctx, "svc")
		return err == nil && st.State == StateRunning && st.PID != old && st.Restarts == 1
	})
	if err := c.Stop(ctx, "dep"); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 10*time.Second, "dep stopped", func() bool { st, _ := c.Service(ctx, "dep"); return st.State == StateStopped })

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
		t.Error("SetSyslog accepted format bsd")
	}
	if err := c.Power(ctx, PowerAction("services")); err == nil || !strings.Contains(err.Error(), "want reboot or poweroff") {
		t.Errorf("Power(services): %v, want it refused before it is sent", err)
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

// rawCall sends payload as is on a new connection and returns the one
// answer line, decoded, checking that nothing follows it.
func rawCall(t *testing.T, sock string, payload []byte) response {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(payload); err != nil {
		t.Fatalf("write %.60q: %v", payload, err)
	}
	conn.(*net.UnixConn).CloseWrite()
	answer, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read the answer to %.60q: %v", payload, err)
	}
	line, rest, ok := bytes.Cut(answer, []byte("\n"))
	if !ok || len(rest) != 0 {
		t.Fatalf("answer to %.60q is %q, want one line", payload, answer)
	}
	var resp response
	if err := json.Unmarshal(line, &resp); err != nil {
		t.Fatalf("answer to %.60q is %q: %v", payload, line, err)
	}
	return resp
}

func serveSocket(t *testing.T, s *Supervisor) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sock := filepath.Join(t.TempDir(), "supervisor.sock")
	if err := s.Serve(ctx, sock); err != nil {
		t.Fatal(err)
	}
	return sock
}

func TestAPIRequests(t *testing.T) {
	s, err := New(Config{Services: []Service{{Name: "netd", Path: "/nonexistent"}}})
	if err != nil {
		t.Fatal(err)
	}
	sock := serveSocket(t, s)
	big := `{"op":"services"}` + strings.Repeat(" ", maxRequestBytes-len(`{"op":"services"}`))
	for _, tc := range []struct {
		payload      string
		wantErr      string // "" for a result
		wantNotFound bool
	}{
		{`{"op":"services"}` + "\n", "", false},
		{`{"op":"services"}`, "", false}, // ended by the end of the stream
		{` {"op":"service","name":"netd"} ` + "\n" + "ignored\n", "", false},
		{`{"op":"logs","name":"kernel","lines":5}` + "\n", "", false},
		{big + "\n", "", false},
		{big + " \n", "request longer than 65536 bytes", false},
		{"", "empty request", false},
		{"\n", "empty request", false},
		{"GET /v1/services HTTP/1.1\r\n\r\n", "bad request", false},
		{"null\n", `no "op"`, false},
		{"[]\n", "bad request", false},
		{`"services"` + "\n", "bad request", false},
		{`{}` + "\n", `no "op"`, false},
		{`{"op":"nosuch"}` + "\n", `unknown op "nosuch"`, false},
		{`{"op":7}` + "\n", "bad request", false},
		{`{"op":"services","extra":1}` + "\n", `unknown field "extra"`, false},
		{`{"op":"services"} {"op":"reboot"}` + "\n", "data after the JSON object", false},
		{`{"op":"services","name":"netd"}` + "\n", "op services takes no name", false},
		{`{"op":"service"}` + "\n", "op service needs a name", false},
		{`{"op":"service","name":"nosuch"}` + "\n", `unknown service "nosuch"`, true},
		{`{"op":"restart","name":"nosuch"}` + "\n", `unknown service "nosuch"`, true},
		{`{"op":"logs","name":"kernel","lines":-1}` + "\n", "want a non-negative number", false},
		{`{"op":"logs","name":"kernel","lines":1e99}` + "\n", "bad request", false},
		{`{"op":"system","lines":3}` + "\n", "op system takes no lines", false},
		{`{"op":"syslog"}` + "\n", "op syslog needs a syslog", false},
		{`{"op":"syslog","syslog":{"addr":"127.0.0.1:5514","format":"bsd"}}` + "\n", "bsd", false},
		{`{"op":"console-baud"}` + "\n", "op console-baud needs a baud", false},
		{`{"op":"console-baud","baud":"fast"}` + "\n", "bad request", false},
		{`{"op":"console-baud","baud":9600}` + "\n", "runs no console getty", false},
		{`{"op":"reboot"}` + "\n", "not running as PID 1: cannot reboot", false},
		{`{"op":"poweroff","name":"now"}` + "\n", "op poweroff takes no name", false},
		{`{"op":"stop-petting"}` + "\n", "no watchdog is open", false},
	} {
		resp := rawCall(t, sock, []byte(tc.payload))
		switch {
		case tc.wantErr == "" && (resp.Error != "" || len(resp.Result) == 0):
			t.Errorf("%.80q: answer %+v, want a result", tc.payload, resp)
		case tc.wantErr != "" && (!strings.Contains(resp.Error, tc.wantErr) || len(resp.Result) != 0):
			t.Errorf("%.80q: answer %+v, want only an error containing %q", tc.payload, resp, tc.wantErr)
		case resp.NotFound != tc.wantNotFound:
			t.Errorf("%.80q: answer %+v, want not_found %v", tc.payload, resp, tc.wantNotFound)
		}
	}

	// A client that sends far more than a request may be reset rather
	// than answered, but it costs the server no more than the limit.
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	go conn.Write(bytes.Repeat([]byte("x"), 4<<20))
	answer, err := io.ReadAll(conn)
	conn.Close()
	if !strings.Contains(string(answer), "request longer than 65536 bytes") && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("4 MiB without a newline: %q, %v; want an answer that the request is too long, or a reset", answer, err)
	}
	if _, err := NewClient(sock).System(context.Background()); err != nil {
		t.Errorf("System after an oversized request: %v", err)
	}
}

// A client that connects and says nothing, or stops halfway, is answered
// with a timeout and dropped; it does not hold the server.
func TestAPISilentClient(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.apiTimeout = 200 * time.Millisecond
	sock := serveSocket(t, s)
	for _, said := range []string{"", `{"op":"sys`} {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte(said))
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		answer, err := io.ReadAll(conn) // until the server closes
		conn.Close()
		if err != nil || !strings.Contains(string(answer), "i/o timeout") {
			t.Errorf("after sending %q and waiting: %q, %v; want a timeout answer and the connection closed", said, answer, err)
		}
	}
}

// Stalled clients hold at most maxAPIConns slots; the next caller is told
// the API is busy, and once they go, callers are served again.
func TestAPIConnectionLimit(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.apiTimeout = time.Minute
	sock := serveSocket(t, s)
	c := NewClient(sock)
	ctx := context.Background()
	var stalled []net.Conn
	for range maxAPIConns {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, conn)
	}
	if _, err := c.System(ctx); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("System with %d stalled clients: %v, want the API busy", maxAPIConns, err)
	}
	for _, conn := range stalled {
		conn.Close()
	}
	waitfor.Cond(t, 10*time.Second, "the API to serve again", func() bool { _, err := c.System(ctx); return err == nil })

	// A burst larger than the limit is served: callers wait for a slot.
	var wg sync.WaitGroup
	errs := make(chan error, 3*maxAPIConns)
	for range 3 * maxAPIConns {
		wg.Go(func() {
			if _, err := c.Services(ctx); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("burst of %d calls: %v, want all served", 3*maxAPIConns, err)
	}
}

// A panic below the API (here in a hook) becomes an error answer; the
// server, which runs in PID 1, goes on.
func TestAPIPanicIsAnswered(t *testing.T) {
	s, err := New(Config{ConsoleBaud: func(int) error { panic("getty table corrupt") }})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, s)
	ctx := context.Background()
	if err := c.SetConsoleBaud(ctx, 9600); err == nil || !strings.Contains(err.Error(), "internal error: getty table corrupt") {
		t.Errorf("SetConsoleBaud with a panicking hook: %v, want an internal error", err)
	}
	if _, err := c.System(ctx); err != nil {
		t.Errorf("System after a panic: %v, want the server still serving", err)
	}
}

func TestClientErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.sock")
	_, err := NewClient(missing).Services(context.Background())
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Errorf("Services on a missing socket: %v, want a *net.OpError inside (the CLI says \"not answering\" from it)", err)
	}

	// A server that accepts and never answers: the caller's context ends
	// the call.
	ln, err := localsock.Listen(filepath.Join(t.TempDir(), "mute.sock"), localsock.RootOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = NewClient(ln.Addr().String()).System(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("System on a mute server: %v, want the context's deadline", err)
	}
}

// The web UI's socket is its group's (0660) and answers only what the web
// UI needs: the service list, logs and reboot, not stop or restart.
func TestServeWebAnswersOnlyTheWebOps(t *testing.T) {
	s := start(t, Config{Services: []Service{sh("svc", "echo hi; sleep 60")}})
	waitfor.Cond(t, 10*time.Second, "svc running", running(s, "svc"))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sock := filepath.Join(t.TempDir(), "supervisor-web.sock")
	if err := s.ServeWeb(ctx, sock, 64044); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o660 || st.Uid != 0 || st.Gid != 64044 {
		t.Errorf("socket mode %v owner %d:%d, want 0660 root:64044", fi.Mode(), st.Uid, st.Gid)
	}
	c := NewClient(sock)
	if svcs, err := c.Services(ctx); err != nil || len(svcs) != 1 {
		t.Errorf("services: %v, %v", svcs, err)
	}
	if _, err := c.Logs(ctx, "svc", 10); err != nil {
		t.Errorf("logs: %v", err)
	}
	for _, req := range []string{`{"op":"stop","name":"svc"}`, `{"op":"restart","name":"svc"}`,
		`{"op":"syslog","syslog":{"addr":"127.0.0.1:514"}}`, `{"op":"stop-petting"}`, `{"op":"console-baud","baud":9600}`, `{"op":"poweroff"}`} {
		resp := rawCall(t, sock, []byte(req+"\n"))
		if !strings.Contains(resp.Error, "not available on this socket") {
			t.Errorf("%s on the web socket: %+v, want refused", req, resp)
		}
	}
	if st := state(s, "svc"); st.State != StateRunning || st.Restarts != 0 {
		t.Errorf("svc %+v after the refused ops, want running, never restarted", st)
	}
	// Reboot is allowed through; here, outside PID 1, it has no hook.
	if resp := rawCall(t, sock, []byte(`{"op":"reboot"}`+"\n")); !strings.Contains(resp.Error, "not running as PID 1") {
		t.Errorf("reboot on the web socket: %+v, want it to reach the supervisor", resp)
	}
}
