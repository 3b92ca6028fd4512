package config

import (
	"bytes"
	"compress/flate"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// secretsIn returns the markers found in data, in the clear or in any
// deflate stream starting at any offset (revisions are deflated JSON).
func secretsIn(data []byte, markers ...string) []string {
	var found []string
	for _, m := range markers {
		if bytes.Contains(data, []byte(m)) {
			found = append(found, m+" (clear)")
		}
	}
	buf := make([]byte, 256<<10)
	for off := 0; off < len(data); off++ {
		zr := flate.NewReader(bytes.NewReader(data[off:]))
		n, _ := io.ReadFull(zr, buf)
		zr.Close()
		if n < 16 {
			continue
		}
		for _, m := range markers {
			if bytes.Contains(buf[:n], []byte(m)) {
				found = append(found, m+" (deflated)")
			}
		}
	}
	return found
}

// A factory reset leaves no secret of the old configuration anywhere in
// the config directory: not in bbolt's freed pages (it does not zero
// them), not in a set-aside database.
func TestFactoryResetErasesSecretsFromTheCard(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.db")
	s := openTest(t, path, nil)
	const psk1, psk2 = "first-psk-7c1f0e9a2b", "second-psk-5d83a6b4e1"
	mustCommit(t, s, "a", "tunnels", func(c *Config) {
		*c = *sampleConfig(3)
		c.Tunnels[0].PSK = NewSecret(psk1)
	})
	mustCommit(t, s, "a", "new key", func(c *Config) { c.Tunnels[0].PSK = NewSecret(psk2) })
	hash := testHash()
	salt := hash[len(hash)-43-1-22 : len(hash)-43-1] // the PHC salt field: unique to this hash

	// A database set aside earlier (as Open does with an unusable one).
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".set-aside-20261130T110000Z", old, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := secretsIn(old, psk1, psk2, salt); len(got) < 3 {
		t.Fatalf("the test cannot see the secrets before the reset (found %v)", got)
	}

	if _, err := s.FactoryReset("console"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() != "config.db" {
			t.Errorf("%s is left after the factory reset", e.Name())
		}
		if got := secretsIn(data, psk1, psk2, salt); len(got) > 0 {
			t.Errorf("%s still holds %v after the factory reset", e.Name(), got)
		}
	}
	// And the store works on: a commit and a reopen.
	mustCommit(t, s, "a", "after", func(c *Config) { c.System.Hostname = "gw-after" })
	s.Close()
	s2 := openTest(t, path, nil)
	if hostname(s2) != "gw-after" || s2.Recovered() != "" {
		t.Errorf("after reopening: host name %q, recovered %q", hostname(s2), s2.Recovered())
	}
}
