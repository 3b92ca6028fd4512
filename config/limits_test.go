package config

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// An edit that would make the candidate larger than a revision may be is
// refused: the store used to take it, commit it, and at the next start
// set the database aside (it could not read the revision back) and run
// the defaults with no admin account, which the console then offered to
// whoever was at it.
func TestEditRefusesAnOversizedCandidate(t *testing.T) {
	s := openTest(t, "", nil)
	_, before := s.Candidate()
	_, err := s.EditCandidate("", func(c *Config) error {
		for i := range MaxTunnels {
			tun := Tunnel{Name: fmt.Sprintf("t%d", i), PSK: NewSecret(strings.Repeat("k", MaxPSKLen))}
			for j := range MaxListItems {
				tun.RemoteSubnets = append(tun.RemoteSubnets, Prefix{Prefix: netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0x12, 0x34, 0x56, 0x78, 0, byte(i >> 8), byte(i), byte(j + 1)}), 128)})
			}
			c.Tunnels = append(c.Tunnels, tun)
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "more than the") {
		t.Fatalf("an edit to a candidate over %d bytes: %v, want it refused", MaxDocumentSize, err)
	}
	if _, after := s.Candidate(); after != before {
		t.Error("the refused edit changed the candidate")
	}
	// Through the path setter, as the CLI's set does.
	long := make([]string, 0, 70000)
	for i := range 70000 {
		long = append(long, fmt.Sprintf("ntp%d.example.org", i))
	}
	if _, err := s.SetPath("", "system.ntp_servers", long...); err == nil || !strings.Contains(err.Error(), "more than the") {
		t.Errorf("set of a 1.5 MB list: %v, want it refused", err)
	}
}

func TestValidateBoundsListsAndDescriptions(t *testing.T) {
	base := sampleConfig(1)
	cases := map[string]func(c *Config){
		"interfaces[eth1].description":   func(c *Config) { c.Interface("eth1").Description = strings.Repeat("d", MaxDescriptionLen+1) },
		"interfaces[eth1].description ":  func(c *Config) { c.Interface("eth1").Description = "office\x1b[2J" },
		"system.ntp_servers":             func(c *Config) { c.System.NTPServers = slicesOf("pool.ntp.org", MaxListItems+1) },
		"tunnels[site00].remote_subnets": func(c *Config) { c.Tunnels[0].RemoteSubnets = slicesOf(MustPrefix("10.9.0.0/24"), MaxListItems+1) },
		"firewall.rules":                 func(c *Config) { c.Firewall.Rules = slicesOf(c.Firewall.Rules[0], MaxRules+1) },
		"system.admins":                  func(c *Config) { c.System.Admins = slicesOf(c.System.Admins[0], MaxAdmins+1) },
	}
	for path, edit := range cases {
		c := base.Clone()
		edit(c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), strings.TrimSpace(path)+": ") || !strings.Contains(err.Error(), "at most") && !strings.Contains(err.Error(), "control characters") {
			t.Errorf("%s over its bound: %v, want an error at that path", strings.TrimSpace(path), err)
		}
	}
	if err := base.Validate(); err != nil {
		t.Fatalf("the base config is not valid: %v", err)
	}
}

func slicesOf[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// A hash asking argon2 for more memory than a small board has is not
// accepted from a backup or a pasted configuration, and a password longer
// than the one limit is not hashed.
func TestPasswordBounds(t *testing.T) {
	c := sampleConfig(1)
	c.System.Admins[0].PasswordHash = NewSecret("$argon2id$v=19$m=262144,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2g")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "out of bounds") {
		t.Errorf("a 256 MiB argon2 hash: %v, want it refused", err)
	}
	if _, err := HashPassword(strings.Repeat("x", MaxPasswordLen+1)); err == nil {
		t.Errorf("a %d-byte password was hashed", MaxPasswordLen+1)
	}
	if _, err := HashPassword(strings.Repeat("x", MaxPasswordLen)); err != nil {
		t.Errorf("a %d-byte password: %v", MaxPasswordLen, err)
	}
}
