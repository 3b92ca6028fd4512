package config

import (
	"errors"
	"strings"
	"testing"
)

// awsPair makes tunnels 0 and 1 of c the two route tunnels of an AWS-style
// connection: any-to-any selectors, ipsec0 and ipsec1, a /30 each, and a
// route to the VPC through each (the second with a higher metric).
func awsPair(c *Config) {
	for i, ifc := range []string{"ipsec0", "ipsec1"} {
		t := &c.Tunnels[i]
		t.Mode, t.Interface = ModeRoute, ifc
		t.LocalSubnets, t.RemoteSubnets = nil, nil
		t.InnerAddresses = []Prefix{MustPrefix([]string{"169.254.10.2/30", "169.254.11.2/30"}[i])}
	}
	c.Routes = append(c.Routes,
		Route{Name: "vpc-1", Enabled: true, Destination: MustPrefix("172.31.0.0/16"), Interface: "ipsec0", Metric: 100},
		Route{Name: "vpc-2", Enabled: true, Destination: MustPrefix("172.31.0.0/16"), Interface: "ipsec1", Metric: 200})
}

func TestRouteTunnelPairIsValid(t *testing.T) {
	c := sampleConfig(3)
	awsPair(c)
	mustValid(t, c)
	if got := c.Tunnels[1].IfID(); got != 2 {
		t.Errorf("ipsec1's if_id = %d, want 2", got)
	}
	if got := c.Tunnels[2].IfID(); got != 0 {
		t.Errorf("a policy tunnel's if_id = %d, want 0", got)
	}
	if c.RouteTunnelByInterface("ipsec1") != &c.Tunnels[1] || c.RouteTunnelByInterface("ipsec2") != nil {
		t.Error("RouteTunnelByInterface finds the wrong tunnel")
	}
	// Rules may name the interface, like any other.
	c.Firewall.Rules[1].Out = "ipsec0"
	mustValid(t, c)
}

func TestValidateRouteTunnel(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(c *Config)
		path    string
		message string
	}{
		{"bad mode", func(c *Config) { c.Tunnels[0].Mode = "vti" }, "tunnels[site00].mode", `"vti" is not policy or route`},
		{"no interface", func(c *Config) { c.Tunnels[0].Interface = "" }, "tunnels[site00].interface", "needs an interface"},
		{"bad interface", func(c *Config) { c.Tunnels[0].Interface = "vti0" }, "tunnels[site00].interface", `"vti0" is not ipsecN`},
		{"leading zero", func(c *Config) { c.Tunnels[0].Interface = "ipsec01" }, "tunnels[site00].interface", "no leading zeros"},
		{"too large", func(c *Config) { c.Tunnels[0].Interface = "ipsec10000" }, "tunnels[site00].interface", "is not ipsecN"},
		{"shared interface", func(c *Config) { c.Tunnels[1].Interface = "ipsec0" }, "tunnels[site01].interface", "already the interface of tunnels[site00]"},
		{"interface clash", func(c *Config) { c.Interfaces[1].Name = "ipsec0" }, "tunnels[site00].interface", "also a network interface"},
		{"mtu", func(c *Config) { c.Tunnels[0].MTU = 100 }, "tunnels[site00].mtu", "out of range"},
		{"on-traffic", func(c *Config) { c.Tunnels[0].StartAction = StartOnTraffic }, "tunnels[site00].start_action", "initiate or respond"},
		{"inner /24", func(c *Config) { c.Tunnels[0].InnerAddresses = []Prefix{MustPrefix("169.254.10.2/24")} },
			"tunnels[site00].inner_addresses[0]", "a /30 or a /31"},
		{"inner network address", func(c *Config) { c.Tunnels[0].InnerAddresses = []Prefix{MustPrefix("169.254.10.0/30")} },
			"tunnels[site00].inner_addresses[0]", "network or broadcast"},
		{"inner broadcast", func(c *Config) { c.Tunnels[0].InnerAddresses = []Prefix{MustPrefix("169.254.10.3/30")} },
			"tunnels[site00].inner_addresses[0]", "network or broadcast"},
		{"inner v6", func(c *Config) { c.Tunnels[0].InnerAddresses = []Prefix{MustPrefix("fd00::1/48")} },
			"tunnels[site00].inner_addresses[0]", "/64 to a /127"},
		{"policy tunnel with interface", func(c *Config) { c.Tunnels[2].Interface = "ipsec5" },
			"tunnels[site02].interface", "only a route tunnel"},
		{"route via unknown tunnel interface", func(c *Config) { c.Routes[2].Interface = "ipsec7" },
			"routes[vpc-2].interface", `unknown interface "ipsec7"`},
		{"policy tunnel still needs subnets", func(c *Config) { c.Tunnels[2].LocalSubnets = nil },
			"tunnels[site02].local_subnets", "at least one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sampleConfig(3)
			awsPair(c)
			tt.edit(c)
			var ve ValidationErrors
			if !errors.As(c.Validate(), &ve) {
				t.Fatalf("Validate() = nil, want %s: ...%s...", tt.path, tt.message)
			}
			for _, e := range ve {
				if e.Path == tt.path && strings.Contains(e.Message, tt.message) {
					return
				}
			}
			t.Errorf("want an error at %s containing %q; got:\n%v", tt.path, tt.message, ve)
		})
	}
}

func TestRouteMTU(t *testing.T) {
	for _, c := range []struct {
		proposals []string
		remote    string
		mtu       int
		want      int
	}{
		{[]string{"aes128gcm16-ecp256"}, "198.51.100.1", 0, 1438},
		{[]string{"aes256-sha256"}, "198.51.100.1", 0, 1422},
		// The worst of all proposals: SHA-512's 32-byte ICV with CBC.
		{[]string{"aes128gcm16", "aes256-sha512-modp2048"}, "198.51.100.1", 0, 1406},
		{[]string{"aes128gcm16"}, "2001:db8::1", 0, 1418},
		{[]string{"chacha20poly1305"}, "198.51.100.1", 0, 1438},
		{[]string{"aes128gcm64"}, "198.51.100.1", 0, 1446},
		{[]string{"aes128gcm16"}, "198.51.100.1", 1399, 1399},
	} {
		tn := NewTunnel("t")
		tn.ESPProposals, tn.RemoteAddress, tn.MTU = c.proposals, MustAddr(c.remote), c.mtu
		if got := tn.RouteMTU(); got != c.want {
			t.Errorf("%v to %s (mtu %d): RouteMTU %d, want %d", c.proposals, c.remote, c.mtu, got, c.want)
		}
	}
}
