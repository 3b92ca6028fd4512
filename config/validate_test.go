package config

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestDefaultsAndSampleValidate(t *testing.T) {
	// The defaults have no admin account and must still validate: the
	// first boot sets the password.
	mustValid(t, Default())
	mustValid(t, sampleConfig(50))
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(c *Config)
		path    string
		message string // substring
	}{
		{"bad remote subnet", func(c *Config) { c.Tunnels[0].RemoteSubnets[0], _ = ParsePrefix("10.0.0.0/33") },
			"tunnels[site00].remote_subnets[0]", "10.0.0.0/33 is not a network"},
		{"host bits in subnet", func(c *Config) { c.Tunnels[0].RemoteSubnets[0] = MustPrefix("10.1.2.3/16") },
			"tunnels[site00].remote_subnets[0]", "did you mean 10.1.0.0/16"},
		{"overlapping tunnel subnets", func(c *Config) { c.Tunnels[1].RemoteSubnets[0] = MustPrefix("10.1.128.0/17") },
			"tunnels[site01].remote_subnets[0]", "overlaps tunnels[site00].remote_subnets[0]"},
		{"remote overlaps own local", func(c *Config) { c.Tunnels[0].RemoteSubnets[0] = MustPrefix("10.0.5.0/24") },
			"tunnels[site00].remote_subnets[0]", "lies within this tunnel's own"},
		{"remote overlaps a LAN", func(c *Config) {
			c.Tunnels[0].LocalSubnets[0] = MustPrefix("10.200.0.0/16")
			c.Tunnels[0].RemoteSubnets[0] = MustPrefix("10.0.7.0/24")
		}, "tunnels[site00].remote_subnets[0]", "lies within the directly connected network interfaces[eth1].addresses[0]"},
		{"duplicate tunnel names", func(c *Config) { c.Tunnels[1].Name = "site00" },
			"tunnels[site00].name", `duplicate name "site00"`},
		{"invalid tunnel name", func(c *Config) { c.Tunnels[0].Name = "a b" },
			"tunnels[0].name", "not a valid name"},
		{"PSK too short", func(c *Config) { c.Tunnels[0].PSK = NewSecret("short") },
			"tunnels[site00].psk", "too short: 5 characters, at least 16"},
		{"PSK missing", func(c *Config) { c.Tunnels[0].PSK = Secret{} },
			"tunnels[site00].psk", "missing pre-shared key"},
		{"malformed IKE proposal", func(c *Config) { c.Tunnels[0].IKEProposals = []string{"aes128-sha256"} },
			"tunnels[site00].ike_proposals[0]", "no DH group"},
		{"3des refused", func(c *Config) { c.Tunnels[0].ESPProposals = []string{"3des-sha1"} },
			"tunnels[site00].esp_proposals[0]", "3des is weak"},
		{"modp1024 without legacy", func(c *Config) { c.Tunnels[0].IKEProposals = []string{"aes128-sha1-modp1024"} },
			"tunnels[site00].ike_proposals[0]", "modp1024 is weak (a 1024-bit group is within reach of a well-funded attacker: Logjam) and accepted only in a tunnel with legacy_algorithms true"},
		{"des even with legacy", func(c *Config) {
			c.Tunnels[0].LegacyAlgorithms = true
			c.Tunnels[0].ESPProposals = []string{"des-md5"}
		}, "tunnels[site00].esp_proposals[0]", "des is refused, also with legacy_algorithms: its 56-bit key falls to exhaustive search in hours; use aes128 or aes256"},
		{"blowfish even with legacy", func(c *Config) {
			c.Tunnels[0].LegacyAlgorithms = true
			c.Tunnels[0].ESPProposals = []string{"blowfish128-sha1"}
		}, "tunnels[site00].esp_proposals[0]", "blowfish128 is refused, also with legacy_algorithms"},
		{"ike_version 3", func(c *Config) { c.Tunnels[0].IKEVersion = 3 },
			"tunnels[site00].ike_version", "3 is not 1 or 2"},
		{"AEAD in IKEv1 main mode", func(c *Config) { c.Tunnels[0].IKEVersion = IKEv1 },
			"tunnels[site00].ike_proposals[0]", "IKEv1 main mode has no AEAD encryption"},
		{"no proposals", func(c *Config) { c.Tunnels[0].ESPProposals = nil },
			"tunnels[site00].esp_proposals", "at least one proposal"},
		{"remote address missing", func(c *Config) { c.Tunnels[0].RemoteAddress = Addr{} },
			"tunnels[site00].remote_address", "missing address"},
		{"bad remote address", func(c *Config) { c.Tunnels[0].RemoteAddress, _ = ParseAddr("192.0.2") },
			"tunnels[site00].remote_address", "192.0.2 is not an IP address"},
		{"bad lifetime", func(c *Config) { c.Tunnels[0].IKELifetime, _ = ParseDuration("soon") },
			"tunnels[site00].ike_lifetime", "soon is not a duration"},
		{"lifetime too short", func(c *Config) { c.Tunnels[0].ChildLifetime = Seconds(2) },
			"tunnels[site00].child_lifetime", "out of range"},
		{"dpd timeout below interval", func(c *Config) { c.Tunnels[0].DPDTimeout = Seconds(5) },
			"tunnels[site00].dpd_timeout", "shorter than the DPD interval"},
		{"start action", func(c *Config) { c.Tunnels[0].StartAction = "always" },
			"tunnels[site00].start_action", `"always" is not initiate, respond or on-traffic`},
		{"data plane", func(c *Config) { c.Tunnels[0].DataPlane = "dpdk" },
			"tunnels[site00].data_plane", "not auto, xfrm or userspace"},
		{"route via unknown interface", func(c *Config) { c.Routes[0].Interface = "eth7" },
			"routes[mgmt].interface", `unknown interface "eth7"`},
		{"route gateway family", func(c *Config) { c.Routes[0].Gateway = MustAddr("2001:db8::1") },
			"routes[mgmt].gateway", "not of the same address family"},
		{"route needs gateway or interface", func(c *Config) { c.Routes[0].Gateway, c.Routes[0].Interface = Addr{}, "" },
			"routes[mgmt]", "needs a gateway, an interface or both"},
		{"rule names unknown interface", func(c *Config) { c.Firewall.Rules[1].Out = "wlan0" },
			"firewall.rules[no-smb-out].out", `unknown interface or zone "wlan0"`},
		{"rule ports without tcp/udp", func(c *Config) { c.Firewall.Rules[0].Protocol = "icmp" },
			"firewall.rules[ssh-from-lan].protocol", "ports need tcp or udp"},
		{"input rule with out", func(c *Config) { c.Firewall.Rules[0].Out = "eth0" },
			"firewall.rules[ssh-from-lan].out", "only forward rules"},
		{"bad action", func(c *Config) { c.Firewall.Rules[0].Action = "allow" },
			"firewall.rules[ssh-from-lan].action", `"allow" is not accept, drop or reject`},
		{"port forward unknown interface", func(c *Config) { c.Firewall.PortForwards[0].In = "eth9" },
			"firewall.port_forwards[web].in", `unknown interface or zone "eth9"`},
		{"port forward from the tunnel zone", func(c *Config) { c.Firewall.PortForwards[0].In = "tunnel" },
			"firewall.port_forwards[web].in", `port forwards take a zone (wan, lan, opt, any) or an interface, not "tunnel"`},
		{"disabled port forward from the tunnel zone", func(c *Config) {
			c.Firewall.PortForwards[0].In = "tunnel"
			c.Firewall.PortForwards[0].Enabled = false
		}, "firewall.port_forwards[web].in", `not "tunnel"`},
		{"conflicting port forwards", func(c *Config) {
			c.Firewall.PortForwards = append(c.Firewall.PortForwards, PortForward{Name: "web2", Enabled: true, In: "eth0",
				Protocol: "tcp", ExternalPorts: PortRange{Lo: 400, Hi: 500}, Destination: MustAddr("10.0.0.11")})
		}, "firewall.port_forwards[web2].external_ports", "conflicts with firewall.port_forwards[web]"},
		{"forwarding IKE", func(c *Config) {
			c.Firewall.PortForwards[0].Protocol = "udp"
			c.Firewall.PortForwards[0].ExternalPorts = PortRange{Lo: 400, Hi: 600}
		}, "firewall.port_forwards[web].external_ports", "udp 500 and 4500 on the WAN are IKE's"},
		{"port range runs past 65535", func(c *Config) {
			c.Firewall.PortForwards[0].ExternalPorts = PortRange{Lo: 1000, Hi: 1100}
			c.Firewall.PortForwards[0].DestinationPort = 65500
		}, "firewall.port_forwards[web].destination_port", "runs past 65535"},
		{"masquerade unknown interface", func(c *Config) { c.Firewall.NAT.Masquerade[0].Interface = "ppp0" },
			"firewall.nat.masquerade[lan-out-eth0].interface", `unknown interface "ppp0"`},
		{"interface overlap", func(c *Config) {
			c.Interfaces[0].Addressing = AddressingStatic
			c.Interfaces[0].Addresses = []Prefix{MustPrefix("10.0.200.1/24")}
		},
			"interfaces[eth1].addresses[0]", "overlaps interfaces[eth0].addresses[0]"},
		{"dhcp with addresses", func(c *Config) { c.Interfaces[0].Addresses = []Prefix{MustPrefix("198.51.100.2/24")} },
			"interfaces[eth0].addresses", "addressing is dhcp"},
		{"mtu", func(c *Config) { c.Interfaces[1].MTU = 100 },
			"interfaces[eth1].mtu", "100 is out of range"},
		{"interface named like a zone", func(c *Config) { c.Interfaces[1].Name = "lan" },
			"interfaces[lan].name", "is a zone name"},
		{"hostname", func(c *Config) { c.System.Hostname = "-bad-" },
			"system.hostname", "not a valid host name"},
		{"timezone", func(c *Config) { c.System.Timezone = "../etc/passwd" },
			"system.timezone", "not a time zone name"},
		{"baud", func(c *Config) { c.System.ConsoleBaud = 12345 },
			"system.console_baud", "12345 is not a console speed"},
		{"admin without password", func(c *Config) { c.System.Admins[0].PasswordHash = Secret{} },
			"system.admins[admin].password_hash", "account has no password"},
		{"admin hash garbage", func(c *Config) { c.System.Admins[0].PasswordHash = NewSecret("plaintext") },
			"system.admins[admin].password_hash", "not a password hash"},
		{"ntp server", func(c *Config) { c.System.NTPServers = []string{"bad name"} },
			"system.ntp_servers[0]", "not a host name or IP address"},
		{"syslog protocol", func(c *Config) { c.System.RemoteSyslog = RemoteSyslog{Host: "192.0.2.50", Protocol: "tls"} },
			"system.remote_syslog.protocol", `"tls" is not udp or tcp`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sampleConfig(3)
			tt.edit(c)
			err := c.Validate()
			var ve ValidationErrors
			if !errors.As(err, &ve) {
				t.Fatalf("Validate() = %v, want ValidationErrors with %s: ...%s...", err, tt.path, tt.message)
			}
			for _, e := range ve {
				if e.Path == tt.path && strings.Contains(e.Message, tt.message) {
					return
				}
			}
			t.Errorf("want an error at %s containing %q; got:\n%v", tt.path, tt.message, err)
		})
	}
}

