package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestEncodeConfigIsMarshal(t *testing.T) {
	withCert := sampleConfig(3)
	withCert.Certificates = []Certificate{{Name: "ca", Cert: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", CA: true}}
	for _, c := range []*Config{Default(), sampleConfig(20), withCert, {}} {
		enc, err := encodeConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(c)
		if !bytes.Equal(enc.doc, want) {
			t.Errorf("assembled document differs from json.Marshal:\n%s\n%s", enc.doc, want)
		}
	}
}

// An edit moves no cut outside the parts next to it: the parts before it
// are the same, and so are all but a few after it.
func TestPartsCutByContent(t *testing.T) {
	doc := SyntheticConfig(300).JSON()
	before := splitParts(doc)
	if len(before) < 20 {
		t.Fatalf("%d parts for %d bytes: the cuts are not where they should be", len(before), len(doc))
	}
	for _, p := range before {
		if len(p) > partMax {
			t.Fatalf("a part of %d bytes, more than %d", len(p), partMax)
		}
	}
	if !bytes.Equal(bytes.Join(before, nil), doc) {
		t.Fatal("the parts do not make the document")
	}
	rng := rand.New(rand.NewPCG(22, 1))
	for range 50 {
		at := rng.IntN(len(doc))
		edited := bytes.Clone(doc[:at])
		edited = append(edited, fmt.Sprintf("inserted %d", rng.Int())...)
		edited = append(edited, doc[at:]...)
		old := map[string]bool{}
		for _, p := range before {
			old[string(p)] = true
		}
		changed := 0
		for _, p := range splitParts(edited) {
			if !old[string(p)] {
				changed++
			}
		}
		if changed > 3 {
			t.Errorf("an insertion at %d changed %d of %d parts", at, changed, len(before))
		}
	}
}

// partCount is how many parts the database holds.
func partCount(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	if err := s.view(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketParts).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSmallChangeStoresFewParts(t *testing.T) {
	s := openTest(t, "", nil)
	mustCommit(t, s, "a", "hub", func(c *Config) { *c = *sampleConfig(300) })
	base := partCount(t, s)
	if base < 20 {
		t.Fatalf("a 300-tunnel configuration in %d parts", base)
	}
	for i := range 5 {
		n := partCount(t, s)
		mustCommit(t, s, "a", "move one", func(c *Config) {
			c.Tunnels[100+i].RemoteAddress = MustAddr(fmt.Sprintf("198.51.100.%d", i+1))
		})
		if added := partCount(t, s) - n; added < 1 || added > 3 {
			t.Errorf("changing one tunnel stored %d new parts", added)
		}
	}
	// A rollback restores parts that are still stored: none are new.
	n := partCount(t, s)
	if _, err := s.Rollback(2, "a"); err != nil {
		t.Fatal(err)
	}
	if got := partCount(t, s); got != n {
		t.Errorf("a rollback stored %d new parts", got-n)
	}
	c, _ := s.Running()
	if c.Text() != sampleConfig(300).Text() {
		t.Error("the rollback did not restore the configuration of revision 2")
	}
}

// Trimming the history deletes exactly the parts no kept revision lists,
// and every kept revision still reads back.
func TestTrimCollectsParts(t *testing.T) {
	s, _ := openWithHistory(t, 5)
	want := map[uint64]string{}
	for i := range 40 {
		info := mustCommit(t, s, "a", "n", func(c *Config) {
			if i == 0 {
				*c = *sampleConfig(100)
			}
			c.Tunnels[i%100].RemoteAddress = MustAddr(fmt.Sprintf("198.51.100.%d", i+1))
		})
		c, _ := s.Running()
		want[info.Revision] = c.Text()
	}
	err := s.view(func(tx *bolt.Tx) error {
		used := map[string]bool{}
		tx.Bucket(bucketRevisions).ForEach(func(k, v []byte) error {
			hdr, body, _ := splitRecord(v)
			if recordHasParts(hdr) {
				for i := 0; i < len(body); i += partKeyLen {
					used[string(body[i:i+partKeyLen])] = true
				}
			}
			return nil
		})
		return tx.Bucket(bucketParts).ForEach(func(k, _ []byte) error {
			if !used[string(k)] {
				t.Errorf("part %x is stored but no revision lists it", k)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := s.History()
	for _, r := range h {
		c, _, err := s.Revision(r.Revision)
		if err != nil {
			t.Fatalf("revision %d: %v", r.Revision, err)
		}
		if c.Text() != want[r.Revision] {
			t.Errorf("revision %d reads back differently", r.Revision)
		}
	}
}

// A part whose bytes changed on the card fails its hash: the database is
// set aside, not run with a changed key or address.
func TestDamagedPartIsSetAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.db")
	s := openTest(t, path, nil)
	mustCommit(t, s, "a", "hub", func(c *Config) { *c = *sampleConfig(20) })
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketParts)
		k, v := b.Cursor().Last()
		// Another document's bytes under this part's hash: it inflates
		// fine, and only the hash tells.
		other, _ := deflateAppend(nil, []byte(`{"system":{"hostname":"evil"}}`))
		return b.Put(bytes.Clone(k), append(bytes.Clone(v[:sha256.Size]), other...))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s2 := openTest(t, path, nil)
	if !strings.Contains(s2.Recovered(), "damaged") {
		t.Fatalf("Recovered() = %q, want the damaged part named", s2.Recovered())
	}
}

// copyV2Fixture copies testdata/v2.db, written by the format 2 firmware,
// to a new file for the test to open (and change).
func copyV2Fixture(t *testing.T) string {
	t.Helper()
	orig, err := os.ReadFile(filepath.Join("testdata", "v2.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.db")
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// v2.db was written by the format 2 store (the firmware before the parts,
// commit d14c125) with the fake clock at 2026-11-30T12:00Z:
//
//	1 factory defaults; 2 "three branches" (SyntheticConfig(3), hostname
//	v2box, one admin), 1 h later 3 "site01 moved" (remote_address
//	198.51.100.7), 1 h later 4 "try a new name" (hostname v2box-trial),
//	a commit-confirmed with a 10 minute window, not confirmed.
//
// It is committed, not generated, so that it stays what the old firmware
// wrote: a box upgrading opens exactly this kind of file.
func TestV2Fixture(t *testing.T) {
	path := copyV2Fixture(t)
	clock := newFakeClock()
	clock.Advance(2*time.Hour + 5*time.Minute) // inside the confirmation window
	s := openTest(t, path, clock)
	if s.Recovered() != "" {
		t.Fatalf("format 2 database was set aside: %s", s.Recovered())
	}
	c, rev := s.Running()
	mustValid(t, c)
	if rev != 4 || c.System.Hostname != "v2box-trial" || len(c.Tunnels) != 3 || c.Tunnels[1].RemoteAddress.String() != "198.51.100.7" {
		t.Fatalf("running after the upgrade: revision %d, hostname %q, %d tunnels\n%s", rev, c.System.Hostname, len(c.Tunnels), c.Text())
	}
	if p := s.Pending(); p == nil || p.Revision != 4 || p.RollbackTo != 3 {
		t.Fatalf("the pending confirmation did not survive: %+v", p)
	}
	h, err := s.History()
	if err != nil || len(h) != 4 || h[2].Message != "three branches" {
		t.Fatalf("history: %+v, %v", h, err)
	}
	// A commit in the new format next to the old records.
	mustCommit(t, s, "admin", "site02 moved", func(c *Config) { c.Tunnels[2].RemoteAddress = MustAddr("198.51.100.9") })
	s.Close()
	s = openTest(t, path, clock)
	if s.Recovered() != "" {
		t.Fatalf("reopened: set aside: %s", s.Recovered())
	}
	if c, rev := s.Running(); rev != 5 || c.Tunnels[2].RemoteAddress.String() != "198.51.100.9" || c.System.Hostname != "v2box-trial" {
		t.Fatalf("reopened: revision %d\n%s", rev, c.Text())
	}
	// Back to a revision the old firmware stored.
	if _, err := s.Rollback(2, "admin"); err != nil {
		t.Fatal(err)
	}
	c, _ = s.Running()
	if c.System.Hostname != "v2box" || c.Tunnels[1].RemoteAddress.String() != "192.0.2.2" || len(c.System.Admins) != 1 {
		t.Fatalf("rolled back to revision 2:\n%s", c.Text())
	}
	s.Close()
	viewDB(t, path, func(tx *bolt.Tx) {
		if v := string(tx.Bucket(bucketMeta).Get(keySchema)); v != fmt.Sprint(dbFormat) {
			t.Errorf("schema key %q after the upgrade", v)
		}
	})
}

// The commit-confirmed the old firmware left pending rolls back to its
// revision when the window passes under the new one.
func TestV2FixturePendingRollsBack(t *testing.T) {
	path := copyV2Fixture(t)
	clock := newFakeClock()
	clock.Advance(2*time.Hour + 20*time.Minute) // the window closed while the box was off
	s := openTest(t, path, clock)
	c, rev := s.Running()
	if rev != 5 || c.System.Hostname != "v2box" || c.Tunnels[1].RemoteAddress.String() != "198.51.100.7" || s.Pending() != nil {
		t.Fatalf("after the deadline: revision %d, hostname %q, pending %+v", rev, c.System.Hostname, s.Pending())
	}
}
