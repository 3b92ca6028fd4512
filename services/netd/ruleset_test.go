package netd

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func twoPortFirewall() Firewall {
	return Firewall{
		Interfaces: []Interface{{"eth0", RoleWAN}, {"eth1", RoleLAN}},
		Masquerade: []Masquerade{{Name: "lan-out-eth0", Interface: "eth0"}},
	}
}

// TestBuildDefaultPolicy pins the whole ruleset of a fresh two-port box:
// the order of these lines is the policy.
func TestBuildDefaultPolicy(t *testing.T) {
	fw := twoPortFirewall()
	want := []string{
		`input ct state established,related counter accept comment "builtin:established"`,
		`input ct state invalid counter drop comment "builtin:invalid"`,
		`input iifname "lo" counter accept comment "builtin:loopback"`,
		`input meta l4proto icmpv6 icmpv6 type 133-137 counter accept comment "builtin:ipv6-nd"`,
		`input iifname "eth0" meta l4proto udp th sport 67 th dport 68 counter accept comment "builtin:dhcp-client"`,
		`input iifname "eth1" meta l4proto tcp th dport 443 counter accept comment "builtin:lan-webui"`,
		`input iifname "eth1" meta l4proto tcp th dport 80 counter accept comment "builtin:lan-webui"`,
		`input iifname "eth1" meta l4proto icmp icmp type 8 counter accept comment "builtin:lan-ping"`,
		`input iifname "eth1" meta l4proto icmpv6 icmpv6 type 128 counter accept comment "builtin:lan-ping"`,
		`input counter drop comment "builtin:drop"`,
		`forward ct state established,related counter accept comment "builtin:established"`,
		`forward ct state invalid counter drop comment "builtin:invalid"`,
		`forward iifname "eth1" oifname "eth0" counter accept comment "builtin:lan-to-wan"`,
		`forward counter drop comment "builtin:drop"`,
		`postrouting oifname "eth0" meta nfproto ipv4 counter masquerade comment "masquerade:lan-out-eth0"`,
	}
	got := specStrings(Build(&fw))
	if !slices.Equal(got, want) {
		t.Errorf("Build of the two-port default:\ngot\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

func TestBuild(t *testing.T) {
	pfx := netip.MustParsePrefix
	cases := []struct {
		name   string
		change func(f *Firewall)
		want   []string // must appear, in this order
		absent []string // substrings no line may contain
	}{
		{
			name: "tunnel peers open IKE and ESP from their address only, once per peer",
			change: func(f *Firewall) {
				f.Tunnels = []Tunnel{
					{Name: "a", Peer: netip.MustParseAddr("198.51.100.7"), RemoteSubnets: []netip.Prefix{pfx("10.2.0.0/16")}},
					{Name: "b", Peer: netip.MustParseAddr("198.51.100.7"), RemoteSubnets: []netip.Prefix{pfx("10.3.0.0/16")}},
				}
			},
			want: []string{
				`input meta nfproto ipv4 ip saddr 198.51.100.7/32 meta l4proto udp th dport 500 counter accept comment "builtin:ike"`,
				`input meta nfproto ipv4 ip saddr 198.51.100.7/32 meta l4proto udp th dport 4500 counter accept comment "builtin:ike"`,
				`input meta nfproto ipv4 ip saddr 198.51.100.7/32 meta l4proto esp counter accept comment "builtin:esp"`,
				// Nothing for a remote subnet leaves by the WAN unencrypted,
				// first of all (even a running connection): a tunnel that is
				// down leaks nothing.
				`forward oifname "eth0" rt ipsec missing meta nfproto ipv4 ip daddr 10.2.0.0/16 counter drop comment "builtin:tunnel-no-leak"`,
				`forward oifname "eth0" rt ipsec missing meta nfproto ipv4 ip daddr 10.3.0.0/16 counter drop comment "builtin:tunnel-no-leak"`,
				`forward ct state established,related counter accept comment "builtin:established"`,
				`forward iifname "eth1" oifname "eth0" counter accept comment "builtin:lan-to-wan"`,
				// Into a tunnel: the userspace plane's TUN, or kernel IPsec.
				`forward iifname "eth1" oifname "fgesp0" meta nfproto ipv4 ip daddr 10.2.0.0/16 counter accept comment "builtin:lan-to-tunnel"`,
				`forward iifname "eth1" rt ipsec exists meta nfproto ipv4 ip daddr 10.2.0.0/16 counter accept comment "builtin:lan-to-tunnel"`,
				`forward iifname "eth1" oifname "fgesp0" meta nfproto ipv4 ip daddr 10.3.0.0/16 counter accept comment "builtin:lan-to-tunnel"`,
				// A remote subnet's address is believed only out of a tunnel.
				`forward iifname "fgesp0" oifname "eth1" meta nfproto ipv4 ip saddr 10.2.0.0/16 counter accept comment "builtin:tunnel-to-lan"`,
				`forward oifname "eth1" meta secpath exists meta nfproto ipv4 ip saddr 10.2.0.0/16 counter accept comment "builtin:tunnel-to-lan"`,
				`postrouting meta nfproto ipv4 ip daddr 10.2.0.0/16 counter accept comment "builtin:tunnel-no-nat"`,
				`postrouting meta nfproto ipv4 ip daddr 10.3.0.0/16 counter accept comment "builtin:tunnel-no-nat"`,
				`postrouting oifname "eth0" meta nfproto ipv4 counter masquerade`,
			},
		},
		{
			name: "a user's LAN-to-WAN accept comes after the tunnel leak drop",
			change: func(f *Firewall) {
				f.Tunnels = []Tunnel{{Name: "a", Peer: netip.MustParseAddr("198.51.100.7"), RemoteSubnets: []netip.Prefix{pfx("10.2.0.0/16")}}}
				f.Rules = []Rule{{Name: "lan-out", Chain: ChainForward, In: RoleLAN, Out: RoleWAN, Protocol: "any", Action: ActionAccept}}
			},
			want: []string{
				`forward oifname "eth0" rt ipsec missing meta nfproto ipv4 ip daddr 10.2.0.0/16 counter drop comment "builtin:tunnel-no-leak"`,
				`forward ct state established,related counter accept comment "builtin:established"`,
				`forward iifname "eth1" oifname "eth0" counter accept comment "rule:lan-out"`,
			},
		},
		{
			name: "a responder tunnel without a peer address opens IKE from anywhere",
			change: func(f *Firewall) {
				f.Tunnels = []Tunnel{{Name: "road", RemoteSubnets: []netip.Prefix{pfx("10.9.0.0/24")}}}
			},
			want: []string{
				`input meta l4proto udp th dport 500 counter accept comment "builtin:ike"`,
				`input meta l4proto esp counter accept comment "builtin:esp"`,
			},
			absent: []string{"input meta nfproto ipv4 ip saddr"},
		},
		{
			name: "user rules expand sources and ports in order, after the conntrack shortcut",
			change: func(f *Firewall) {
				f.Rules = []Rule{{Name: "dns", Chain: ChainForward, In: RoleLAN, Out: "eth0", Protocol: "udp",
					Sources:          []netip.Prefix{pfx("192.168.1.0/25"), pfx("192.168.1.128/25")},
					DestinationPorts: []PortRange{{53, 53}, {853, 853}}, Action: ActionAccept}}
			},
			want: []string{
				`forward ct state invalid counter drop`,
				`forward iifname "eth1" oifname "eth0" meta nfproto ipv4 ip saddr 192.168.1.0/25 meta l4proto udp th dport 53 counter accept comment "rule:dns"`,
				`forward iifname "eth1" oifname "eth0" meta nfproto ipv4 ip saddr 192.168.1.0/25 meta l4proto udp th dport 853 counter accept comment "rule:dns"`,
				`forward iifname "eth1" oifname "eth0" meta nfproto ipv4 ip saddr 192.168.1.128/25 meta l4proto udp th dport 53 counter accept comment "rule:dns"`,
				`forward iifname "eth1" oifname "eth0" meta nfproto ipv4 ip saddr 192.168.1.128/25 meta l4proto udp th dport 853 counter accept comment "rule:dns"`,
				`forward iifname "eth1" oifname "eth0" counter accept comment "builtin:lan-to-wan"`,
			},
		},
		{
			name: "a zone with no interfaces makes the rule match nothing",
			change: func(f *Firewall) {
				f.Rules = []Rule{{Name: "from-opt", Chain: ChainInput, In: RoleOpt, Protocol: "any", Action: ActionAccept}}
			},
			absent: []string{"rule:from-opt"},
		},
		{
			name: "the tunnel zone narrows the rule to the remote subnets",
			change: func(f *Firewall) {
				f.Tunnels = []Tunnel{{Name: "a", Peer: netip.MustParseAddr("198.51.100.7"), RemoteSubnets: []netip.Prefix{pfx("10.2.0.0/16"), pfx("10.4.0.0/16")}}}
				f.Rules = []Rule{
					{Name: "from-tunnel", Chain: ChainInput, In: ZoneTunnel, Protocol: "tcp", DestinationPorts: []PortRange{{443, 443}}, Action: ActionAccept},
					{Name: "narrow", Chain: ChainForward, In: ZoneTunnel, Sources: []netip.Prefix{pfx("10.2.3.0/24"), pfx("10.0.0.0/8"), pfx("172.16.0.0/12")}, Protocol: "any", Action: ActionDrop},
				}
			},
			want: []string{
				`input iifname "fgesp0" meta nfproto ipv4 ip saddr 10.2.0.0/16 meta l4proto tcp th dport 443 counter accept comment "rule:from-tunnel"`,
				`input iifname "fgesp0" meta nfproto ipv4 ip saddr 10.4.0.0/16 meta l4proto tcp th dport 443 counter accept comment "rule:from-tunnel"`,
				`input meta secpath exists meta nfproto ipv4 ip saddr 10.2.0.0/16 meta l4proto tcp th dport 443 counter accept comment "rule:from-tunnel"`,
				`input meta secpath exists meta nfproto ipv4 ip saddr 10.4.0.0/16 meta l4proto tcp th dport 443 counter accept comment "rule:from-tunnel"`,
				`forward iifname "fgesp0" meta nfproto ipv4 ip saddr 10.2.3.0/24 counter drop comment "rule:narrow"`,
				`forward iifname "fgesp0" meta nfproto ipv4 ip saddr 10.2.0.0/16 counter drop comment "rule:narrow"`,
				`forward iifname "fgesp0" meta nfproto ipv4 ip saddr 10.4.0.0/16 counter drop comment "rule:narrow"`,
				`forward meta secpath exists meta nfproto ipv4 ip saddr 10.2.3.0/24 counter drop comment "rule:narrow"`,
				`forward meta secpath exists meta nfproto ipv4 ip saddr 10.4.0.0/16 counter drop comment "rule:narrow"`,
			},
			// A rule from the tunnel zone never matches the bare address.
			absent: []string{"172.16.0.0/12", `forward meta nfproto ipv4 ip saddr 10.2`, `input meta nfproto ipv4 ip saddr 10.2`},
		},
		{
			name: "IPv6 networks match ip6 and never pair with IPv4 ones",
			change: func(f *Firewall) {
				f.Rules = []Rule{{Name: "v6", Chain: ChainForward, Protocol: "tcp",
					Sources:      []netip.Prefix{pfx("2001:db8::/32"), pfx("10.0.0.0/8")},
					Destinations: []netip.Prefix{pfx("2001:db8:1::/48")}, Action: ActionReject, Log: true}}
			},
			want: []string{
				`forward meta nfproto ipv6 ip6 saddr 2001:db8::/32 ip6 daddr 2001:db8:1::/48 meta l4proto tcp limit rate 10/second burst 20 packets counter log prefix "fg v6 reject: " comment "rule:v6/log"`,
				`forward meta nfproto ipv6 ip6 saddr 2001:db8::/32 ip6 daddr 2001:db8:1::/48 meta l4proto tcp counter reject comment "rule:v6"`,
			},
			absent: []string{"10.0.0.0/8"},
		},
		{
			name: "port forward: DNAT to the box's own addresses, accept only what was DNATed",
			change: func(f *Firewall) {
				f.PortForwards = []PortForward{{Name: "cam", In: RoleWAN, Protocol: "udp", External: PortRange{5000, 5010},
					Destination: netip.MustParseAddr("192.168.1.20"), Sources: []netip.Prefix{pfx("203.0.113.0/24")}}}
			},
			want: []string{
				`forward iifname "eth0" meta nfproto ipv4 ip saddr 203.0.113.0/24 ip daddr 192.168.1.20/32 meta l4proto udp th dport 5000-5010 ct status dnat counter accept comment "forward:cam"`,
				`forward iifname "eth1" oifname "eth0" counter accept`,
				`prerouting iifname "eth0" meta nfproto ipv4 ip saddr 203.0.113.0/24 meta l4proto udp th dport 5000-5010 fib daddr type local counter dnat to 192.168.1.20 comment "forward:cam"`,
			},
		},
		{
			name: "NAT exemptions come before masquerade; the DHCP server opens port 67 on the LAN",
			change: func(f *Firewall) {
				f.Exemptions = []Exemption{{Name: "partner", Destinations: []netip.Prefix{pfx("100.64.0.0/10")}}}
				f.DHCPServers = []string{"eth1"}
			},
			want: []string{
				`input iifname "eth1" meta l4proto udp th dport 67 counter accept comment "builtin:lan-dhcp"`,
				`postrouting meta nfproto ipv4 ip daddr 100.64.0.0/10 counter accept comment "exempt:partner"`,
				`postrouting oifname "eth0" meta nfproto ipv4 counter masquerade comment "masquerade:lan-out-eth0"`,
			},
		},
		{
			name: "a DHCP server on an opt link opens port 67 there only: no web UI, no ping, no other opt link",
			change: func(f *Firewall) {
				f.Interfaces = append(f.Interfaces, Interface{"eth2", RoleOpt}, Interface{"eth3", RoleOpt})
				f.DHCPServers = []string{"eth1", "eth2"}
			},
			want: []string{
				`input iifname "eth1" meta l4proto udp th dport 67 counter accept comment "builtin:lan-dhcp"`,
				`input iifname "eth2" meta l4proto udp th dport 67 counter accept comment "builtin:opt-dhcp"`,
				`input counter drop comment "builtin:drop"`,
			},
			absent: []string{`iifname "eth3"`, `iifname "eth2" meta l4proto tcp`, `iifname "eth2" meta l4proto icmp`, `iifname "eth2" oifname`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fw := twoPortFirewall()
			c.change(&fw)
			if err := fw.Validate(); err != nil {
				t.Fatalf("the test's firewall is invalid: %v", err)
			}
			got := specStrings(Build(&fw))
			i := 0
			for _, line := range got {
				if i < len(c.want) && strings.HasPrefix(line, c.want[i]) {
					i++
				}
				for _, a := range c.absent {
					if strings.Contains(line, a) {
						t.Errorf("line %q contains %q, which must not appear", line, a)
					}
				}
			}
			if i < len(c.want) {
				t.Errorf("missing (or out of order) from the ruleset:\n\t%s\nruleset:\n\t%s", c.want[i], strings.Join(got, "\n\t"))
			}
			// Every Spec must translate into expressions.
			for _, s := range Build(&fw) {
				if _, err := Exprs(s); err != nil {
					t.Errorf("Exprs(%s): %v", s, err)
				}
			}
			if again := specStrings(Build(&fw)); !slices.Equal(got, again) {
				t.Errorf("Build is not deterministic")
			}
		})
	}
}