// A tunnel with legacy_algorithms takes what the field's IKEv1 peers
// negotiate, and the same proposals are refused in a tunnel without it.
func TestLegacyAlgorithmsByChoice(t *testing.T) {
	c := sampleConfig(2)
	tun := &c.Tunnels[0]
	tun.IKEVersion = IKEv1
	tun.LegacyAlgorithms = true
	tun.IKEProposals = []string{"3des-md5-modp1024", "aes128-sha1-modp1536", "aes256-sha256-prfmd5-modp2048"}
	tun.ESPProposals = []string{"3des-sha1", "aes128-md5-modp1024", "aes128gcm16"}
	mustValid(t, c)
	tun.LegacyAlgorithms = false
	var ve ValidationErrors
	if !errors.As(c.Validate(), &ve) {
		t.Fatal("legacy proposals accepted without legacy_algorithms")
	}
	var paths []string
	for _, e := range ve {
		paths = append(paths, e.Path)
	}
	want := []string{"tunnels[site00].ike_proposals[0]", "tunnels[site00].ike_proposals[1]", "tunnels[site00].ike_proposals[2]",
		"tunnels[site00].esp_proposals[0]", "tunnels[site00].esp_proposals[1]"}
	if !slices.Equal(paths, want) {
		t.Errorf("errors at %v, want %v:\n%v", paths, want, ve)
	}
}

