package netd

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/config"
)

func TestFromConfigDefaults(t *testing.T) {
	b, err := boards.Lookup("qemu")
	if err != nil {
		t.Fatal(err)
	}
	d := FromConfig(config.BoardDefaults(b))
	if err := d.Validate(); err != nil {
		t.Fatalf("the qemu board's default configuration is refused: %v", err)
	}
	var links []string
	for _, l := range d.Links {
		links = append(links, strings.Join([]string{l.Name, l.Role, map[bool]string{true: "up", false: "down"}[l.Up], map[bool]string{true: "dhcp", false: "static"}[l.DHCP]}, " "))
	}
	if want := []string{"eth0 wan up dhcp", "eth1 lan up static"}; !slices.Equal(links, want) {
		t.Errorf("links %q, want %q (the board's NIC order and roles)", links, want)
	}
	if len(d.Addresses) != 1 || d.Addresses[0] != (Address{Link: "eth1", Prefix: netip.MustParsePrefix("192.168.1.1/24"), Path: "interfaces[eth1].addresses[0]"}) {
		t.Errorf("addresses %+v, want 192.168.1.1/24 on eth1", d.Addresses)
	}
	if !d.Forwarding || !slices.Equal(d.Firewall.DHCPServers, []string{"eth1"}) || len(d.Firewall.Masquerade) != 1 || d.Firewall.Masquerade[0].Interface != "eth0" {
		t.Errorf("forwarding %v, DHCP server %v, masquerade %+v", d.Forwarding, d.Firewall.DHCPServers, d.Firewall.Masquerade)
	}
}

func TestFromConfigLeavesDisabledOut(t *testing.T) {
	c := labConfig()
	c.Routes = []config.Route{
		{Name: "on", Enabled: true, Destination: config.MustPrefix("10.50.0.0/16"), Gateway: config.MustAddr("192.168.50.254"), Metric: 5},
		{Name: "off", Enabled: false, Destination: config.MustPrefix("10.51.0.0/16"), Interface: "lan0"},
	}
	c.Firewall.Rules = []config.Rule{
		{Name: "on", Enabled: true, Chain: config.ChainForward, In: "lan", Protocol: "udp", DestinationPorts: []config.PortRange{config.Port(53)}, Action: config.ActionDrop},
		{Name: "off", Enabled: false, Chain: config.ChainInput, Protocol: "any", Action: config.ActionAccept},
	}
	off := config.NewTunnel("off")
	off.Enabled = false
	off.RemoteSubnets = []config.Prefix{config.MustPrefix("10.60.0.0/16")}
	c.Tunnels = append(c.Tunnels, off)
	c.Firewall.PortForwards[0].Enabled = false
	d := FromConfig(c)
	if len(d.Routes) != 1 || d.Routes[0] != (Route{Destination: netip.MustParsePrefix("10.50.0.0/16"), Gateway: netip.MustParseAddr("192.168.50.254"), Metric: 5, Path: "routes[on]"}) {
		t.Errorf("routes %+v, want only routes[on]", d.Routes)
	}
	if len(d.Firewall.Rules) != 1 || d.Firewall.Rules[0].Path != "firewall.rules[on]" || d.Firewall.Rules[0].DestinationPorts[0] != (PortRange{53, 53}) {
		t.Errorf("rules %+v, want only firewall.rules[on]", d.Firewall.Rules)
	}
	if len(d.Firewall.Tunnels) != 1 || d.Firewall.Tunnels[0].Peer != wanPeer {
		t.Errorf("tunnels %+v, want only branch", d.Firewall.Tunnels)
	}
	if len(d.Firewall.PortForwards) != 0 {
		t.Errorf("a disabled port forward was kept: %+v", d.Firewall.PortForwards)
	}
}

// FuzzConfigToRuleset checks the promise between validation and the
// firewall: whatever configuration netd's validation accepts, the builder
// turns into rules that all translate into nftables expressions.
func FuzzConfigToRuleset(f *testing.F) {
	for _, c := range []*config.Config{config.Default(), labConfig()} {
		b, err := json.Marshal(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"interfaces":[{"name":"eth0","role":"wan","enabled":true,"addressing":"static","addresses":["2001:db8::1/64"]}],` +
		`"firewall":{"rules":[{"name":"r","enabled":true,"chain":"forward","in":"tunnel","out":"eth0","sources":["::/0","10.0.0.0/8"],` +
		`"protocol":"icmpv6","action":"reject","log":true}],"port_forwards":[{"name":"p","enabled":true,"in":"eth0","protocol":"udp",` +
		`"external_ports":"1-65535","destination":"2001:db8::5"}]},"tunnels":[{"name":"t","enabled":true,"remote_subnets":["2001:db8:9::/48"]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c config.Config
		if json.Unmarshal(b, &c) != nil {
			return
		}
		d := FromConfig(&c)
		if d.Validate() != nil {
			return
		}
		for _, s := range Build(&d.Firewall) {
			if _, err := Exprs(s); err != nil {
				t.Fatalf("valid configuration, untranslatable rule %s: %v", s, err)
			}
		}
	})
}
