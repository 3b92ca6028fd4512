package config

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// dhcpLAN is Default() with its LAN (eth1, 192.168.1.1/24) given the
// DHCP server block s.
func dhcpLAN(s DHCPServer) *Config {
	c := Default()
	c.Interfaces[1].DHCPServer = s
	return c
}

// dhcpOpt is Default() with an opt interface eth2 (10.20.0.1/24, a guest
// network) whose DHCP server block is s.
func dhcpOpt(s DHCPServer) *Config {
	c := Default()
	c.Interfaces = append(c.Interfaces, Interface{Name: "eth2", Role: RoleOpt, Enabled: true,
		Addressing: AddressingStatic, Addresses: []Prefix{MustPrefix("10.20.0.1/24")}, DHCPServer: s})
	return c
}

func lease(mac, addr, host string) StaticLease {
	a, _ := ParseAddr(addr)
	return StaticLease{MAC: mac, Address: a, Hostname: host}
}

func addr(s string) Addr {
	a, _ := ParseAddr(s)
	return a
}

func dur(s string) Duration {
	d, _ := ParseDuration(s)
	return d
}

func TestValidateDHCPServer(t *testing.T) {
	const p = "interfaces[eth1].dhcp_server"
	full := DHCPServer{Enabled: Bool(true), RangeStart: addr("192.168.1.100"), RangeEnd: addr("192.168.1.199"),
		LeaseTime: dur("1h"), StaticLeases: []StaticLease{lease("02:00:5e:10:00:01", "192.168.1.20", "printer"),
			lease("02:00:5E:10:00:02", "192.168.1.150", "")}}
	tests := []struct {
		name    string
		cfg     *Config
		path    string // "" when the configuration is valid
		message string // substring of the message at path
	}{
		{"no block", Default(), "", ""},
		{"a full block", dhcpLAN(full), "", ""},
		{"only a lease time", dhcpLAN(DHCPServer{LeaseTime: dur("30m")}), "", ""},
		{"turned off", dhcpLAN(DHCPServer{Enabled: Bool(false)}), "", ""},
		{"range of one address", dhcpLAN(DHCPServer{RangeStart: addr("192.168.1.9"), RangeEnd: addr("192.168.1.9")}), "", ""},
		{"lease time at the bounds", dhcpLAN(DHCPServer{LeaseTime: dur("2m")}), "", ""},
		{"lease time at the upper bound", dhcpLAN(DHCPServer{LeaseTime: dur("168h")}), "", ""},
		{"lease time too short", dhcpLAN(DHCPServer{LeaseTime: dur("90s")}), p + ".lease_time", "1m30s is out of range (2m to 168h"},
		{"lease time too long", dhcpLAN(DHCPServer{LeaseTime: dur("169h")}), p + ".lease_time", "out of range"},
		{"lease time malformed", dhcpLAN(DHCPServer{LeaseTime: dur("a day")}), p + ".lease_time", "a day is not a duration"},
		{"start without end", dhcpLAN(DHCPServer{RangeStart: addr("192.168.1.100")}), p + ".range_end", "give both ends"},
		{"end without start", dhcpLAN(DHCPServer{RangeEnd: addr("192.168.1.100")}), p + ".range_start", "give both ends"},
		{"start after end", dhcpLAN(DHCPServer{RangeStart: addr("192.168.1.200"), RangeEnd: addr("192.168.1.100")}),
			p + ".range_end", "192.168.1.100 comes before range_start 192.168.1.200"},
		{"range outside the subnet", dhcpLAN(DHCPServer{RangeStart: addr("192.168.1.100"), RangeEnd: addr("192.168.2.10")}),
			p + ".range_end", "192.168.2.10 is outside eth1's network 192.168.1.0/24"},
		{"range starts at the network address", dhcpLAN(DHCPServer{RangeStart: addr("192.168.1.0"), RangeEnd: addr("192.168.1.10")}),
			p + ".range_start", "network address"},
		{"range ends at the broadcast address", dhcpLAN(DHCPServer{RangeStart: addr("192.168.1.100"), RangeEnd: addr("192.168.1.255")}),
			p + ".range_end", "broadcast address"},
		{"range holds the box's address", dhcpLAN(DHCPServer{RangeStart: addr("192.168.1.1"), RangeEnd: addr("192.168.1.50")}),
			p + ".range_start", "contains the box's own address 192.168.1.1"},
		{"range malformed", dhcpLAN(DHCPServer{RangeStart: addr("192.168.1"), RangeEnd: addr("192.168.1.50")}),
			p + ".range_start", "192.168.1 is not an IP address"},
		{"range IPv6", dhcpLAN(DHCPServer{RangeStart: addr("fd00::10"), RangeEnd: addr("fd00::20")}),
			p + ".range_start", "not an IPv4 address"},
		{"static lease outside the subnet", dhcpLAN(DHCPServer{StaticLeases: []StaticLease{lease("02:00:00:00:00:01", "10.0.0.5", "")}}),
			p + ".static_leases[0].address", "10.0.0.5 is outside eth1's network"},
		{"static lease on the box's address", dhcpLAN(DHCPServer{StaticLeases: []StaticLease{lease("02:00:00:00:00:01", "192.168.1.1", "")}}),
			p + ".static_leases[0].address", "the box's own address"},
		{"static lease on the broadcast address", dhcpLAN(DHCPServer{StaticLeases: []StaticLease{lease("02:00:00:00:00:01", "192.168.1.255", "")}}),
			p + ".static_leases[0].address", "broadcast address"},
		{"static lease bad MAC", dhcpLAN(DHCPServer{StaticLeases: []StaticLease{lease("02:00:00:00:01", "192.168.1.5", "")}}),
			p + ".static_leases[0].mac", `"02:00:00:00:01" is not an Ethernet MAC address`},
		{"static lease without address", dhcpLAN(DHCPServer{StaticLeases: []StaticLease{lease("02:00:00:00:00:01", "", "")}}),
			p + ".static_leases[0].address", "missing address"},
		{"static lease bad host name", dhcpLAN(DHCPServer{StaticLeases: []StaticLease{lease("02:00:00:00:00:01", "192.168.1.5", "my printer")}}),
			p + ".static_leases[0].hostname", "not a host name"},
		{"duplicate MAC, other spelling", dhcpLAN(DHCPServer{StaticLeases: []StaticLease{
			lease("02:00:00:00:00:0a", "192.168.1.5", ""), lease("02-00-00-00-00-0A", "192.168.1.6", "")}}),
			p + ".static_leases[1].mac", "already has a static lease (" + p + ".static_leases[0])"},
		{"duplicate address", dhcpLAN(DHCPServer{StaticLeases: []StaticLease{
			lease("02:00:00:00:00:0a", "192.168.1.5", ""), lease("02:00:00:00:00:0b", "192.168.1.5", "")}}),
			p + ".static_leases[1].address", "192.168.1.5 is already given to " + p + ".static_leases[0]"},
		{"range too large", func() *Config {
			c := dhcpLAN(DHCPServer{RangeStart: addr("10.0.0.10"), RangeEnd: addr("10.2.0.0")})
			c.Interfaces[1].Addresses = []Prefix{MustPrefix("10.0.0.1/8")}
			return c
		}(), p + ".range_end", "at most 65534"},
		{"server on a WAN", func() *Config {
			c := Default()
			c.Interfaces[0].DHCPServer = DHCPServer{Enabled: Bool(true)}
			return c
		}(), "interfaces[eth0].dhcp_server.enabled", "runs only on a lan or opt interface, and eth0 is wan"},
		{"settings on a WAN imply a server", func() *Config {
			c := Default()
			c.Interfaces[0].DHCPServer = DHCPServer{LeaseTime: dur("1h")}
			return c
		}(), "interfaces[eth0].dhcp_server.enabled", "runs only on a lan or opt interface"},
		{"a WAN's block turned off is kept", func() *Config {
			c := Default()
			c.Interfaces[0].DHCPServer = DHCPServer{Enabled: Bool(false), LeaseTime: dur("1h")}
			return c
		}(), "", ""},
		{"server on an opt interface", dhcpOpt(DHCPServer{Enabled: Bool(true), RangeStart: addr("10.20.0.100"), RangeEnd: addr("10.20.0.150"),
			StaticLeases: []StaticLease{lease("02:00:5e:10:00:09", "10.20.0.9", "kiosk")}}), "", ""},
		{"automatic pool on an opt interface", dhcpOpt(DHCPServer{Enabled: Bool(true)}), "", ""},
		{"opt settings without enabled are kept, not served", dhcpOpt(DHCPServer{LeaseTime: dur("1h"),
			RangeStart: addr("10.20.0.100"), RangeEnd: addr("10.20.0.150")}), "", ""},
		{"opt turned off", dhcpOpt(DHCPServer{Enabled: Bool(false)}), "", ""},
		{"opt range outside its network", dhcpOpt(DHCPServer{Enabled: Bool(true), RangeStart: addr("192.168.1.100"), RangeEnd: addr("192.168.1.150")}),
			"interfaces[eth2].dhcp_server.range_start", "192.168.1.100 is outside eth2's network 10.20.0.0/24"},
		{"opt static lease on the box's address", dhcpOpt(DHCPServer{Enabled: Bool(true), StaticLeases: []StaticLease{lease("02:00:00:00:00:01", "10.20.0.1", "")}}),
			"interfaces[eth2].dhcp_server.static_leases[0].address", "the box's own address"},
		{"server on a DHCP-addressed opt interface", func() *Config {
			c := dhcpOpt(DHCPServer{Enabled: Bool(true)})
			c.Interfaces[2].Addressing, c.Interfaces[2].Addresses = AddressingDHCP, nil
			return c
		}(), "interfaces[eth2].dhcp_server.enabled", "needs a static address on the interface, and eth2 gets its address by dhcp"},
		{"server on an opt interface without an address", func() *Config {
			c := dhcpOpt(DHCPServer{Enabled: Bool(true)})
			c.Interfaces[2].Addresses = nil
			return c
		}(), "interfaces[eth2].dhcp_server.enabled", "needs an IPv4 address"},
		{"server on a DHCP-addressed LAN", func() *Config {
			c := dhcpLAN(DHCPServer{Enabled: Bool(true)})
			c.Interfaces[1].Addressing, c.Interfaces[1].Addresses = AddressingDHCP, nil
			return c
		}(), p + ".enabled", "needs a static address on the interface, and eth1 gets its address by dhcp"},
		{"server on a LAN without IPv4", func() *Config {
			c := dhcpLAN(DHCPServer{Enabled: Bool(true)})
			c.Interfaces[1].Addresses = []Prefix{MustPrefix("fd00::1/64")}
			return c
		}(), p + ".enabled", "needs an IPv4 address"},
		{"automatic pool on a /30", func() *Config {
			c := dhcpLAN(DHCPServer{Enabled: Bool(true)})
			c.Interfaces[1].Addresses = []Prefix{MustPrefix("192.168.1.1/30")}
			return c
		}(), p + ".range_start", "too small for the automatic pool"},
		{"a /30 with an explicit range", func() *Config {
			c := dhcpLAN(DHCPServer{RangeStart: addr("192.168.1.2"), RangeEnd: addr("192.168.1.2")})
			c.Interfaces[1].Addresses = []Prefix{MustPrefix("192.168.1.1/30")}
			return c
		}(), "", ""},
		{"a /30 without a block stays valid (no server, as before)", func() *Config {
			c := Default()
			c.Interfaces[1].Addresses = []Prefix{MustPrefix("192.168.1.1/30")}
			return c
		}(), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.path == "" {
				if err != nil {
					t.Fatalf("want a valid configuration, got:\n%v", err)
				}
				return
			}
			var ve ValidationErrors
			if !errors.As(err, &ve) {
				t.Fatalf("want an error at %s containing %q, got %v", tt.path, tt.message, err)
			}
			for _, fe := range ve {
				if fe.Path == tt.path && strings.Contains(fe.Message, tt.message) {
					return
				}
			}
			t.Fatalf("want an error at %s containing %q, got:\n%v", tt.path, tt.message, err)
		})
	}
}

