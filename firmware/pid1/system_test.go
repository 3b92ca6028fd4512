package pid1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/supervisor"
)

// fakeConfigd delivers its changes, then answers Running with its
// results in order (PID 1 reads the running configuration only for
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

func TestFollowSystem(t *testing.T) {
	sys := func(host string, rs config.RemoteSyslog) *config.Config {
		return &config.Config{System: config.System{Hostname: host, RemoteSyslog: rs}}
	}
	all := []string{"system", "interfaces", "routes", "firewall", "tunnels"}
	f := &fakeConfigd{
		changes: []config.Change{
			{Reason: "current", Sections: all},
			{Reason: "commit", Sections: []string{"tunnels"}},
			{Reason: "commit", Sections: []string{"system"}}, // admins changed: nothing of ours
			{Reason: "commit", Sections: []string{"system"}},
			{Reason: "commit", Sections: []string{"system"}},
			{Reason: "commit", Sections: []string{"system"}},
			{Reason: "commit", Sections: []string{"system"}},
			{Reason: "commit", Sections: []string{"system"}},
		},
		running: []runningResult{ // none for the tunnels change
			{cfg: sys("", config.RemoteSyslog{})},
			{cfg: sys("", config.RemoteSyslog{})},
			{cfg: sys("gw1", config.RemoteSyslog{Host: "192.0.2.9"})},
			{err: errors.New("configd: connection refused")},
			{cfg: sys("gw1", config.RemoteSyslog{Host: "192.0.2.9", Port: 5514, Protocol: "tcp"})},
			{cfg: sys("gw1", config.RemoteSyslog{Host: "192.0.2.9", Port: 5514, Protocol: "tcp"})}, // admins again
			{cfg: sys("gw1", config.RemoteSyslog{})},
		},
	}
	var events []string
	target := systemTarget{
		setHostname: func(n string) error { events = append(events, "hostname "+n); return nil },
		setSyslog: func(c *supervisor.SyslogConfig) error {
			if c == nil {
				events = append(events, "syslog off")
			} else {
				events = append(events, fmt.Sprintf("syslog %s %s %s %s", c.Addr, c.Network, c.Format, c.Hostname))
			}
			return nil
		},
		logf: func(format string, args ...any) { events = append(events, "log: "+fmt.Sprintf(format, args...)) },
	}
	followSystem(context.Background(), f, target, systemState{hostname: DefaultHostname, timezone: "UTC"}) // as set at boot
	want := []string{
		// The boot's hostname and no syslog: nothing to do at first.
		"hostname gw1", "log: hostname gw1", "syslog 192.0.2.9:514 udp rfc5424 gw1",
		"log: system settings: configd: connection refused; keeping the current ones",
		"syslog 192.0.2.9:5514 tcp rfc5424 gw1",
		"syslog off",
	}
	if len(f.running) != 0 {
		t.Errorf("%d running configurations never read", len(f.running))
	}
	if !slices.Equal(events, want) {
		t.Errorf("applied:\n  %s\nwant:\n  %s", strings.Join(events, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestApplySystemSyslogOverTCP applies a configuration's TCP syslog server
// to a real supervisor: the supervisor's own line about it reaches a
// listener on loopback as an octet-counted RFC 5424 frame.
func TestApplySystemSyslogOverTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	sup, err := supervisor.New(supervisor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.SetRemoteSyslog(nil)
	var logged []string
	to := systemTarget{
		setHostname: func(string) error { return nil },
		setSyslog:   sup.SetRemoteSyslog,
		logf:        func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) },
	}
	rs := config.RemoteSyslog{Host: "127.0.0.1", Port: port, Protocol: "tcp"}
	applied := applySystem(config.System{Hostname: "gw1", RemoteSyslog: rs}, systemState{hostname: "gw1", timezone: "UTC"}, to)
	if want := fmt.Sprintf("127.0.0.1:%d over tcp as gw1", port); applied.syslog != want {
		t.Fatalf("applied syslog %q (log %q), want %q", applied.syslog, logged, want)
	}

	ln.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("the supervisor did not connect to the TCP syslog server: %v", err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	// The supervisor says both that it forwards and that it connected,
	// in either order: look for the first among the first frames.
	want := fmt.Sprintf(" gw1 flashgate - supervisor - syslog: forwarding to 127.0.0.1:%d over tcp (rfc5424)", port)
	var frames []string
	for range 4 {
		head, err := r.ReadString(' ')
		if err != nil {
			t.Fatalf("reading the frame length after %q: %v", frames, err)
		}
		n, err := strconv.Atoi(strings.TrimSuffix(head, " "))
		if err != nil || n <= 0 {
			t.Fatalf("frame header %q is not an octet count", head)
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(r, msg); err != nil {
			t.Fatalf("reading a %d-octet frame: %v", n, err)
		}
		if strings.HasSuffix(string(msg), want) {
			return
		}
		frames = append(frames, string(msg))
	}
	t.Errorf("frames %q; want one ending in %q", frames, want)
}