func TestValidateReportsAllErrors(t *testing.T) {
	c := sampleConfig(2)
	c.System.Hostname = ""
	c.Tunnels[0].PSK = NewSecret("x")
	c.Tunnels[1].RemoteSubnets[0], _ = ParsePrefix("10.0.0.0/33")
	var ve ValidationErrors
	if !errors.As(c.Validate(), &ve) || len(ve) != 3 {
		t.Fatalf("want exactly 3 errors (hostname, psk, subnet), got %d:\n%v", len(ve), ve)
	}
	want := "tunnels[site01].remote_subnets[0]: 10.0.0.0/33 is not a network"
	if ve[2].Error() != want {
		t.Errorf("third error = %q, want %q", ve[2].Error(), want)
	}
}

func TestFullTunnelIsValid(t *testing.T) {
	// Everything but the LAN through the tunnel: the remote network is
	// broader than the local and connected ones, which is fine.
	c := sampleConfig(1)
	c.Tunnels[0].RemoteSubnets = []Prefix{MustPrefix("0.0.0.0/0")}
	mustValid(t, c)
}

func TestDisabledTunnelMayOverlap(t *testing.T) {
	c := sampleConfig(2)
	c.Tunnels[1].RemoteSubnets[0] = MustPrefix("10.1.0.0/16")
	c.Tunnels[1].Enabled = false
	mustValid(t, c)
}