// TestServesDHCP: only a LAN serves by default; an opt interface serves
// when its server is turned on; a WAN never does.
func TestServesDHCP(t *testing.T) {
	up := func(role string, s DHCPServer) Interface {
		return Interface{Role: role, Enabled: true, Addressing: AddressingStatic, DHCPServer: s}
	}
	on := DHCPServer{Enabled: Bool(true)}
	disabled, byDHCP := up(RoleOpt, on), up(RoleOpt, on)
	disabled.Enabled, byDHCP.Addressing = false, AddressingDHCP
	for _, tt := range []struct {
		name   string
		ifc    Interface
		serves bool
	}{
		{"lan, no block", up(RoleLAN, DHCPServer{}), true},
		{"lan, turned off", up(RoleLAN, DHCPServer{Enabled: Bool(false)}), false},
		{"opt, no block", up(RoleOpt, DHCPServer{}), false},
		{"opt, settings without enabled", up(RoleOpt, DHCPServer{LeaseTime: dur("1h")}), false},
		{"opt, turned on", up(RoleOpt, on), true},
		{"opt, turned on, interface disabled", disabled, false},
		{"opt, turned on, addressed by dhcp", byDHCP, false},
		{"wan, turned on", up(RoleWAN, on), false},
	} {
		if got := tt.ifc.ServesDHCP(); got != tt.serves {
			t.Errorf("%s: ServesDHCP() = %v, want %v", tt.name, got, tt.serves)
		}
	}
}

