package pid1

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

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
		},
		running: []runningResult{ // none for the tunnels change
			{cfg: sys("", config.RemoteSyslog{})},
			{cfg: sys("", config.RemoteSyslog{})},
			{cfg: sys("gw1", config.RemoteSyslog{Host: "192.0.2.9"})},
			{err: errors.New("configd: connection refused")},
			{cfg: sys("gw1", config.RemoteSyslog{Host: "192.0.2.9", Port: 5514, Protocol: "tcp"})},
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
				events = append(events, fmt.Sprintf("syslog %s %s %s", c.Addr, c.Format, c.Hostname))
			}
			return nil
		},
		logf: func(format string, args ...any) { events = append(events, "log: "+fmt.Sprintf(format, args...)) },
	}
	followSystem(context.Background(), f, target, systemState{hostname: DefaultHostname}) // as set at boot
	want := []string{
		// The boot's hostname and no syslog: nothing to do at first.
		"hostname gw1", "log: hostname gw1", "syslog 192.0.2.9:514 rfc5424 gw1",
		"log: system settings: configd: connection refused; keeping the current ones",
		"log: remote syslog over tcp is not supported by this firmware (UDP only); not forwarding logs", "syslog off",
		"syslog off",
	}
	if len(f.running) != 0 {
		t.Errorf("%d running configurations never read", len(f.running))
	}
	if !slices.Equal(events, want) {
		t.Errorf("applied:\n  %s\nwant:\n  %s", strings.Join(events, "\n  "), strings.Join(want, "\n  "))
	}
}
