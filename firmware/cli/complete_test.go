package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/config"
)

func TestCompletePath(t *testing.T) {
	c := config.Default()
	if err := c.Set("tunnels.branch.remote_address", "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("tunnels.bravo.remote_address", "192.0.2.2"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		partial string
		want    []string
	}{
		{"", []string{"system.", "interfaces.", "routes.", "firewall.", "tunnels.", "certificates."}},
		{"tu", []string{"tunnels."}},
		{"tunnels.", []string{"tunnels.branch.", "tunnels.bravo."}},
		{"tunnels.bra", []string{"tunnels.branch.", "tunnels.bravo."}},
		{"tunnels.branch.psk", []string{"tunnels.branch.psk"}},
		{"tunnels.branch.remote_", []string{"tunnels.branch.remote_address", "tunnels.branch.remote_id", "tunnels.branch.remote_auth", "tunnels.branch.remote_subnets"}},
		{"tunnels.branch.na", nil}, // the name is the path's key
		{"interfaces.eth1.ad", []string{"interfaces.eth1.addressing", "interfaces.eth1.addresses"}},
		{"interfaces.eth1.addresses.", []string{"interfaces.eth1.addresses.0"}},
		{"firewall.nat.", []string{"firewall.nat.masquerade.", "firewall.nat.exemptions."}},
		{"system.remote_syslog.", []string{"system.remote_syslog.host", "system.remote_syslog.port", "system.remote_syslog.protocol"}},
		{"system.admins.", nil},
		{"nosuch.", nil},
		{"tunnels.new.psk", []string{"tunnels.new.psk"}}, // set creates it
		{"firewall.rules.ssh.ac", []string{"firewall.rules.ssh.action"}},
		{"system.hostname.x", nil},
	} {
		if got := completePath(c, tc.partial); !slices.Equal(got, tc.want) {
			t.Errorf("completePath(%q) = %q, want %q", tc.partial, got, tc.want)
		}
	}
}

func TestCompleteValue(t *testing.T) {
	c := config.Default()
	c.Set("tunnels.branch.remote_address", "192.0.2.1")
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"tunnels.branch.enabled", []string{"true", "false"}},
		{"tunnels.branch.start_action", []string{"initiate", "respond", "on-traffic"}},
		{"tunnels.new.data_plane", []string{"auto", "xfrm", "userspace"}}, // not created yet
		{"tunnels.new.enabled", []string{"true", "false"}},
		{"interfaces.eth0.role", []string{"wan", "lan", "opt"}},
		{"firewall.nat.masquerade.lan-out-eth0.interface", []string{"eth0", "eth1"}},
		{"system.hostname", nil},
		{"firewall.rules.new.action", []string{"accept", "drop", "reject"}},
		{"tunnels.branch", nil},
		{"nosuch.field", nil},
	} {
		if got := completeValue(c, tc.path); !slices.Equal(got, tc.want) {
			t.Errorf("completeValue(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestColumns(t *testing.T) {
	got := columns([]string{"aa", "b", "cccc", "d"}, 14)
	want := "aa    b\ncccc  d\n"
	if got != want {
		t.Errorf("columns = %q, want %q", got, want)
	}
}

// FuzzCompletePath checks that any partial path completes without a panic
// and only to paths that extend it.
func FuzzCompletePath(f *testing.F) {
	for _, s := range []string{"", "tunnels.", "tunnels.branch.re", "interfaces.eth1.addresses.0", "a..b", ".", "firewall.rules.x.y.z"} {
		f.Add(s)
	}
	c := config.Default()
	c.Set("tunnels.branch.remote_address", "192.0.2.1")
	f.Fuzz(func(t *testing.T, partial string) {
		for _, cand := range completePath(c, partial) {
			if !strings.HasPrefix(cand, partial) {
				t.Fatalf("completePath(%q) offered %q", partial, cand)
			}
		}
		completeValue(c, partial)
	})
}
