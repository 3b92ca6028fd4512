package pid1

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/supervisor"
)

// configSource is what PID 1 needs from configd: the running configuration
// and the stream of changes (services/configd/client.Client).
type configSource interface {
	Running(ctx context.Context) (*config.Config, uint64, error)
	Watch(ctx context.Context) <-chan config.Change
}

// systemTarget is where the system settings PID 1 owns are applied.
type systemTarget struct {
	setHostname func(name string) error
	setSyslog   func(*supervisor.SyslogConfig) error
	logf        func(format string, args ...any)
}

// systemState is what was last applied, so that a commit that changed
// other system settings (NTP, admins) does not re-apply these.
type systemState struct {
	hostname string
	syslog   string // "" when off, else a description compared for changes
}

// followSystem applies the configuration's hostname and remote syslog, the
// settings of the system section that belong to PID 1, at start (configd's
// first change is "current") and after every commit that changes the
// system section, until ctx ends. applied is what is in force already.
func followSystem(ctx context.Context, src configSource, to systemTarget, applied systemState) {
	for ch := range src.Watch(ctx) {
		if !slices.Contains(ch.Sections, "system") {
			continue
		}
		cfg, _, err := src.Running(ctx)
		if err != nil {
			to.logf("system settings: %v; keeping the current ones", err)
			continue
		}
		applied = applySystem(cfg.System, applied, to)
	}
}

func applySystem(sys config.System, applied systemState, to systemTarget) systemState {
	name := sys.Hostname
	if name == "" {
		name = DefaultHostname
	}
	if name != applied.hostname {
		if err := to.setHostname(name); err != nil {
			to.logf("hostname %q: %v", name, err)
		} else {
			applied.hostname = name
			to.logf("hostname %s", name)
		}
	}

	rs := sys.RemoteSyslog
	var want *supervisor.SyslogConfig
	desc := ""
	if rs.Host != "" {
		port := rs.Port
		if port == 0 {
			port = 514
		}
		network := rs.Protocol
		if network == "" {
			network = "udp"
		}
		want = &supervisor.SyslogConfig{Addr: net.JoinHostPort(rs.Host, strconv.Itoa(port)), Network: network, Format: "rfc5424", Hostname: name}
		desc = fmt.Sprintf("%s over %s as %s", want.Addr, network, name)
	}
	if desc == applied.syslog {
		return applied
	}
	if err := to.setSyslog(want); err != nil {
		to.logf("remote syslog: %v", err)
		return applied
	}
	applied.syslog = desc
	return applied
}
