package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func openTest(t *testing.T, path string, clock Clock) *Store {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "config.db")
	}
	if clock == nil {
		clock = newFakeClock()
	}
	s, err := Open(path, Options{Clock: clock, LockTimeout: time.Second})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openWithHistory opens a new database that keeps limit revisions, and
// says where it is.
func openWithHistory(t *testing.T, limit int) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.db")
	s, err := Open(path, Options{HistoryLimit: limit, Clock: newFakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func mustCommit(t *testing.T, s *Store, who, msg string, edit func(c *Config)) RevisionInfo {
	t.Helper()
	if _, err := s.EditCandidate("", func(c *Config) error { edit(c); return nil }); err != nil {
		t.Fatalf("edit: %v", err)
	}
	info, err := s.Commit(who, msg)
	if err != nil {
		t.Fatalf("commit %q: %v", msg, err)
	}
	return info
}

func hostname(s *Store) string {
	c, _ := s.Running()
	return c.System.Hostname
}

func TestFreshStoreHoldsDefaults(t *testing.T) {
	s := openTest(t, "", nil)
	c, rev := s.Running()
	if rev != 1 || c.System.Hostname != "flashgate" || s.Recovered() != "" {
		t.Fatalf("fresh store: revision %d hostname %q recovered %q; want 1, flashgate, none", rev, c.System.Hostname, s.Recovered())
	}
}

func TestCommitRecordsHistory(t *testing.T) {
	s := openTest(t, "", nil)
	info := mustCommit(t, s, "alice", "add branch tunnel", func(c *Config) { *c = *sampleConfig(1) })
	if info.Revision != 2 || info.Who != "alice" || info.Message != "add branch tunnel" {
		t.Errorf("commit info = %+v", info)
	}
	if got := joined(info.Sections); got != "system,interfaces,routes,firewall,tunnels" {
		t.Errorf("changed sections = %s", got)
	}
	info = mustCommit(t, s, "bob", "rename", func(c *Config) { c.System.Hostname = "renamed" })
	if joined(info.Sections) != "system" {
		t.Errorf("hostname change reported sections %v, want [system]", info.Sections)
	}
	h, err := s.History()
	if err != nil || len(h) != 3 || h[0].Revision != 3 || h[2].Revision != 1 {
		t.Fatalf("history = %+v, %v; want revisions 3,2,1", h, err)
	}
	old, _, err := s.Revision(2)
	if err != nil || old.System.Hostname != "hub" {
		t.Fatalf("revision 2 hostname = %v, %v; want hub", old, err)
	}
	if _, err := s.Commit("bob", "nothing"); !errors.Is(err, ErrNoChanges) {
		t.Errorf("empty commit: %v, want ErrNoChanges", err)
	}
}

func TestCommitRefusesInvalidCandidate(t *testing.T) {
	s := openTest(t, "", nil)
	if _, err := s.SetPath("", "system.hostname", "-bad-"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Commit("alice", "bad")
	var ve ValidationErrors
	if !errors.As(err, &ve) || ve[0].Path != "system.hostname" {
		t.Fatalf("commit of invalid candidate: %v; want a validation error at system.hostname", err)
	}
	if hostname(s) != "flashgate" {
		t.Errorf("running changed by a refused commit")
	}
}

func TestRollback(t *testing.T) {
	s := openTest(t, "", nil)
	mustCommit(t, s, "a", "one", func(c *Config) { c.System.Hostname = "one" })
	mustCommit(t, s, "a", "two", func(c *Config) { c.System.Hostname = "two" })
	info, err := s.Rollback(2, "carol")
	if err != nil {
		t.Fatal(err)
	}
	if info.Revision != 4 || info.Reason != "rollback" || hostname(s) != "one" {
		t.Errorf("rollback: %+v hostname %q; want revision 4, hostname one", info, hostname(s))
	}
	if c, _ := s.Candidate(); c.System.Hostname != "one" {
		t.Errorf("candidate after rollback has hostname %q, want one", c.System.Hostname)
	}
	if _, err := s.Rollback(99, "carol"); !errors.Is(err, ErrNoRevision) {
		t.Errorf("rollback to a missing revision: %v", err)
	}
}

func TestHistoryIsBounded(t *testing.T) {
	s, path := openWithHistory(t, 5)
	for i := range 40 {
		mustCommit(t, s, "a", "n", func(c *Config) { c.System.Hostname = fmt.Sprint("h", i) })
		h, _ := s.History()
		if want := min(i+2, 5); len(h) != want || h[0].Revision != uint64(i+2) {
			t.Fatalf("history after %d commits with limit 5: %d entries, newest %d; want %d, %d", i+1, len(h), h[0].Revision, want, i+2)
		}
	}
	s.Close()
	// On disk: never more than the limit plus one trim batch.
	viewDB(t, path, func(tx *bolt.Tx) {
		if n := tx.Bucket(bucketRevisions).Stats().KeyN; n > 5+trimBatch {
			t.Errorf("%d revisions stored with limit 5", n)
		}
	})
}

// viewDB opens the closed database at path read-only and runs f in a read
// transaction: what is on disk, not what the store says.
func viewDB(t *testing.T, path string, f func(tx *bolt.Tx)) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error { f(tx); return nil })
}

func TestTwoWriters(t *testing.T) {
	s := openTest(t, "", nil)
	_, etagA := s.Candidate()
	_, etagB := s.Candidate()
	etagA2, err := s.SetPath(etagA, "system.hostname", "alice-box")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetPath(etagB, "system.hostname", "bob-box"); !errors.Is(err, ErrCandidateChanged) {
		t.Fatalf("stale set: %v, want %v", err, ErrCandidateChanged)
	}
	if _, err := s.CommitWith(CommitOptions{Who: "bob", Etag: etagB}); !errors.Is(err, ErrCandidateChanged) {
		t.Fatalf("stale commit: %v, want %v", err, ErrCandidateChanged)
	}
	if _, err := s.CommitWith(CommitOptions{Who: "alice", Etag: etagA2}); err != nil {
		t.Fatal(err)
	}

	// Many writers racing: each reads, edits and commits with its etag.
	// Every commit that succeeds must be one whose etag was current.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, etag := s.Candidate()
			etag2, err := s.SetPath(etag, "system.hostname", "w"+string(rune('a'+i)))
			if err != nil {
				return
			}
			if _, err := s.CommitWith(CommitOptions{Who: "w", Etag: etag2}); err == nil {
				mu.Lock()
				won++
				mu.Unlock()
			} else if !errors.Is(err, ErrCandidateChanged) {
				t.Errorf("racing commit: %v", err)
			}
		}()
	}
	wg.Wait()
	if won == 0 {
		t.Error("no racing writer committed")
	}
	c, _ := s.Running()
	cand, _ := s.Candidate()
	if c.System.Hostname != cand.System.Hostname && won > 0 {
		// The last winner's hostname is running; a later loser may
		// only have changed the candidate, which is allowed.
		t.Logf("running %s, candidate %s", c.System.Hostname, cand.System.Hostname)
	}
}

