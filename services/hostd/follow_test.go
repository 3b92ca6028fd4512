package hostd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/waitfor"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/supervisor"
)

// fakeConfigd delivers its changes, then answers Running with its
// results in order (hostd reads the running configuration only for
// changes of the system section).
type fakeConfigd struct {
	changes []config.Change
	running []runningResult
}

type runningResult struct {
	cfg *config.Config
	err error
}

func (f *fakeConfigd) Watch(ctx context.Context) <-chan config.Change {
	out := make(chan config.Change, len(f.changes))
	for _, ch := range f.changes {
		out <- ch
	}
	close(out)
	return out
}

func (f *fakeConfigd) Running(ctx context.Context) (*config.Config, uint64, error) {
	if len(f.running) == 0 {
		return nil, 0, errors.New("fakeConfigd: Running called more often than expected")
	}
	r := f.running[0]
	f.running = f.running[1:]
	return r.cfg, 1, r.err
}

// slowRetries keeps the retry timer out of tests that deliver every
// change at once and check what each one did.
var slowRetries = pacing{configdWait: time.Hour, retryFirst: time.Hour, retryMax: time.Hour}

func TestFollow(t *testing.T) {
	sys := func(host string, rs config.RemoteSyslog) *config.Config {
		return &config.Config{System: config.System{Hostname: host, RemoteSyslog: rs}}
	}
	all := config.Sections
	f := &fakeConfigd{
		changes: []config.Change{
			{Reason: "current", Revision: 4, Sections: all},
			{Reason: "commit", Sections: []config.Section{config.SectionTunnels}},
			{Reason: "commit", Sections: []config.Section{config.SectionSystem}}, // admins changed: nothing of ours
			{Reason: "commit", Sections: []config.Section{config.SectionSystem}},
			{Reason: "commit", Sections: []config.Section{config.SectionSystem}},
			{Reason: "commit", Sections: []config.Section{config.SectionSystem}},
			{Reason: "commit", Sections: []config.Section{config.SectionSystem}},
			{Reason: "commit", Sections: []config.Section{config.SectionSystem}},
			{Reason: "current", Revision: 9, Sections: all}, // configd restarted
		},
		running: []runningResult{ // none for the tunnels change
			{cfg: sys("", config.RemoteSyslog{})},
			{cfg: sys("", config.RemoteSyslog{})},
			{cfg: sys("gw1", config.RemoteSyslog{Host: "192.0.2.9"})},
			{err: errors.New("configd: connection refused")},
			{cfg: sys("gw1", config.RemoteSyslog{Host: "192.0.2.9", Port: 5514, Protocol: "tcp"})},
			{cfg: sys("gw1", config.RemoteSyslog{Host: "192.0.2.9", Port: 5514, Protocol: "tcp"})}, // admins again
			{cfg: sys("gw1", config.RemoteSyslog{})},
			{cfg: sys("gw1", config.RemoteSyslog{})},
		},
	}
	var events []string
	h := &host{
		setHostname: func(n string) error { events = append(events, "hostname "+n); return nil },
		setSyslog: func(c supervisor.SyslogConfig) error {
			if c.Addr == "" {
				events = append(events, "syslog off")
			} else {
				events = append(events, fmt.Sprintf("syslog %s %s %s %s", c.Addr, c.Network, c.Format, c.Hostname))
			}
			return nil
		},
		logf:    func(format string, args ...any) { events = append(events, "log: "+fmt.Sprintf(format, args...)) },
		applied: applied{hostname: DefaultHostname}, // as PID 1 set it at boot
	}
	h.follow(context.Background(), f, "configd at configd.sock", slowRetries)
	want := []string{
		"log: following configd at configd.sock, revision 4",
		// The boot's hostname: nothing to do. Remote syslog is unknown
		// at first: turned off, quietly, since nothing was on.
		"syslog off",
		"hostname gw1", "log: hostname gw1",
		"syslog 192.0.2.9:514 udp rfc5424 gw1", "log: remote syslog 192.0.2.9:514 over udp as gw1",
		"log: read the running configuration: configd: connection refused",
		"syslog 192.0.2.9:5514 tcp rfc5424 gw1", "log: remote syslog 192.0.2.9:5514 over tcp as gw1",
		"syslog off", "log: remote syslog off",
		// configd restarted: its "current" notice re-applies nothing.
		"log: following configd at configd.sock, revision 9",
	}
	if len(f.running) != 0 {
		t.Errorf("%d running configurations never read", len(f.running))
	}
	if !slices.Equal(events, want) {
		t.Errorf("applied:\n  %s\nwant:\n  %s", strings.Join(events, "\n  "), strings.Join(want, "\n  "))
	}
}

