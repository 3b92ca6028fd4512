package config

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// writeV1Fixture regenerates testdata/v1.db, a database as the schema 1
// firmware wrote it:
//
//	go test ./config -run TestV1Fixture -write-v1-fixture
//
// The file is committed; the test below runs on the committed copy so that
// a change to this helper cannot hide a broken migration.
var writeV1Fixture = flag.Bool("write-v1-fixture", false, "regenerate testdata/v1.db")

// v1Config is a schema 1 config: tunnels keyed by name, "peer", single
// subnets, no data_plane.
const v1Config = `{
  "system": {"hostname": "oldbox", "timezone": "Europe/Berlin", "admins": [], "ntp_servers": ["192.0.2.123"],
             "remote_syslog": {}},
  "interfaces": [
    {"name": "eth0", "role": "wan", "enabled": true, "addressing": "dhcp", "addresses": []},
    {"name": "eth1", "role": "lan", "enabled": true, "addressing": "static", "addresses": ["192.168.7.1/24"]}
  ],
  "routes": [],
  "firewall": {"rules": [], "nat": {"masquerade": [{"name": "out", "interface": "eth0"}], "exemptions": []}, "port_forwards": []},
  "tunnels": {
    "hq": {"enabled": true, "peer": "198.51.100.1", "psk": "v1-preshared-key-0123",
           "ike_proposals": ["aes256-sha256-modp2048"], "esp_proposals": ["aes256-sha256"],
           "local_subnet": "192.168.7.0/24", "remote_subnet": "10.10.0.0/16",
           "ike_lifetime": "4h", "child_lifetime": "1h", "dpd_interval": "30s", "dpd_timeout": "150s",
           "start_action": "initiate"},
    "backup": {"enabled": false, "peer": "198.51.100.2", "psk": "v1-preshared-key-4567",
           "ike_proposals": ["aes128gcm16-prfsha256-ecp256"], "esp_proposals": ["aes128gcm16"],
           "local_subnet": "192.168.7.0/24", "remote_subnet": "10.20.0.0/16",
           "ike_lifetime": "4h", "child_lifetime": "1h", "dpd_interval": "0s", "dpd_timeout": "0s",
           "start_action": "respond"}
  }
}`

func TestV1Fixture(t *testing.T) {
	fixture := filepath.Join("testdata", "v1.db")
	if *writeV1Fixture {
		os.Remove(fixture)
		db, err := bolt.Open(fixture, 0o644, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket(bucketV1)
			if err != nil {
				return err
			}
			if err := b.Put(keyV1Version, []byte("1")); err != nil {
				return err
			}
			return b.Put(keyV1Current, []byte(v1Config))
		})
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	orig, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatalf("fixture missing (regenerate with -write-v1-fixture): %v", err)
	}
	path := filepath.Join(t.TempDir(), "config.db")
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, path, nil)
	if s.Recovered() != "" {
		t.Fatalf("v1 database was set aside: %s", s.Recovered())
	}
	c, rev := s.Running()
	mustValid(t, c)
	if rev != 1 || c.System.Hostname != "oldbox" || len(c.Tunnels) != 2 {
		t.Fatalf("migrated: revision %d hostname %q %d tunnels", rev, c.System.Hostname, len(c.Tunnels))
	}
	// Sorted by name, fields renamed, subnets turned into lists.
	b, hq := c.Tunnels[0], c.Tunnels[1]
	if b.Name != "backup" || hq.Name != "hq" || hq.RemoteAddress.String() != "198.51.100.1" ||
		len(hq.RemoteSubnets) != 1 || hq.RemoteSubnets[0].String() != "10.10.0.0/16" ||
		hq.LocalSubnets[0].String() != "192.168.7.0/24" || hq.DataPlane != DataPlaneAuto ||
		hq.PSK.Reveal() != "v1-preshared-key-0123" || b.StartAction != StartRespond {
		t.Errorf("migrated tunnels wrong:\n%s", c.Text())
	}
	h, _ := s.History()
	if len(h) != 1 || h[0].Reason != "migration" {
		t.Errorf("history after migration: %+v", h)
	}
	s.Close()
	// The migrated file opens as a current one.
	s2 := openTest(t, path, nil)
	if c2, _ := s2.Running(); c2.Text() != c.Text() {
		t.Error("reopened migrated database differs")
	}
}

func TestMigrateDocumentRefusesFuture(t *testing.T) {
	if err := MigrateDocument(map[string]any{}, SchemaVersion+1); err == nil {
		t.Error("a document from a newer schema was accepted")
	}
}