// TestDHCPServerKeepsOldMeaning: a stored configuration without the block
// (every configuration written before it existed) decodes to a LAN that
// serves, and encodes again without the block, byte for byte.
func TestDHCPServerKeepsOldMeaning(t *testing.T) {
	old := Default().JSON()
	if strings.Contains(string(old), "dhcp_server") {
		t.Fatalf("the default configuration should not write a dhcp_server block:\n%s", old)
	}
	c, err := Decode(old)
	if err != nil {
		t.Fatal(err)
	}
	if string(c.JSON()) != string(old) {
		t.Errorf("a configuration without dhcp_server changes in a JSON round trip")
	}
	if text := c.Text(); strings.Contains(text, "dhcp_server") {
		t.Errorf("the text form of a configuration without the block mentions it:\n%s", text)
	}
	off := dhcpLAN(DHCPServer{Enabled: Bool(false)})
	if text := off.Text(); !strings.Contains(text, "set interfaces eth1 dhcp_server enabled false\n") || strings.Contains(text, "lease_time") {
		t.Errorf("the text form of a server turned off should have only its enabled line:\n%s", text)
	}
	if wan, lan := c.Interface("eth0"), c.Interface("eth1"); wan.ServesDHCP() || !lan.ServesDHCP() {
		t.Errorf("ServesDHCP: wan %v, lan %v; want false, true (the behaviour before the block existed)", wan.ServesDHCP(), lan.ServesDHCP())
	}
	if d := c.Interface("eth1").DHCPServer.LeaseDuration(); d != DefaultLeaseTime {
		t.Errorf("lease time without a block: %s, want %s", d, DefaultLeaseTime)
	}
	// An empty block is no block.
	c, err = Decode([]byte(strings.Replace(string(old), `"addressing": "static",`, `"addressing": "static", "dhcp_server": {},`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if string(c.JSON()) != string(old) || !c.Interface("eth1").ServesDHCP() {
		t.Errorf("an empty dhcp_server block should read as no block")
	}
}

func TestDHCPServerJSON(t *testing.T) {
	in := `{"enabled": false, "range_start": "192.168.1.100", "range_end": "192.168.1.199", "lease_time": "30m",
	        "static_leases": [{"mac": "02:00:5e:10:00:01", "address": "192.168.1.20", "hostname": "printer"}]}`
	c, err := Decode([]byte(strings.Replace(string(Default().JSON()), `"addressing": "static",`, `"addressing": "static", "dhcp_server": `+in+`,`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	lan := c.Interface("eth1")
	s := lan.DHCPServer
	if lan.ServesDHCP() || s.RangeStart != addr("192.168.1.100") || s.LeaseDuration().String() != "30m0s" ||
		len(s.StaticLeases) != 1 || s.StaticLeases[0] != lease("02:00:5e:10:00:01", "192.168.1.20", "printer") {
		t.Errorf("decoded %+v (serves %v), want it off with the range, 30m and the printer's lease", s, lan.ServesDHCP())
	}
	again, err := Decode(c.JSON())
	if err != nil || string(again.JSON()) != string(c.JSON()) {
		t.Errorf("round trip: %v\n%s", err, c.JSON())
	}
	for _, bad := range []struct{ block, want string }{
		{`{"enabled": "yes"}`, "enabled: expected true or false"},
		{`{"static_leases": [{"mac": "02:00:00:00:00:01", "ip": "192.168.1.2"}]}`, `unknown field "ip"`},
		{`{"colour": "blue"}`, `unknown field "colour"`},
	} {
		_, err := Decode([]byte(strings.Replace(string(Default().JSON()), `"addressing": "static",`, `"addressing": "static", "dhcp_server": `+bad.block+`,`, 1)))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("decode dhcp_server %s: got %v, want an error containing %q", bad.block, err, bad.want)
		}
	}
}

// TestDHCPServerPaths edits the block the way the console and the web UI
// do, and checks the text form shows what was set.
func TestDHCPServerPaths(t *testing.T) {
	c := Default()
	for _, e := range []struct{ path, value string }{
		{"interfaces.eth1.dhcp_server.enabled", "false"},
		{"interfaces.eth1.dhcp_server.range_start", "192.168.1.50"},
		{"interfaces.eth1.dhcp_server.range_end", "192.168.1.60"},
		{"interfaces.eth1.dhcp_server.lease_time", "1h"},
	} {
		if err := c.Set(e.path, e.value); err != nil {
			t.Fatalf("set %s %s: %v", e.path, e.value, err)
		}
	}
	if err := c.Set("interfaces.eth1.dhcp_server.static_leases", "02:00:5e:10:00:01,192.168.1.20,printer", "02:00:5e:10:00:02,192.168.1.21"); err != nil {
		t.Fatal(err)
	}
	mustValid(t, c)
	text := c.Text()
	for _, want := range []string{
		"set interfaces eth1 dhcp_server enabled false\n",
		"set interfaces eth1 dhcp_server range_start 192.168.1.50\n",
		"set interfaces eth1 dhcp_server lease_time 1h0m0s\n",
		"set interfaces eth1 dhcp_server static_leases 02:00:5e:10:00:01,192.168.1.20,printer\n",
		"set interfaces eth1 dhcp_server static_leases 02:00:5e:10:00:02,192.168.1.21\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text form lacks %q:\n%s", want, text)
		}
	}
	if c.Interface("eth1").ServesDHCP() {
		t.Errorf("enabled false: the LAN should not serve")
	}
	for _, bad := range []struct{ path, value, want string }{
		{"interfaces.eth1.dhcp_server.enabled", "maybe", `"maybe" is not true or false`},
		{"interfaces.eth1.dhcp_server.static_leases", "02:00:5e:10:00:01", "write it as MAC,ADDRESS"},
		{"interfaces.eth1.dhcp_server.static_leases", "02:00:5e:10:00:01,192.168.1", "192.168.1 is not an IP address"},
	} {
		if err := c.Set(bad.path, bad.value); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("set %s %s: got %v, want an error containing %q", bad.path, bad.value, err, bad.want)
		}
	}
	// Deleting the block goes back to the automatic server.
	if err := c.Delete("interfaces.eth1.dhcp_server"); err != nil {
		t.Fatal(err)
	}
	if !c.Interface("eth1").ServesDHCP() || strings.Contains(string(c.JSON()), "dhcp_server") {
		t.Errorf("after delete: serves %v, JSON %s; want the automatic server and no block", c.Interface("eth1").ServesDHCP(), c.JSON())
	}
	// Clone copies the leases.
	c.Set("interfaces.eth1.dhcp_server.static_leases", "02:00:5e:10:00:01,192.168.1.20")
	d := c.Clone()
	d.Interfaces[1].DHCPServer.StaticLeases[0].Hostname = "changed"
	if c.Interfaces[1].DHCPServer.StaticLeases[0].Hostname != "" {
		t.Errorf("Clone shares the static leases")
	}
}

func TestDefaultDHCPRange(t *testing.T) {
	cases := []struct {
		lan         string
		first, last string
		ok          bool
	}{
		{"192.168.1.1/24", "192.168.1.128", "192.168.1.254", true},
		{"10.0.0.1/16", "10.0.252.0", "10.0.255.254", true}, // capped at 1023 addresses
		{"192.168.7.1/29", "192.168.7.4", "192.168.7.6", true},
		{"192.168.7.1/30", "", "", false},
		{"fd00::1/64", "", "", false},
	}
	for _, c := range cases {
		first, last, ok := DefaultDHCPRange(netip.MustParsePrefix(c.lan))
		if ok != c.ok || (ok && (first.String() != c.first || last.String() != c.last)) {
			t.Errorf("DefaultDHCPRange(%s) = %s-%s %v, want %s-%s %v", c.lan, first, last, ok, c.first, c.last, c.ok)
		}
	}
}