// TestValidateRemoteSyslog: both transports the supervisor forwards over
// are accepted, anything else is refused at its path.
func TestValidateRemoteSyslog(t *testing.T) {
	for _, tc := range []struct {
		rs   RemoteSyslog
		path string // "" means valid
	}{
		{RemoteSyslog{}, ""},
		{RemoteSyslog{Host: "192.0.2.50"}, ""},
		{RemoteSyslog{Host: "logs.example.net", Port: 514, Protocol: "udp"}, ""},
		{RemoteSyslog{Host: "192.0.2.50", Port: 6514, Protocol: "tcp"}, ""},
		{RemoteSyslog{Host: "192.0.2.50", Protocol: "tls"}, "system.remote_syslog.protocol"},
		{RemoteSyslog{Host: "192.0.2.50", Protocol: "TCP"}, "system.remote_syslog.protocol"},
		{RemoteSyslog{Host: "192.0.2.50", Port: 65536, Protocol: "tcp"}, "system.remote_syslog.port"},
		{RemoteSyslog{Host: "bad host", Protocol: "tcp"}, "system.remote_syslog.host"},
	} {
		c := sampleConfig(1)
		c.System.RemoteSyslog = tc.rs
		err := c.Validate()
		var ve ValidationErrors
		switch {
		case tc.path == "" && err != nil:
			t.Errorf("remote syslog %+v refused: %v", tc.rs, err)
		case tc.path != "" && !errors.As(err, &ve):
			t.Errorf("remote syslog %+v: Validate() = %v, want an error at %s", tc.rs, err, tc.path)
		case tc.path != "" && !slices.ContainsFunc(ve, func(e FieldError) bool { return e.Path == tc.path }):
			t.Errorf("remote syslog %+v: errors %v, want one at %s", tc.rs, err, tc.path)
		}
	}
}

