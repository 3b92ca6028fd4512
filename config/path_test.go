package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func TestSetPath(t *testing.T) {
	tests := []struct {
		path    string
		values  []string
		check   func(c *Config) string // returns what it found, compared with want
		want    string
		wantErr string
	}{
		{"system.hostname", []string{"gw1"}, func(c *Config) string { return c.System.Hostname }, "gw1", ""},
		{"tunnels.site00.remote_address", []string{"203.0.113.9"}, func(c *Config) string { return c.Tunnel("site00").RemoteAddress.String() }, "203.0.113.9", ""},
		{"tunnels.site00.remote_subnets", []string{"10.7.0.0/16", "10.8.0.0/16"}, func(c *Config) string { return sprintf("%v", c.Tunnel("site00").RemoteSubnets) }, "[10.7.0.0/16 10.8.0.0/16]", ""},
		{"tunnels.site00.remote_subnets.1", []string{"10.9.0.0/16"}, func(c *Config) string { return sprintf("%v", c.Tunnel("site00").RemoteSubnets) }, "[10.1.0.0/16 10.9.0.0/16]", ""},
		{"tunnels.site00.enabled", []string{"false"}, func(c *Config) string { return sprintf("%v", c.Tunnel("site00").Enabled) }, "false", ""},
		{"tunnels.site00.dpd_interval", []string{"10s"}, func(c *Config) string { return c.Tunnel("site00").DPDInterval.String() }, "10s", ""},
		{"tunnels.fresh.remote_address", []string{"192.0.2.77"}, func(c *Config) string {
			t := c.Tunnel("fresh")
			return sprintf("%s %s %s", t.RemoteAddress, t.IKEProposals[0], t.StartAction)
		}, "192.0.2.77 aes128gcm16-prfsha256-ecp256 initiate", ""},
		{"interfaces.eth1.mtu", []string{"1400"}, func(c *Config) string { return sprintf("%d", c.Interface("eth1").MTU) }, "1400", ""},
		{"firewall.port_forwards.web.destination_port", []string{"8443"}, func(c *Config) string { return sprintf("%d", c.Firewall.PortForwards[0].DestinationPort) }, "8443", ""},
		{"firewall.port_forwards.web.external_ports", []string{"8000-8010"}, func(c *Config) string { return c.Firewall.PortForwards[0].ExternalPorts.String() }, "8000-8010", ""},
		{"tunnels.site00.psk", []string{"another-long-secret-1"}, func(c *Config) string { return c.Tunnel("site00").PSK.Reveal() }, "another-long-secret-1", ""},
		{"interfaces.eth1.mtu", []string{"big"}, nil, "", `interfaces.eth1.mtu: "big" is not a whole number`},
		{"tunnels.site00.remote_address", []string{"1.2.3"}, nil, "", "1.2.3 is not an IP address"},
		{"tunnels.site00.remote_subnets", []string{"10.0.0.0/8", "10.0.0.0/33"}, nil, "", "[1]: 10.0.0.0/33 is not a network"},
		{"tunnels.site00.remote_subnets.5", []string{"10.9.0.0/16"}, nil, "", "not an index of this list"},
		{"tunnels.site00.colour", []string{"blue"}, nil, "", `unknown field "colour"`},
		{"tunnels.site00", []string{"x"}, nil, "", "names a group of fields"},
		{"system.hostname.x", []string{"x"}, nil, "", "is a value and has no fields"},
		{"system.hostname", []string{"a", "b"}, nil, "", "takes one value, got 2"},
		{"system..hostname", []string{"a"}, nil, "", "empty path element"},
	}
	for _, tt := range tests {
		c := sampleConfig(1)
		err := c.Set(tt.path, tt.values...)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Set(%s, %q) = %v, want error containing %q", tt.path, tt.values, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Set(%s, %q): %v", tt.path, tt.values, err)
			continue
		}
		if got := tt.check(c); got != tt.want {
			t.Errorf("after Set(%s, %q): got %s, want %s", tt.path, tt.values, got, tt.want)
		}
	}
}

func TestDeletePath(t *testing.T) {
	c := sampleConfig(3)
	if err := c.Delete("tunnels.site01"); err != nil || len(c.Tunnels) != 2 || c.Tunnel("site01") != nil {
		t.Fatalf("delete tunnel: %v, %d tunnels left", err, len(c.Tunnels))
	}
	if err := c.Delete("tunnels.site00.ike_proposals.1"); err != nil || len(c.Tunnels[0].IKEProposals) != 1 {
		t.Fatalf("delete proposal: %v, %v", err, c.Tunnels[0].IKEProposals)
	}
	if err := c.Delete("routes.mgmt.gateway"); err != nil || c.Routes[0].Gateway.IsSet() {
		t.Fatalf("clear gateway: %v", err)
	}
	if err := c.Delete("tunnels.nope"); err == nil || !strings.Contains(err.Error(), `no entry named "nope"`) {
		t.Errorf("delete missing tunnel: %v", err)
	}
	if err := c.Delete("tunnels"); err == nil {
		t.Error("deleting a whole section succeeded")
	}
}

