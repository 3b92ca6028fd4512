package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/flashgate/flashgate/config"
)

// `show dhcp` lists netd's DHCP servers on the LAN and opt interfaces: the
// range, lease time and static leases each serves, and what it gave out.
// netd keeps the leases in memory only and reports them in GET /v1/status
// (dhcp_servers), so that is where they are read.

func showDHCP(ctx context.Context, s *session, b *strings.Builder, args []string) error {
	if len(args) > 1 {
		return errors.New("usage: show dhcp [INTERFACE]")
	}
	st, err := s.netd.Status(ctx)
	if err != nil {
		return unreachable("netd", err)
	}
	servers := st.DHCPServers
	if len(args) == 1 {
		servers = nil
		for _, srv := range st.DHCPServers {
			if srv.Link == args[0] {
				servers = append(servers, srv)
			}
		}
		if len(servers) == 0 {
			if c := s.running(); c != nil {
				if ifc := c.Interface(args[0]); ifc != nil && dhcpOff(ifc) {
					return fmt.Errorf("the DHCP server on %s is %s (set interfaces.%s.dhcp_server.enabled true turns it on)", ifc.Name, offWord(ifc), ifc.Name)
				}
			}
			return fmt.Errorf("no DHCP server runs on %q (%s)", clip(args[0], 20), dhcpLinks(st.DHCPServers))
		}
	}
	writeDHCPLeases(b, servers, time.Now())
	if len(args) == 0 {
		if c := s.running(); c != nil {
			writeDHCPOff(b, c, servers)
		}
	}
	return nil
}

// writeDHCPOff names the LAN and opt interfaces whose server the
// configuration turned off, and the opt interfaces with DHCP settings
// whose server was never turned on, so that "no server on eth2" is not
// taken for a fault. An opt interface without settings is not named: not
// serving is what opt does.
func writeDHCPOff(b *strings.Builder, c *config.Config, running []netdapi.DHCPServerState) {
	for _, ifc := range c.Interfaces {
		if !dhcpOff(&ifc) || (ifc.Role == config.RoleOpt && ifc.DHCPServer.IsZero()) ||
			slices.ContainsFunc(running, func(srv netdapi.DHCPServerState) bool { return srv.Link == ifc.Name }) {
			continue
		}
		if ifc.DHCPServer.Enabled.IsSet() {
			fmt.Fprintf(b, "%s: DHCP server turned off (interfaces.%s.dhcp_server.enabled false)\n", ifc.Name, ifc.Name)
		} else {
			fmt.Fprintf(b, "%s: DHCP server not turned on (an opt interface serves only with interfaces.%s.dhcp_server.enabled true)\n", ifc.Name, ifc.Name)
		}
	}
}

// dhcpOff reports whether a LAN or opt interface serves no DHCP because of
// its dhcp_server setting: turned off, or on opt never turned on.
func dhcpOff(ifc *config.Interface) bool {
	return (ifc.Role == config.RoleLAN || ifc.Role == config.RoleOpt) && !ifc.DHCPServer.Enabled.Or(ifc.DHCPServerByDefault())
}

// offWord says how an interface's server came to be off, for dhcpOff ones.
func offWord(ifc *config.Interface) string {
	if ifc.DHCPServer.Enabled.IsSet() {
		return "turned off"
	}
	return "off: opt interfaces serve only when turned on"
}

// dhcpLinks names the interfaces a DHCP server runs on, for an error.
func dhcpLinks(servers []netdapi.DHCPServerState) string {
	if len(servers) == 0 {
		return "none runs"
	}
	links := make([]string, len(servers))
	for i, srv := range servers {
		links[i] = srv.Link
	}
	return "it runs on " + strings.Join(links, ", ")
}

// writeDHCPLeases prints each server's pool and its leases as a table
// that fits 80 columns. Host names come from the clients, so they are
// made printable and clipped.
func writeDHCPLeases(b *strings.Builder, servers []netdapi.DHCPServerState, now time.Time) {
	if len(servers) == 0 {
		b.WriteString("No DHCP server runs: netd starts one on each enabled LAN interface\n" +
			"with a static IPv4 address (/29 or larger for the automatic pool)\n" +
			"unless its dhcp_server is turned off, and on each such opt interface\n" +
			"whose dhcp_server is turned on.\n")
		return
	}
	for i, srv := range servers {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(b, "%s: pool %s, %s\n", srv.Link, srv.Pool, plural(len(srv.Leases), "lease"))
		if srv.LeaseTime > 0 {
			fmt.Fprintf(b, "  leases last %s", shortDuration(time.Duration(srv.LeaseTime)*time.Second))
			if len(srv.StaticLeases) > 0 {
				fmt.Fprintf(b, "; %s:", plural(len(srv.StaticLeases), "static lease"))
			}
			b.WriteString("\n")
		}
		for _, sl := range srv.StaticLeases {
			host := printable(sl.Hostname)
			if host == "" {
				host = "-"
			}
			fmt.Fprintf(b, "    %-15s  %-17s  %s\n", sl.Address, clip(sl.MAC, 17), clip(host, 40))
		}
		if len(srv.Leases) == 0 {
			continue
		}
		fmt.Fprintf(b, "  %-15s  %-17s  %-20s  %s\n", "ADDRESS", "MAC", "HOST NAME", "EXPIRES")
		for _, l := range srv.Leases {
			mac := l.MAC
			if strings.HasPrefix(mac, "declined:") {
				// A client found the address in use; netd holds it back.
				mac = "(declined)"
			}
			host := printable(l.Hostname)
			if r := []rune(host); len(r) > 20 {
				host = string(r[:17]) + "..."
			}
			if host == "" {
				host = "-"
			}
			fmt.Fprintf(b, "  %-15s  %-17s  %-20s  %s\n", l.Address, clip(mac, 17), host, leaseExpiry(l, now))
		}
	}
}

// leaseExpiry says when a lease ends, relative to now: a console clock
// may be wrong, and "in 11h58m" is what an admin wants to know.
func leaseExpiry(l netdapi.ServerLease, now time.Time) string {
	left := l.Expires.Sub(now).Round(time.Second)
	switch {
	case left <= 0:
		return "expired"
	case l.Offered:
		// Offered, not yet requested: the offer lapses in left.
		return "offered, " + left.String()
	case l.Static:
		return "static, in " + left.String()
	}
	return "in " + left.String()
}

// shortDuration writes 12h0m0s as 12h and 10m0s as 10m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// dhcpServerLinks are the interfaces netd runs a DHCP server on, for
// completion.
func dhcpServerLinks(s *session) []string {
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	st, err := s.netd.Status(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, srv := range st.DHCPServers {
		out = append(out, srv.Link)
	}
	return out
}