// TestValidatePortForwardIn: a port forward comes in on a zone made of
// interfaces, or on one interface; the tunnel zone is refused at its path,
// as netd would refuse it (after the commit, keeping the old rules).
func TestValidatePortForwardIn(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" means valid
	}{
		{"wan", ""},
		{"lan", ""},
		{"opt", ""},
		{"any", ""},
		{"eth0", ""},
		{"tunnel", `port forwards take a zone (wan, lan, opt, any) or an interface, not "tunnel"`},
		{"eth9", `unknown interface or zone "eth9"`},
		{"", "missing interface or zone"},
	} {
		c := sampleConfig(1)
		c.Firewall.PortForwards[0].In = tc.in
		err := c.Validate()
		var ve ValidationErrors
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("port forward in %q refused: %v", tc.in, err)
		case tc.want != "" && !errors.As(err, &ve):
			t.Errorf("port forward in %q: Validate() = %v, want firewall.port_forwards[web].in: %s", tc.in, err, tc.want)
		case tc.want != "" && !slices.Contains(ve, FieldError{Path: "firewall.port_forwards[web].in", Message: tc.want}):
			t.Errorf("port forward in %q: errors\n%v\nwant firewall.port_forwards[web].in: %s", tc.in, err, tc.want)
		}
	}
}

// TestRemoteOverlapsMatchesPairwise checks the sorted walk against the
// comparison of every pair it replaced, on random networks that nest,
// repeat and mix families, with disabled and route tunnels among them.
func TestRemoteOverlapsMatchesPairwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 22))
	for round := range 200 {
		var tunnels []Tunnel
		for i := range 1 + rng.IntN(40) {
			tn := NewTunnel(fmt.Sprintf("t%d", i))
			tn.Enabled = rng.IntN(8) != 0
			if rng.IntN(10) == 0 {
				tn.Mode = ModeRoute
			}
			for range rng.IntN(4) {
				var p netip.Prefix
				if rng.IntN(5) == 0 {
					a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(rng.IntN(4))})
					p = netip.PrefixFrom(a, 32+rng.IntN(9)).Masked()
				} else {
					a := netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(4) * 64), 0})
					p = netip.PrefixFrom(a, 6+rng.IntN(21)).Masked()
				}
				pf := Prefix{Prefix: p}
				if rng.IntN(15) == 0 {
					pf = MustPrefix("10.0.0.1/8") // host bits: not checked against others
				}
				tn.RemoteSubnets = append(tn.RemoteSubnets, pf)
			}
			tunnels = append(tunnels, tn)
		}
		var nets []netip.Prefix
		for _, tn := range tunnels {
			if !tn.Enabled || tn.IsRoute() {
				continue
			}
			for _, p := range tn.RemoteSubnets {
				if p.Masked() == p.Prefix {
					nets = append(nets, p.Prefix)
				}
			}
		}
		got := remoteOverlaps(tunnels)
		if len(got) != len(nets) {
			t.Fatalf("round %d: %d entries for %d networks", round, len(got), len(nets))
		}
		for k, p := range nets {
			var want []int
			for j := range k {
				if nets[j].Overlaps(p) {
					want = append(want, j)
				}
			}
			if !slices.Equal(got[k], want) {
				t.Fatalf("round %d: network %d (%s) overlaps %v, the walk says %v (all: %v)", round, k, p, want, got[k], nets)
			}
		}
	}
}
