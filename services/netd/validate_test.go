package netd

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	pfx := netip.MustParsePrefix
	base := func() *Desired {
		return &Desired{
			Links: []Link{{Name: "eth0", Role: RoleWAN, Path: "interfaces[eth0]"}, {Name: "eth1", Role: RoleLAN, Path: "interfaces[eth1]"}},
			Addresses: []Address{
				{Link: "eth1", Prefix: pfx("192.168.1.1/24"), Path: "interfaces[eth1].addresses[0]"},
				{Link: "eth0", Prefix: pfx("203.0.113.2/24"), Path: "interfaces[eth0].addresses[0]"},
			},
			Firewall: Firewall{
				Interfaces: []Interface{{"eth0", RoleWAN}, {"eth1", RoleLAN}},
				Tunnels: []Tunnel{{Name: "branch", Peer: netip.MustParseAddr("198.51.100.1"), Path: "tunnels[branch]",
					RemoteSubnets: []netip.Prefix{pfx("10.20.0.0/16")}}},
				Rules: []Rule{{Name: "ok", Chain: ChainForward, In: RoleLAN, Out: "eth0", Protocol: "tcp",
					DestinationPorts: []PortRange{{25, 25}}, Action: ActionDrop, Path: "firewall.rules[ok]"}},
				PortForwards: []PortForward{{Name: "web", In: RoleWAN, Protocol: "tcp", External: PortRange{443, 443},
					Destination: netip.MustParseAddr("192.168.1.10"), Path: "firewall.port_forwards[web]"}},
			},
		}
	}
	cases := []struct {
		name     string
		change   func(d *Desired)
		wantPath string // "" means valid
		wantMsg  string
	}{
		{"the base is valid", func(d *Desired) {}, "", ""},
		{"rule with an unknown in interface", func(d *Desired) { d.Firewall.Rules[0].In = "eth7" },
			"firewall.rules[ok].in", `unknown interface "eth7"`},
		{"rule with an unknown out interface", func(d *Desired) { d.Firewall.Rules[0].Out = "wlan0" },
			"firewall.rules[ok].out", `unknown interface "wlan0"`},
		{"input rule with an out interface", func(d *Desired) { d.Firewall.Rules[0].Chain = ChainInput },
			"firewall.rules[ok].out", "an input rule has no outgoing interface"},
		{"ports on icmp", func(d *Desired) { d.Firewall.Rules[0].Protocol = "icmp" },
			"firewall.rules[ok].protocol", "ports need protocol tcp or udp"},
		{"unknown action", func(d *Desired) { d.Firewall.Rules[0].Action = "allow" },
			"firewall.rules[ok].action", `"allow" is not an action`},
		{"icmp with only IPv6 networks", func(d *Desired) {
			r := &d.Firewall.Rules[0]
			r.Protocol, r.DestinationPorts, r.Sources = "icmp", nil, []netip.Prefix{pfx("2001:db8::/32")}
		}, "firewall.rules[ok].protocol", "never matches"},
		{"masquerade on an unknown interface", func(d *Desired) {
			d.Firewall.Masquerade = []Masquerade{{Name: "m", Interface: "ppp0", Path: "firewall.nat.masquerade[m]"}}
		}, "firewall.nat.masquerade[m].interface", `unknown interface "ppp0"`},
		{"port forwards on overlapping ports", func(d *Desired) {
			d.Firewall.PortForwards = append(d.Firewall.PortForwards, PortForward{Name: "range", In: "eth0", Protocol: "tcp",
				External: PortRange{400, 500}, Destination: netip.MustParseAddr("192.168.1.11"), Path: "firewall.port_forwards[range]"})
		}, "firewall.port_forwards[range].external_ports", "conflicts with firewall.port_forwards[web]"},
		{"same port, other protocol is fine", func(d *Desired) {
			d.Firewall.PortForwards = append(d.Firewall.PortForwards, PortForward{Name: "quic", In: RoleWAN, Protocol: "udp",
				External: PortRange{443, 443}, Destination: netip.MustParseAddr("192.168.1.11"), Path: "firewall.port_forwards[quic]"})
		}, "", ""},
		{"same port on the LAN is fine", func(d *Desired) {
			d.Firewall.PortForwards = append(d.Firewall.PortForwards, PortForward{Name: "in", In: RoleLAN, Protocol: "tcp",
				External: PortRange{443, 443}, Destination: netip.MustParseAddr("192.168.1.11"), Path: "firewall.port_forwards[in]"})
		}, "", ""},
		{"port forward taking IKE's port", func(d *Desired) {
			d.Firewall.PortForwards[0].Protocol, d.Firewall.PortForwards[0].External = "udp", PortRange{4000, 5000}
		}, "firewall.port_forwards[web].external_ports", "takes IKE's ports"},
		{"shifted port range", func(d *Desired) {
			d.Firewall.PortForwards[0].External, d.Firewall.PortForwards[0].DestinationPort = PortRange{8000, 8010}, 9000
		}, "firewall.port_forwards[web].destination_port", "forwarded to the same ports"},
		{"tunnel subnet overlapping the LAN", func(d *Desired) {
			d.Firewall.Tunnels[0].RemoteSubnets = append(d.Firewall.Tunnels[0].RemoteSubnets, pfx("192.168.0.0/16"))
		}, "tunnels[branch].remote_subnets[1]", "overlaps 192.168.1.0/24 (interfaces[eth1].addresses[0])"},
		{"two tunnels to overlapping subnets", func(d *Desired) {
			d.Firewall.Tunnels = append(d.Firewall.Tunnels, Tunnel{Name: "other", Path: "tunnels[other]", RemoteSubnets: []netip.Prefix{pfx("10.20.30.0/24")}})
		}, "tunnels[other].remote_subnets[0]", "overlaps 10.20.0.0/16 (tunnels[branch].remote_subnets[0])"},
		{"two interfaces on overlapping networks", func(d *Desired) {
			d.Addresses[1].Prefix = pfx("192.168.1.200/25")
		}, "interfaces[eth0].addresses[0]", "overlaps 192.168.1.1/24 on eth1"},
		{"address on an unknown link", func(d *Desired) { d.Addresses[0].Link = "eth5" },
			"interfaces[eth1].addresses[0]", `unknown interface "eth5"`},
		{"route without gateway or interface", func(d *Desired) {
			d.Routes = []Route{{Destination: pfx("10.0.0.0/8"), Path: "routes[x]"}}
		}, "routes[x]", "needs a gateway, an interface or both"},
		{"route with a gateway of the other family", func(d *Desired) {
			d.Routes = []Route{{Destination: pfx("10.0.0.0/8"), Gateway: netip.MustParseAddr("fe80::1"), Link: "eth0", Path: "routes[x]"}}
		}, "routes[x].gateway", "not of the destination's address family"},
		{"MTU out of range", func(d *Desired) { d.Links[0].MTU = 100 }, "interfaces[eth0].mtu", "out of range"},
		{"interface name too long", func(d *Desired) { d.Links[0].Name = "averyveryverylongname" },
			"interfaces[eth0].name", "is not an interface name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := base()
			c.change(d)
			err := d.Validate()
			if c.wantPath == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want a *ValidationError at %s, got %v", c.wantPath, err)
			}
			for _, p := range ve.Problems {
				if p.Path == c.wantPath && strings.Contains(p.Msg, c.wantMsg) {
					return
				}
			}
			t.Errorf("want a problem at %s saying %q, got: %v", c.wantPath, c.wantMsg, err)
		})
	}
}

// TestPortForwardInAgreesWithConfig: configd refuses at commit what netd
// would refuse, so that a commit never succeeds only to have netd keep the
// old rules. Both must refuse the tunnel zone at the same path.
func TestPortForwardInAgreesWithConfig(t *testing.T) {
	const path = "firewall.port_forwards[web].in"
	for _, in := range []string{"wan", "lan", "opt", "any", "wan0", "tunnel", "eth9"} {
		c := labConfig()
		c.Firewall.PortForwards[0].In = in
		cerr := c.Validate()
		nerr := FromConfig(c).Validate()
		if (cerr == nil) != (nerr == nil) {
			t.Errorf("port forward in %q: config says %v, netd says %v", in, cerr, nerr)
			continue
		}
		if cerr != nil && (!strings.Contains(cerr.Error(), path) || !strings.Contains(nerr.Error(), path)) {
			t.Errorf("port forward in %q: both refuse it, but not both at %s:\nconfig: %v\nnetd: %v", in, path, cerr, nerr)
		}
	}
}
