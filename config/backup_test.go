package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var when = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestBackupRoundTrip(t *testing.T) {
	c := sampleConfig(2)
	for _, mode := range []string{SecretsIncluded, SecretsOmitted, SecretsEncrypted} {
		data, err := MakeBackup(c, 7, mode, "a long passphrase", when)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		hasPSK := strings.Contains(string(data), c.Tunnels[0].PSK.Reveal())
		if hasPSK != (mode == SecretsIncluded) {
			t.Errorf("%s backup contains the PSK: %v", mode, hasPSK)
		}
		// Restore onto a box that has the secrets (omitted: taken from it).
		got, err := ReadBackup(data, "a long passphrase", c)
		if err != nil {
			t.Fatalf("%s restore: %v", mode, err)
		}
		if string(got.JSON()) != string(c.JSON()) {
			t.Errorf("%s restore differs:\n%s", mode, DiffText(c, got))
		}
	}
}

func TestBackupRefusals(t *testing.T) {
	c := sampleConfig(1)
	enc, _ := MakeBackup(c, 1, SecretsEncrypted, "a long passphrase", when)
	omitted, _ := MakeBackup(c, 1, SecretsOmitted, "", when)
	tests := []struct {
		name, data, pass string
		current          *Config
		want             string
	}{
		{"wrong passphrase", string(enc), "another passphrase", nil, "wrong passphrase"},
		{"no passphrase", string(enc), "", nil, "a passphrase is needed"},
		{"omitted secrets on a fresh box", string(omitted), "", Default(), "missing pre-shared key"},
		{"not JSON", "hello", "", nil, "invalid JSON"},
		{"truncated", string(enc[:len(enc)/2]), "", nil, "invalid JSON"},
		{"unknown field", `{"format":"flashgate-backup","schema":2,"secrets":"included","config":{},"extra":1}`, "", nil, `unknown field "extra"`},
		{"foreign format", `{"format":"pfsense","schema":2,"secrets":"included","config":{}}`, "", nil, "not a flashgate backup"},
		{"future schema", `{"format":"flashgate-backup","schema":9,"secrets":"included","config":{}}`, "", nil, "newer than this firmware"},
		{"invalid config", `{"system":{"hostname":"bad host"}}`, "", nil, "system.hostname"},
		{"bare config with unknown field", `{"sytem":{}}`, "", nil, `unknown field "sytem"`},
	}
	for _, tt := range tests {
		_, err := ReadBackup([]byte(tt.data), tt.pass, tt.current)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
	if _, err := MakeBackup(c, 1, SecretsEncrypted, "short", when); err == nil {
		t.Error("short passphrase accepted")
	}
}

func TestImportBadDataChangesNothing(t *testing.T) {
	s := openTest(t, "", nil)
	mustCommit(t, s, "a", "base", func(c *Config) { *c = *sampleConfig(1) })
	before, etag := s.Candidate()
	bad := strings.Replace(string(before.JSON()), `"10.1.0.0/16"`, `"10.1.0.0/33"`, 1)
	_, err := s.Import(etag, []byte(bad), "")
	var ve ValidationErrors
	if !errors.As(err, &ve) || ve[0].Path != "tunnels[site00].remote_subnets[0]" {
		t.Fatalf("import of a bad config: %v; want a validation error at tunnels[site00].remote_subnets[0]", err)
	}
	after, etag2 := s.Candidate()
	if etag2 != etag || after.Text() != before.Text() {
		t.Error("a refused import changed the candidate")
	}
	// A good one lands in the candidate, not in running.
	good := strings.Replace(string(before.JSON()), `"hub"`, `"imported"`, 1)
	if _, err := s.Import(etag, []byte(good), ""); err != nil {
		t.Fatal(err)
	}
	if cand, _ := s.Candidate(); cand.System.Hostname != "imported" || hostname(s) != "hub" {
		t.Errorf("import: candidate %q running %q", cand.System.Hostname, hostname(s))
	}
}

func TestPasswords(t *testing.T) {
	var a Admin
	if err := a.SetPassword("short"); err == nil {
		t.Error("short password accepted")
	}
	if err := a.SetPassword("correct horse battery"); err != nil {
		t.Fatal(err)
	}
	if !a.VerifyPassword("correct horse battery") || a.VerifyPassword("correct horse batterz") || a.VerifyPassword("") {
		t.Error("VerifyPassword gives wrong answers")
	}
	if !strings.HasPrefix(a.PasswordHash.Reveal(), "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("hash %q not in the expected PHC form", a.PasswordHash.Reveal())
	}
	a.PasswordHash = NewSecret("$argon2id$v=19$m=99999999,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA")
	if a.VerifyPassword("x") {
		t.Error("hash with absurd parameters verified")
	}
}

// FuzzReadBackup: any input is refused or gives a config that validates and
// survives a JSON round trip; nothing panics.
func FuzzReadBackup(f *testing.F) {
	c := sampleConfig(1)
	inc, _ := MakeBackup(c, 1, SecretsIncluded, "", when)
	om, _ := MakeBackup(c, 1, SecretsOmitted, "", when)
	f.Add(inc)
	f.Add(om)
	f.Add(c.JSON())
	f.Add([]byte(v1Config))
	f.Add([]byte(`{"format":"flashgate-backup","schema":1,"secrets":"included","config":` + v1Config + `}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ReadBackup(data, "", c)
		if err != nil {
			return
		}
		if err := got.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
		again, err := Decode(got.JSON())
		if err != nil || string(again.JSON()) != string(got.JSON()) {
			t.Fatalf("accepted config does not round-trip: %v", err)
		}
	})
}
