package netd

import (
	"fmt"
	"net/netip"

	"github.com/flashgate/flashgate/config"
)

// This file is the only one that knows the configuration schema: it turns
// a config.Config into netd's own Desired state. Disabled elements are left
// out here, so the reconcilers never see them; disabled interfaces stay in
// the firewall's interface list (with their role) so that rules naming them
// remain valid.

// FromConfig builds the desired network state from a configuration.
func FromConfig(c *config.Config) *Desired {
	d := &Desired{Forwarding: true}
	fw := &d.Firewall
	for _, ifc := range c.Interfaces {
		path := fmt.Sprintf("interfaces[%s]", ifc.Name)
		fw.Interfaces = append(fw.Interfaces, Interface{Name: ifc.Name, Role: ifc.Role})
		d.Links = append(d.Links, Link{Name: ifc.Name, Role: ifc.Role, Up: ifc.Enabled, MTU: ifc.MTU,
			DHCP: ifc.Enabled && ifc.Addressing == config.AddressingDHCP, Path: path})
		if !ifc.Enabled || ifc.Addressing != config.AddressingStatic {
			continue
		}
		for i, a := range ifc.Addresses {
			d.Addresses = append(d.Addresses, Address{Link: ifc.Name, Prefix: a.Prefix,
				Path: fmt.Sprintf("%s.addresses[%d]", path, i)})
		}
		if sc, ok := dhcpScope(&ifc, path+".dhcp_server"); ok {
			d.DHCPServers = append(d.DHCPServers, sc)
			fw.DHCPServers = append(fw.DHCPServers, ifc.Name)
		}
	}
	for _, r := range c.Routes {
		if !r.Enabled || c.RouteTunnelByInterface(r.Interface) != nil {
			// Routes through a route tunnel's ipsecN are iked's: it
			// owns the interface and adds them only while the tunnel
			// carries a CHILD_SA (docs/architecture.md).
			continue
		}
		d.Routes = append(d.Routes, Route{Destination: r.Destination.Prefix, Gateway: r.Gateway.Addr,
			Link: r.Interface, Metric: r.Metric, Path: fmt.Sprintf("routes[%s]", r.Name)})
	}
	for _, t := range c.Tunnels {
		if !t.Enabled {
			continue
		}
		ft := Tunnel{Name: t.Name, Peer: t.RemoteAddress.Addr, Path: fmt.Sprintf("tunnels[%s]", t.Name)}
		if t.IsRoute() {
			ft.Interface = t.Interface
			for _, r := range c.Routes {
				if r.Enabled && r.Interface == t.Interface {
					ft.Routes = append(ft.Routes, r.Destination.Prefix.Masked())
				}
			}
		} else {
			ft.LocalSubnets, ft.RemoteSubnets = prefixes(t.LocalSubnets), prefixes(t.RemoteSubnets)
		}
		fw.Tunnels = append(fw.Tunnels, ft)
	}
	for _, r := range c.Firewall.Rules {
		if !r.Enabled {
			continue
		}
		fw.Rules = append(fw.Rules, Rule{Name: r.Name, Chain: r.Chain, In: r.In, Out: r.Out,
			Sources: prefixes(r.Sources), Destinations: prefixes(r.Destinations), Protocol: r.Protocol,
			SourcePorts: ports(r.SourcePorts), DestinationPorts: ports(r.DestinationPorts),
			Action: r.Action, Log: r.Log, Path: fmt.Sprintf("firewall.rules[%s]", r.Name)})
	}
	for _, m := range c.Firewall.NAT.Masquerade {
		fw.Masquerade = append(fw.Masquerade, Masquerade{Name: m.Name, Interface: m.Interface,
			Sources: prefixes(m.Sources), Path: fmt.Sprintf("firewall.nat.masquerade[%s]", m.Name)})
	}
	for _, e := range c.Firewall.NAT.Exemptions {
		fw.Exemptions = append(fw.Exemptions, Exemption{Name: e.Name, Sources: prefixes(e.Sources),
			Destinations: prefixes(e.Destinations), Path: fmt.Sprintf("firewall.nat.exemptions[%s]", e.Name)})
	}
	for _, p := range c.Firewall.PortForwards {
		if !p.Enabled {
			continue
		}
		fw.PortForwards = append(fw.PortForwards, PortForward{Name: p.Name, In: p.In, Protocol: p.Protocol,
			External: PortRange{p.ExternalPorts.Lo, p.ExternalPorts.Hi}, Destination: p.Destination.Addr,
			DestinationPort: p.DestinationPort, Sources: prefixes(p.Sources), Log: p.Log,
			Path: fmt.Sprintf("firewall.port_forwards[%s]", p.Name)})
	}
	return d
}

// dhcpScope is the DHCP server an interface runs, if any: on its first
// IPv4 address, with the configured range or else the automatic pool. A
// LAN without a dhcp_server block whose network is too small for the
// automatic pool runs none, as before the block existed (config refuses
// the same network when the server is configured explicitly).
func dhcpScope(ifc *config.Interface, path string) (DHCPScope, bool) {
	if !ifc.ServesDHCP() {
		return DHCPScope{}, false
	}
	addr, ok := ifc.DHCPAddress()
	if !ok {
		return DHCPScope{}, false
	}
	s := &ifc.DHCPServer
	first, last, ok := s.DHCPRange(addr)
	if !ok {
		return DHCPScope{}, false
	}
	sc := DHCPScope{Link: ifc.Name, Address: addr, First: first, Last: last, LeaseTime: s.LeaseDuration(), Path: path}
	for _, l := range s.StaticLeases {
		hw, err := l.HardwareAddr()
		if err != nil || !l.Address.IsValid() {
			continue // config.Validate refuses these; netd's validation sees the rest
		}
		sc.Reservations = append(sc.Reservations, Reservation{MAC: hw.String(), Address: l.Address.Addr, Hostname: l.Hostname})
	}
	return sc, true
}

func prefixes(ps []config.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		out[i] = p.Prefix
	}
	return out
}

func ports(rs []config.PortRange) []PortRange {
	out := make([]PortRange, len(rs))
	for i, r := range rs {
		out[i] = PortRange{r.Lo, r.Hi}
	}
	return out
}