// liveConfigd is a configd whose stream the test feeds and whose Running
// fails until told otherwise.
type liveConfigd struct {
	changes chan config.Change
	mu      sync.Mutex
	cfg     *config.Config
	err     error
	reads   int
}

func (l *liveConfigd) Watch(ctx context.Context) <-chan config.Change { return l.changes }

func (l *liveConfigd) Running(ctx context.Context) (*config.Config, uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	return l.cfg, 1, l.err
}

// lockedLog collects log lines from the goroutine under test.
type lockedLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lockedLog) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *lockedLog) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, substr) {
			n++
		}
	}
	return n
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestFollowRetries: configd silent at start, then unable to read, then a
// supervisor that refuses for a while. Each is said once, retried without
// a new commit, and the settings arrive once both answer.
func TestFollowRetries(t *testing.T) {
	src := &liveConfigd{changes: make(chan config.Change), err: errors.New("configd GET /v1/running: connection refused")}
	var mu sync.Mutex
	supDown := true
	var syslogSet []string
	var log lockedLog
	h := &host{
		setSyslog: func(c supervisor.SyslogConfig) error {
			mu.Lock()
			defer mu.Unlock()
			if supDown {
				return errors.New("supervisor API: dial unix /run/flashgate/supervisor.sock: connect: connection refused")
			}
			syslogSet = append(syslogSet, c.Addr)
			return nil
		},
		logf: log.logf,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.follow(ctx, src, "configd at configd.sock", pacing{configdWait: 50 * time.Millisecond, retryFirst: 5 * time.Millisecond, retryMax: 20 * time.Millisecond})
	}()
	defer func() { cancel(); <-done }()

	waitfor.Cond(t, 5*time.Second, "the waiting notice", func() bool { return log.count("has not answered") == 1 })
	src.changes <- config.Change{Reason: "current", Sections: []config.Section{config.SectionSystem}}
	reads := func(n int) func() bool {
		return func() bool { src.mu.Lock(); defer src.mu.Unlock(); return src.reads >= n }
	}
	waitfor.Cond(t, 5*time.Second, "retried reads", reads(5))

	src.mu.Lock()
	src.cfg, src.err = &config.Config{System: config.System{RemoteSyslog: config.RemoteSyslog{Host: "192.0.2.9"}}}, nil
	src.mu.Unlock()
	waitfor.Cond(t, 5*time.Second, "retried reads against a refusing supervisor", reads(10))
	mu.Lock()
	supDown = false
	mu.Unlock()
	applied := "remote syslog 192.0.2.9:514 over udp as flashgate"
	waitfor.Cond(t, 5*time.Second, "remote syslog applied", func() bool { return log.count(applied) == 2 }) // the failure too
	n := func() int { src.mu.Lock(); defer src.mu.Unlock(); return src.reads }()
	time.Sleep(100 * time.Millisecond)
	if after := func() int { src.mu.Lock(); defer src.mu.Unlock(); return src.reads }(); after != n {
		t.Errorf("%d more reads after everything was applied; want retries to stop", after-n)
	}

	for _, tc := range []struct {
		substr string
		want   int
	}{
		{"has not answered", 1},
		{"read the running configuration: configd GET /v1/running: connection refused", 1},
		{"remote syslog 192.0.2.9:514 over udp as flashgate: supervisor API: dial", 1},
	} {
		if got := log.count(tc.substr); got != tc.want {
			t.Errorf("%d log lines with %q, want %d; log:\n%s", got, tc.substr, tc.want, log.String())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(syslogSet, []string{"192.0.2.9:514"}) {
		t.Errorf("syslog set to %q, want once to 192.0.2.9:514", syslogSet)
	}
}
