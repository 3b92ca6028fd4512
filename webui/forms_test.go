package webui

import (
	"encoding/json"
	"testing"

	"github.com/flashgate/flashgate/config"
)

func TestFieldFor(t *testing.T) {
	cases := []struct {
		k      *kind
		path   string
		name   string
		idx    int
		want   string
		mapped bool
	}{
		{kindTunnels, "tunnels[branch].remote_subnets[0]", "branch", 0, "remote_subnets", true},
		{kindTunnels, "tunnels[branch].psk", "branch", 0, "psk", true},
		{kindTunnels, "tunnels[2].name", "bad name", 2, "name", true},
		{kindTunnels, "tunnels[other].psk", "branch", 0, "", false},
		{kindTunnels, "tunnels[branch-2].psk", "branch", 0, "", false},
		{kindTunnels, "tunnels[branch]", "branch", 0, "", true},
		{kindRules, "firewall.rules[ssh].destination_ports[1]", "ssh", 3, "destination_ports", true},
		{kindForwards, "firewall.port_forwards[web].external_ports", "web", 0, "external_ports", true},
		{kindSystem, "system.remote_syslog.port", "", -1, "remote_syslog.port", true},
		{kindSystem, "system.admins[admin].password_hash", "", -1, "", false},
		{kindSystem, "system.hostname", "", -1, "hostname", true},
	}
	for _, tc := range cases {
		got, ok := tc.k.fieldFor(tc.path, tc.name, tc.idx)
		if got != tc.want || ok != tc.mapped {
			t.Errorf("%s.fieldFor(%q, %q) = %q, %v; want %q, %v", tc.k.Name, tc.path, tc.name, got, ok, tc.want, tc.mapped)
		}
	}
}

func TestSplitList(t *testing.T) {
	got := splitList([]string{"10.0.0.0/8,\r\n 10.1.0.0/16 \n\n", "192.0.2.0/24"})
	want := []string{"10.0.0.0/8", "10.1.0.0/16", "192.0.2.0/24"}
	if len(got) != len(want) {
		t.Fatalf("splitList = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("splitList = %q, want %q", got, want)
		}
	}
}

// FuzzTunnelForm feeds arbitrary form values to the tunnel form: it must
// never panic, and whatever it accepts must be a valid configuration.
func FuzzTunnelForm(f *testing.F) {
	f.Add("branch", "198.51.100.7", "0123456789abcdef-long-enough-key", "192.168.1.0/24", "10.20.0.0/16", config.DefaultIKEProposal, "30s", "initiate")
	f.Add("x", "", "", "", "", "", "", "")
	f.Add("a.b", "::1", "k", "10.0.0.0/33", "fe80::/10\n0.0.0.0/0", "aes128-md5", "-1s", "respond")
	f.Fuzz(func(t *testing.T, name, peer, psk, local, remote, ike, dpd, start string) {
		c := config.Default()
		vals := map[string][]string{
			"enabled": {"true"}, "remote_address": {peer}, "psk": {psk}, "local_subnets": {local},
			"remote_subnets": {remote}, "ike_proposals": {ike}, "esp_proposals": {config.DefaultESPProposal},
			"dpd_interval": {dpd}, "start_action": {start},
		}
		errs := kindTunnels.apply(c, name, vals, true, true)
		if errs == nil {
			if err := c.Validate(); err != nil {
				t.Errorf("form accepted, but the configuration is invalid: %v", err)
			}
			if c.Tunnel(name) == nil {
				t.Errorf("form accepted, but there is no tunnel %q", name)
			}
		}
	})
}

func TestCompactDuration(t *testing.T) {
	for in, want := range map[string]string{
		"4h0m0s": "4h", "1h30m0s": "1h30m", "2m30s": "2m30s", "30s": "30s", "0s": "0s", "10m0s": "10m",
		"1h0m5s": "1h0m5s", "forever": "forever", "": "", "150s": "150s",
	} {
		if got := compactDuration(in); got != want {
			t.Errorf("compactDuration(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzAPIValues feeds arbitrary JSON objects to the API's element decoder:
// it must not panic, and what it accepts names only the kind's fields.
func FuzzAPIValues(f *testing.F) {
	f.Add([]byte(`{"remote_address":"198.51.100.7","enabled":true,"remote_subnets":["10.0.0.0/8"],"mtu":1400}`))
	f.Add([]byte(`{"psk":null,"local_subnets":[1,2]}`))
	f.Add([]byte(`{"colour":"blue"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var body map[string]json.RawMessage
		if json.Unmarshal(data, &body) != nil {
			return
		}
		vals, errs := apiValues(kindTunnels, body)
		if errs == nil {
			for k := range vals {
				known := false
				for _, fl := range kindTunnels.Fields {
					known = known || fl.Key == k
				}
				if !known {
					t.Errorf("accepted unknown field %q", k)
				}
			}
		}
	})
}
