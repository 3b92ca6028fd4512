package hostd

import (
	"fmt"
	"net"
	"strconv"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/supervisor"
)

// DefaultHostname is the box's name while the configuration names none;
// PID 1 sets it at boot, before hostd runs.
const DefaultHostname = "flashgate"

// settings are the box's own settings as the configuration asks for them,
// with the defaults of unset fields filled in.
type settings struct {
	hostname    string
	timezone    string                  // IANA name
	consoleBaud int                     // the getty's speed; the board's when unset
	syslog      supervisor.SyslogConfig // an empty Addr turns forwarding off
}

// wanted is what sys asks for on a board whose console runs at
// boardBaud.
func wanted(sys config.System, boardBaud int) settings {
	s := settings{hostname: sys.Hostname, timezone: sys.Timezone, consoleBaud: sys.ConsoleBaud}
	if s.hostname == "" {
		s.hostname = DefaultHostname
	}
	if s.timezone == "" {
		s.timezone = "UTC"
	}
	if s.consoleBaud == 0 {
		s.consoleBaud = boardBaud
	}
	if rs := sys.RemoteSyslog; rs.Host != "" {
		port := rs.Port
		if port == 0 {
			port = 514
		}
		network := rs.Protocol
		if network == "" {
			network = "udp"
		}
		s.syslog = supervisor.SyslogConfig{
			Addr:     net.JoinHostPort(rs.Host, strconv.Itoa(port)),
			Network:  network,
			Format:   "rfc5424",
			Hostname: s.hostname, // our name in the messages
		}
	}
	return s
}

// describeSyslog says where logs go, for hostd's log.
func describeSyslog(c supervisor.SyslogConfig) string {
	if c.Addr == "" {
		return "off"
	}
	return fmt.Sprintf("%s over %s as %s", c.Addr, c.Network, c.Hostname)
}
