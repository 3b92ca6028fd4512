package pid1

import (
	"context"
	"errors"
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
	// setTimezone installs a zone by its POSIX TZ rule (config.TimezoneRule).
	setTimezone func(name, rule string) error
	// setConsoleBaud restarts the console getty at a speed; nil when the
	// box runs no console getty. boardBaud is the speed without a setting.
	setConsoleBaud func(baud int) error
	boardBaud      int
	logf           func(format string, args ...any)
}

// systemState is what was last applied, so that a commit that changed
// other system settings (NTP, admins) does not re-apply these.
type systemState struct {
	hostname    string
	syslog      string // "" when off, else a description compared for changes
	timezone    string // IANA name; "UTC" is what a box without /etc/localtime shows
	consoleBaud int
}

// followSystem applies the configuration's hostname, remote syslog, time
// zone and console speed, the settings of the system section that belong
// to PID 1 (netd owns the NTP servers), at start (configd's
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

	applied = applyTimezone(sys, applied, to)
	applied = applyConsoleBaud(sys, applied, to)

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

func applyTimezone(sys config.System, applied systemState, to systemTarget) systemState {
	name := sys.Timezone
	if name == "" {
		name = "UTC"
	}
	if name == applied.timezone {
		return applied
	}
	rule, ok := config.TimezoneRule(name)
	if !ok { // configd validates; an older firmware's database might not
		to.logf("time zone %q: not a zone this firmware knows; keeping %s", name, applied.timezone)
		return applied
	}
	if err := to.setTimezone(name, rule); err != nil {
		to.logf("time zone %s: %v", name, err)
		return applied
	}
	to.logf("time zone %s (%s)", name, rule)
	applied.timezone = name
	return applied
}

func applyConsoleBaud(sys config.System, applied systemState, to systemTarget) systemState {
	if to.setConsoleBaud == nil {
		return applied
	}
	baud := sys.ConsoleBaud
	if baud == 0 {
		baud = to.boardBaud
	}
	if baud == applied.consoleBaud {
		return applied
	}
	if err := to.setConsoleBaud(baud); err != nil {
		to.logf("console speed %d: %v", baud, err)
		return applied
	}
	// The kernel's console (its messages) and syslinux keep the speed of
	// the image's command line until the next image build.
	to.logf("console getty at %d baud", baud)
	applied.consoleBaud = baud
	return applied
}

// consoleArgs is the console getty's command line at a speed: the service
// table's own, so that the two cannot drift apart.
func consoleArgs(exe string, c consoleSpec, baud int) ([]string, error) {
	c.Baud = baud
	for _, svc := range serviceTable(exe, c) {
		if svc.Name == "console" {
			return svc.Args, nil
		}
	}
	return nil, errors.New("the service table has no console getty")
}