func TestMergePatch(t *testing.T) {
	c := sampleConfig(1)
	p, err := c.MergePatch([]byte(`{"system":{"hostname":"patched","remote_syslog":{"host":"192.0.2.5"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.System.Hostname != "patched" || p.System.RemoteSyslog.Host != "192.0.2.5" || len(p.Tunnels) != 1 || c.System.Hostname != "hub" {
		t.Errorf("patch result wrong: %+v (original %s)", p.System, c.System.Hostname)
	}
	if _, err := c.MergePatch([]byte(`{"system":{"hostnme":"x"}}`)); err == nil || !strings.Contains(err.Error(), "hostnme") {
		t.Errorf("patch with unknown field: %v", err)
	}
}

// FuzzSetPath: Set, Delete and Validate never panic, and a config that was edited
// still encodes and decodes to itself.
func FuzzSetPath(f *testing.F) {
	for _, s := range []string{"system.hostname", "tunnels.site00.remote_subnets.0", "tunnels.x.psk", "firewall.rules.r.sources.0", "interfaces.eth0.mtu", "interfaces.eth1.dhcp_server.enabled", "interfaces.eth1.dhcp_server.static_leases.0", "interfaces.eth1.dhcp_server", "a.b.c", ""} {
		f.Add(s, "10.0.0.0/8", false)
		f.Add(s, "1", true)
		f.Add(s, "02:00:5e:10:00:01,10.0.0.9,printer", false)
	}
	f.Fuzz(func(t *testing.T, path, value string, del bool) {
		c := sampleConfig(1)
		if del {
			c.Delete(path)
		} else {
			c.Set(path, value)
		}
		c.Validate() // must not panic on whatever the edit left
		d, err := Decode(c.JSON())
		if err != nil {
			t.Fatalf("edited config does not decode: %v", err)
		}
		if string(d.JSON()) != string(c.JSON()) {
			t.Fatalf("edited config changes in a JSON round trip")
		}
	})
}

// Get reads back what Set wrote, in the strings Set takes, and says
// whether the JSON form holds the field; Index finds a named entry's
// position.
func TestGetAndIndex(t *testing.T) {
	c := Default()
	for _, kv := range [][]string{{"tunnels.a.remote_address", "192.0.2.1"}, {"tunnels.b.remote_address", "192.0.2.2"},
		{"tunnels.b.remote_subnets", "10.1.0.0/16", "10.2.0.0/16"}, {"tunnels.b.ike_lifetime", "2h"}, {"tunnels.b.psk", "a key"}} {
		if err := c.Set(kv[0], kv[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		path    string
		want    []string
		present bool
		err     string
	}{
		{"system.hostname", []string{"flashgate"}, true, ""},
		{"tunnels.b.remote_subnets", []string{"10.1.0.0/16", "10.2.0.0/16"}, true, ""},
		{"tunnels.b.remote_subnets.1", []string{"10.2.0.0/16"}, true, ""},
		{"tunnels.b.ike_lifetime", []string{"2h0m0s"}, true, ""},
		{"tunnels.b.psk", []string{"a key"}, true, ""},
		{"tunnels.a.local_id", []string{""}, false, ""},            // omitempty and empty
		{"system.remote_syslog.host", []string{""}, false, ""},     // under an omitted group
		{"tunnels.c.remote_address", nil, false, "no entry named"}, // no such tunnel
		{"tunnels.b.nosuch", nil, false, "unknown field"},
		{"tunnels.b", nil, true, "group of fields"},
	} {
		got, present, err := c.Get(tc.path)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Get(%s) error %v, want %q", tc.path, err, tc.err)
			continue
		}
		if err == nil && (!slices.Equal(got, tc.want) || present != tc.present) {
			t.Errorf("Get(%s) = %q, present %v; want %q, %v", tc.path, got, present, tc.want, tc.present)
		}
	}
	for path, want := range map[string]int{"tunnels.a": 0, "tunnels.b": 1, "interfaces.eth1": 1, "tunnels.c": -1, "system": -1, "system.hostname": -1} {
		if got, ok := c.Index(path); got != want || ok != (want >= 0) {
			t.Errorf("Index(%s) = %d, %v; want %d", path, got, ok, want)
		}
	}
}