func TestCommitConfirmed(t *testing.T) {
	clock := newFakeClock()
	s := openTest(t, "", clock)
	mustCommit(t, s, "a", "base", func(c *Config) { c.System.Hostname = "base" })

	// Confirmed in time: stays.
	s.SetPath("", "system.hostname", "kept")
	if _, err := s.CommitConfirmed("a", "try", 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	clock.Advance(4 * time.Minute)
	if err := s.Confirm(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Minute)
	if hostname(s) != "kept" || s.Pending() != nil {
		t.Fatalf("confirmed commit: hostname %q pending %v; want kept, nil", hostname(s), s.Pending())
	}
	if err := s.Confirm(); !errors.Is(err, ErrNothingPending) {
		t.Errorf("second confirm: %v", err)
	}

	// Not confirmed: rolls back by itself and tells subscribers.
	ch, cancel := s.Subscribe()
	defer cancel()
	s.SetPath("", "system.hostname", "lost")
	info, err := s.CommitConfirmed("a", "risky", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	<-ch // the commit itself
	clock.Advance(5*time.Minute + time.Second)
	if hostname(s) != "kept" {
		t.Fatalf("after the window: hostname %q, want kept", hostname(s))
	}
	select {
	case c := <-ch:
		if c.Reason != "confirm-timeout" || c.Revision != info.Revision+1 {
			t.Errorf("change after timeout = %+v", c)
		}
	default:
		t.Error("no change notice for the automatic rollback")
	}
}

func TestCommitConfirmedExtendedKeepsOriginalRollbackTarget(t *testing.T) {
	clock := newFakeClock()
	s := openTest(t, "", clock)
	mustCommit(t, s, "a", "base", func(c *Config) { c.System.Hostname = "base" })
	s.SetPath("", "system.hostname", "first")
	s.CommitConfirmed("a", "1", time.Minute)
	s.SetPath("", "system.hostname", "second")
	s.CommitConfirmed("a", "2", time.Minute)
	clock.Advance(2 * time.Minute)
	if hostname(s) != "base" {
		t.Fatalf("after two unconfirmed commits: hostname %q, want base", hostname(s))
	}
}

func TestCommitConfirmedSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.db")
	clock := newFakeClock()
	s := openTest(t, path, clock)
	mustCommit(t, s, "a", "base", func(c *Config) { c.System.Hostname = "base" })
	s.SetPath("", "system.hostname", "risky")
	if _, err := s.CommitConfirmed("a", "risky", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Restart inside the window: the unconfirmed config runs, and the
	// timer is armed again for the rest of the window.
	clock.Advance(4 * time.Minute)
	s2 := openTest(t, path, clock)
	if hostname(s2) != "risky" || s2.Pending() == nil {
		t.Fatalf("reopened inside the window: hostname %q pending %v", hostname(s2), s2.Pending())
	}
	clock.Advance(5 * time.Minute)
	if hostname(s2) != "risky" {
		t.Fatalf("rolled back before the deadline")
	}
	clock.Advance(2 * time.Minute)
	if hostname(s2) != "base" || s2.Pending() != nil {
		t.Fatalf("after the deadline: hostname %q pending %v; want base, nil", hostname(s2), s2.Pending())
	}
	s2.Close()

	// Reboot past the deadline: Open rolls back before anyone reads.
	s3 := openTest(t, path, clock)
	s3.SetPath("", "system.hostname", "risky2")
	s3.CommitConfirmed("a", "risky2", time.Minute)
	s3.Close()
	clock.Advance(time.Hour)
	s4 := openTest(t, path, clock)
	if hostname(s4) != "base" || s4.Pending() != nil {
		t.Fatalf("opened after the deadline: hostname %q pending %v; want base, nil", hostname(s4), s4.Pending())
	}
	h, _ := s4.History()
	if h[0].Reason != "confirm-timeout" {
		t.Errorf("newest revision reason %q, want confirm-timeout", h[0].Reason)
	}
}

func TestCommitConfirmedAfterRebootWithClockInThePast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.db")
	clock := newFakeClock()
	s := openTest(t, path, clock)
	mustCommit(t, s, "a", "base", func(c *Config) { c.System.Hostname = "base" })
	s.SetPath("", "system.hostname", "risky")
	s.CommitConfirmed("a", "", 5*time.Minute)
	s.Close()
	// The box reboots without a real-time clock: it thinks it is 1970.
	early := &fakeClock{now: time.Unix(0, 0)}
	s2 := openTest(t, path, early)
	early.Advance(5*time.Minute + time.Second)
	if hostname(s2) != "base" {
		t.Fatalf("with the clock in 1970 the rollback did not come within the window: hostname %q", hostname(s2))
	}
}

func TestPlainCommitConfirmsPending(t *testing.T) {
	clock := newFakeClock()
	s := openTest(t, "", clock)
	s.SetPath("", "system.hostname", "a1")
	s.CommitConfirmed("a", "", time.Minute)
	s.SetPath("", "system.hostname", "a2")
	if _, err := s.Commit("a", ""); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if hostname(s) != "a2" || s.Pending() != nil {
		t.Fatalf("hostname %q pending %v; a plain commit should confirm", hostname(s), s.Pending())
	}
}

func TestFactoryReset(t *testing.T) {
	s := openTest(t, "", nil)
	mustCommit(t, s, "a", "x", func(c *Config) { *c = *sampleConfig(2) })
	info, err := s.FactoryReset("admin")
	if err != nil {
		t.Fatal(err)
	}
	c, rev := s.Running()
	h, _ := s.History()
	if rev != info.Revision || rev != 3 || len(c.Tunnels) != 0 || len(c.System.Admins) != 0 || len(h) != 1 {
		t.Fatalf("after reset: revision %d, %d tunnels, %d admins, %d history entries", rev, len(c.Tunnels), len(c.System.Admins), len(h))
	}
}

func TestCorruptDatabaseIsSetAside(t *testing.T) {
	tests := []struct {
		name  string
		write func(t *testing.T, path string)
		why   string
	}{
		{"garbage", func(t *testing.T, path string) {
			os.WriteFile(path, bytes.Repeat([]byte("not a database "), 1000), 0o600)
		}, "not a database file"},
		{"foreign bbolt", func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			db.Update(func(tx *bolt.Tx) error {
				b, _ := tx.CreateBucket([]byte("someone-else"))
				return b.Put([]byte("k"), []byte("v"))
			})
			db.Close()
		}, "not a flashgate config database"},
		{"newer schema", func(t *testing.T, path string) {
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			db, _ := bolt.Open(path, 0o600, nil)
			db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, []byte("99")) })
			db.Close()
		}, "schema version 99"},
		{"damaged pages", func(t *testing.T, path string) {
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			f, _ := os.OpenFile(path, os.O_RDWR, 0)
			st, _ := f.Stat()
			// Keep the two meta pages, trash everything after.
			f.WriteAt(bytes.Repeat([]byte{0xA5}, int(st.Size())-8192), 8192)
			f.Close()
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "config.db")
			tt.write(t, path)
			orig, _ := os.ReadFile(path)
			s := openTest(t, path, nil)
			if s.Recovered() == "" || !strings.Contains(s.Recovered(), tt.why) {
				t.Fatalf("Recovered() = %q, want a reason containing %q", s.Recovered(), tt.why)
			}
			if hostname(s) != "flashgate" {
				t.Errorf("not on defaults after recovery")
			}
			aside, _ := filepath.Glob(path + ".set-aside-*")
			if len(aside) != 1 {
				t.Fatalf("set-aside files: %v, want one", aside)
			}
			kept, _ := os.ReadFile(aside[0])
			if !bytes.Equal(kept, orig) {
				t.Errorf("the set-aside file differs from the original")
			}
		})
	}
}

func TestSetAsideNeverOverwrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.db")
	clock := newFakeClock() // the same second every time
	for i := range 3 {
		os.WriteFile(path, bytes.Repeat([]byte{byte('a' + i)}, 8192), 0o600)
		s := openTest(t, path, clock)
		s.Close()
	}
	aside, _ := filepath.Glob(path + ".set-aside-*")
	if len(aside) != 3 {
		t.Fatalf("three corrupt files in one second left %d set-aside files: %v", len(aside), aside)
	}
}

func TestEmptyFileIsInitialized(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.db")
	os.WriteFile(path, nil, 0o600)
	s := openTest(t, path, nil)
	if s.Recovered() != "" || hostname(s) != "flashgate" {
		t.Fatalf("empty file: recovered %q, hostname %q", s.Recovered(), hostname(s))
	}
	if aside, _ := filepath.Glob(path + ".set-aside-*"); len(aside) != 0 {
		t.Errorf("an empty file was set aside: %v", aside)
	}
}

func TestLockedDatabaseIsNotSetAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.db")
	s := openTest(t, path, nil)
	s.Close()
	db, err := bolt.Open(path, 0o600, nil) // holds the exclusive lock
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = Open(path, Options{LockTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("Open of a locked file: %v, want a lock error", err)
	}
	if aside, _ := filepath.Glob(path + ".set-aside-*"); len(aside) != 0 {
		t.Errorf("a locked database was set aside: %v", aside)
	}
}

type countingCard struct {
	mu          sync.Mutex
	begin, end  int
	writable    bool
	failOnBegin bool
}

func (c *countingCard) BeginWrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failOnBegin {
		return errors.New("remount failed")
	}
	c.begin++
	c.writable = true
	return nil
}

func (c *countingCard) EndWrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.end++
	c.writable = false
	return nil
}

func TestCardIsWritableOnlyDuringWrites(t *testing.T) {
	card := &countingCard{}
	s, err := Open(filepath.Join(t.TempDir(), "config.db"), Options{Card: card})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetPath("", "system.hostname", "x") // candidate only: no write
	if card.begin != 1 {
		t.Fatalf("writes before commit: %d, want 1 (initialization)", card.begin)
	}
	if _, err := s.Commit("a", ""); err != nil {
		t.Fatal(err)
	}
	if card.begin != 2 || card.end != 2 || card.writable {
		t.Fatalf("card begin/end %d/%d writable %v; want 2/2 false", card.begin, card.end, card.writable)
	}
	card.failOnBegin = true
	s.SetPath("", "system.hostname", "y")
	if _, err := s.Commit("a", ""); err == nil || !strings.Contains(err.Error(), "make the card writable") {
		t.Fatalf("commit with a failing card: %v", err)
	}
	if hostname(s) != "x" {
		t.Errorf("running changed although the card write failed")
	}
}

func TestSubscriberSeesSections(t *testing.T) {
	s := openTest(t, "", nil)
	ch, cancel := s.Subscribe()
	mustCommit(t, s, "a", "fw", func(c *Config) {
		c.Firewall.Rules = append(c.Firewall.Rules, Rule{Name: "r", Enabled: true, Chain: ChainInput, Protocol: "any", Action: ActionDrop})
	})
	c := <-ch
	if joined(c.Sections) != "firewall" || c.Revision != 2 {
		t.Errorf("change = %v", c)
	}
	cancel()
	if _, ok := <-ch; ok {
		t.Error("channel open after cancel")
	}
}
