package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// handOffStore is a store as a box upgraded from format 2 has it: the
// format 2 fixture's records (revisions 1 to 4), the rollback the
// expired confirmation made under format 3 (5), and format 3 commits of a
// configuration large enough to be cut into several parts, one of them a
// rollback that shares its parts with an older revision.
func handOffStore(t *testing.T) (*Store, string, *fakeClock) {
	t.Helper()
	path := copyV2Fixture(t)
	clock := newFakeClock()
	clock.Advance(3 * time.Hour) // the fixture's confirmation window closed
	s := openTest(t, path, clock)
	mustCommit(t, s, "admin", "forty branches", func(c *Config) {
		big := sampleConfig(40)
		c.Tunnels = big.Tunnels
	})
	mustCommit(t, s, "admin", "site07 moved", func(c *Config) { c.Tunnels[7].RemoteAddress = MustAddr("198.51.100.77") })
	mustCommit(t, s, "admin", "renamed", func(c *Config) { c.System.Hostname = "fmt3box" })
	if _, err := s.Rollback(7, "admin"); err != nil {
		t.Fatal(err)
	}
	return s, path, clock
}

// revisionsOf reads every revision of the database at path with the
// current code: info and configuration.
func revisionsOf(t *testing.T, path string) ([]RevisionInfo, map[uint64]*Config, uint64) {
	t.Helper()
	s := openTest(t, path, nil)
	defer s.Close()
	h, err := s.History()
	if err != nil {
		t.Fatal(err)
	}
	cfgs := map[uint64]*Config{}
	for _, info := range h {
		c, _, err := s.Revision(info.Revision)
		if err != nil {
			t.Fatalf("revision %d: %v", info.Revision, err)
		}
		cfgs[info.Revision] = c
	}
	_, rev := s.Running()
	return h, cfgs, rev
}

func TestHandOffWritesFormat2(t *testing.T) {
	s, path, _ := handOffStore(t)
	wantRunning, wantRev := s.Running()
	wantHistory, err := s.History()
	if err != nil {
		t.Fatal(err)
	}
	wantCfgs := map[uint64]*Config{}
	for _, info := range wantHistory {
		c, _, err := s.Revision(info.Revision)
		if err != nil {
			t.Fatal(err)
		}
		wantCfgs[info.Revision] = c
	}
	info, err := s.HandOff(SchemaVersion)
	if err != nil {
		t.Fatalf("HandOff: %v", err)
	}
	if info.Revision != wantRev {
		t.Fatalf("HandOff returned revision %d, running is %d", info.Revision, wantRev)
	}
	// The store writes nothing more: the file is the other firmware's.
	if _, err := s.EditCandidate("", func(c *Config) error { c.System.Hostname = "late"; return nil }); !errors.Is(err, ErrHandedOff) {
		t.Fatalf("edit after the hand-off: %v, want ErrHandedOff", err)
	}
	if _, err := s.Rollback(2, "admin"); !errors.Is(err, ErrHandedOff) {
		t.Fatalf("rollback after the hand-off: %v, want ErrHandedOff", err)
	}
	if _, err := s.FactoryReset("admin"); !errors.Is(err, ErrHandedOff) {
		t.Fatalf("factory reset after the hand-off: %v, want ErrHandedOff", err)
	}
	if c, _ := s.Running(); !reflect.DeepEqual(c, wantRunning) {
		t.Fatal("the running configuration in memory changed")
	}
	if _, err := os.Stat(path + ".format2"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the temporary copy is left: %v", err)
	}
	s.Close()

	checkFormat2Layout(t, path, wantRev)

	// This firmware, when the box comes back to it, opens the file as a
	// format 2 database and loses nothing.
	gotHistory, gotCfgs, gotRev := revisionsOf(t, path)
	if gotRev != wantRev {
		t.Fatalf("running revision %d after the round trip, want %d", gotRev, wantRev)
	}
	if !reflect.DeepEqual(gotHistory, wantHistory) {
		t.Fatalf("history after the round trip:\n%+v\nwant\n%+v", gotHistory, wantHistory)
	}
	for rev, want := range wantCfgs {
		if !reflect.DeepEqual(gotCfgs[rev], want) {
			t.Errorf("revision %d differs after the round trip", rev)
		}
	}
	s2 := openTest(t, path, nil)
	if got := mustCommit(t, s2, "admin", "back on format 3", func(c *Config) { c.System.Hostname = "back" }); got.Revision != wantRev+1 {
		t.Fatalf("the next commit is revision %d, want %d", got.Revision, wantRev+1)
	}
}

// checkFormat2Layout holds the file at path to what the format 2 store
// wrote (testdata/v2.db, written by that firmware's code): the same
// buckets, the same meta keys with schema "2", and records whose header
// has exactly the fields of the fixture's and whose body is the whole
// document DEFLATEd.
func checkFormat2Layout(t *testing.T, path string, running uint64) {
	t.Helper()
	layout := func(path string) (buckets, metaKeys []string, hdrKeys map[string]bool, schema string) {
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		hdrKeys = map[string]bool{}
		db.View(func(tx *bolt.Tx) error {
			tx.ForEach(func(name []byte, _ *bolt.Bucket) error { buckets = append(buckets, string(name)); return nil })
			meta := tx.Bucket(bucketMeta)
			meta.ForEach(func(k, _ []byte) error {
				if string(k) != string(keyPending) {
					metaKeys = append(metaKeys, string(k))
				}
				return nil
			})
			schema = string(meta.Get(keySchema))
			return tx.Bucket(bucketRevisions).ForEach(func(k, rec []byte) error {
				hdr, body, err := splitRecord(rec)
				if err != nil {
					t.Fatalf("%s: record %x: %v", path, k, err)
				}
				var fields map[string]json.RawMessage
				if err := json.Unmarshal(hdr, &fields); err != nil {
					t.Fatalf("%s: record %x header: %v", path, k, err)
				}
				for f := range fields {
					hdrKeys[f] = true
				}
				doc, err := inflateAppend(nil, body, MaxDocumentSize+1)
				if err != nil {
					t.Fatalf("%s: record %x does not inflate: %v", path, k, err)
				}
				if _, err := Decode(doc); err != nil {
					t.Fatalf("%s: record %x: %v", path, k, err)
				}
				return nil
			})
		})
		return
	}
	wb, wm, wh, ws := layout(filepath.Join("testdata", "v2.db"))
	gb, gm, gh, gs := layout(path)
	if ws != "2" || gs != "2" {
		t.Fatalf("schema key %q, the fixture's %q", gs, ws)
	}
	if !slices.Equal(gb, wb) || !slices.Equal(gm, wm) || !reflect.DeepEqual(gh, wh) {
		t.Fatalf("layout differs from format 2's:\nbuckets %v, want %v\nmeta keys %v, want %v\nrecord header fields %v, want %v", gb, wb, gm, wm, gh, wh)
	}
	// The current code classifies it as format 2 (it would migrate it),
	// not as its own format.
	st := &Store{path: path, opts: Options{Logf: func(string, ...any) {}, LockTimeout: time.Second}}
	state, why, found, err := st.inspect()
	if err != nil || state != stateV2 || found == nil || found.rev != running {
		t.Fatalf("inspect: state %d (%s), %v", state, why, err)
	}
}

func TestHandOffRefusesNewerSchemaAndPending(t *testing.T) {
	s, path, _ := handOffStore(t)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.HandOff(SchemaVersion - 1); err == nil || !strings.Contains(err.Error(), "schema") {
		t.Fatalf("HandOff to firmware reading schema %d: %v, want a refusal naming the schema", SchemaVersion-1, err)
	}
	if _, err := s.EditCandidate("", func(c *Config) error { c.System.Hostname = "trial"; return nil }); err != nil {
		t.Fatalf("the store refused an edit after a refused hand-off: %v", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("a refused hand-off changed the database")
	}
	if _, err := s.CommitConfirmed("admin", "try", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.HandOff(SchemaVersion); err == nil || !strings.Contains(err.Error(), "confirm") {
		t.Fatalf("HandOff with a commit waiting for confirmation: %v, want a refusal", err)
	}
	if err := s.Confirm(); err != nil {
		t.Fatalf("confirm after the refused hand-off: %v", err)
	}
	if _, err := s.HandOff(SchemaVersion); err != nil {
		t.Fatal(err)
	}
}

// TakeBack, when the switch did not happen, makes the database format 3
// again and the store writes again, with nothing lost.
func TestHandOffTakeBack(t *testing.T) {
	s, path, _ := handOffStore(t)
	_, rev := s.Running()
	if err := s.TakeBack(); err != nil { // nothing handed off: nothing to do
		t.Fatal(err)
	}
	if _, err := s.HandOff(SchemaVersion); err != nil {
		t.Fatal(err)
	}
	if err := s.TakeBack(); err != nil {
		t.Fatal(err)
	}
	info := mustCommit(t, s, "admin", "after the take-back", func(c *Config) { c.System.Hostname = "taken-back" })
	if info.Revision != rev+1 {
		t.Fatalf("commit after the take-back is revision %d, want %d", info.Revision, rev+1)
	}
	s.Close()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		if v := string(tx.Bucket(bucketMeta).Get(keySchema)); v != fmt.Sprint(dbFormat) || tx.Bucket(bucketParts) == nil {
			t.Errorf("after the take-back: schema %q, parts bucket %v", v, tx.Bucket(bucketParts) != nil)
		}
		return nil
	})
}

// oldFirmware is the last commit whose config package wrote database
// format 2 (testdata/v2.db was written by it).
const oldFirmware = "d14c125"

// TestFormat2FirmwareReadsHandOff builds the format 2 firmware's own
// config package from the repository's history and opens the handed-off
// database with it: the proof that the firmware in the other slot reads it,
// rather than that it looks like what that firmware wrote.
func TestFormat2FirmwareReadsHandOff(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the format 2 firmware's config package from git")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("git", "-C", root, "cat-file", "-e", oldFirmware+"^{commit}").Run(); err != nil {
		t.Skipf("commit %s is not in this checkout's history: %v", oldFirmware, err)
	}
	old := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" go.mod go.sum config boards internal kernel | tar -x -C "$3"`, "sh", root, oldFirmware, old)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("extract %s: %v\n%s", oldFirmware, err, out)
	}
	if err := os.MkdirAll(filepath.Join(old, "cmd", "readdb"), 0o755); err != nil {
		t.Fatal(err)
	}
	const reader = `package main

import (
	"encoding/json"
	"os"

	"github.com/flashgate/flashgate/config"
)

// Opens the database as that firmware's configd does and prints what it found.
func main() {
	s, err := config.Open(os.Args[1], config.Options{})
	if err != nil {
		panic(err)
	}
	c, rev := s.Running()
	h, err := s.History()
	if err != nil {
		panic(err)
	}
	out := map[string]any{"recovered": s.Recovered(), "running": rev, "hostname": c.System.Hostname, "tunnels": len(c.Tunnels)}
	var revs []uint64
	for _, info := range h {
		if _, _, err := s.Revision(info.Revision); err != nil {
			panic(err)
		}
		revs = append(revs, info.Revision)
	}
	out["revisions"] = revs
	if len(os.Args) > 2 {
		// Runs there and commits, as the admin would before switching back.
		if _, err := s.EditCandidate("", func(c *config.Config) error { c.System.Hostname = os.Args[2]; return nil }); err != nil {
			panic(err)
		}
		info, err := s.Commit("admin", "under the format 2 firmware")
		if err != nil {
			panic(err)
		}
		out["committed"] = info.Revision
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
`
	if err := os.WriteFile(filepath.Join(old, "cmd", "readdb", "main.go"), []byte(reader), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(old, "readdb")
	build := exec.Command("go", "build", "-o", bin, "./cmd/readdb")
	build.Dir = old
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the format 2 firmware's reader: %v\n%s", err, out)
	}

	s, path, _ := handOffStore(t)
	wantRunning, wantRev := s.Running()
	h, _ := s.History()
	if _, err := s.HandOff(SchemaVersion); err != nil {
		t.Fatal(err)
	}
	s.Close()
	out, err := exec.Command(bin, path).Output()
	if err != nil {
		t.Fatalf("the format 2 firmware could not open the handed-off database: %v\n%s", err, out)
	}
	var got struct {
		Recovered string   `json:"recovered"`
		Running   uint64   `json:"running"`
		Hostname  string   `json:"hostname"`
		Tunnels   int      `json:"tunnels"`
		Revisions []uint64 `json:"revisions"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var wantRevs []uint64
	for _, info := range h {
		wantRevs = append(wantRevs, info.Revision)
	}
	want := fmt.Sprintf("running %d %s %d tunnels, revisions %v", wantRev, wantRunning.System.Hostname, len(wantRunning.Tunnels), wantRevs)
	if gotS := fmt.Sprintf("running %d %s %d tunnels, revisions %v", got.Running, got.Hostname, got.Tunnels, got.Revisions); got.Recovered != "" || gotS != want {
		t.Fatalf("the format 2 firmware read: %s (recovered %q)\nwant %s", gotS, got.Recovered, want)
	}
	// It commits there; back on this firmware (the admin switches back,
	// or its test boot failed and the copy its PID 1 took comes back)
	// the database has every revision and the old firmware's commit.
	out, err = exec.Command(bin, path, "under-v2").Output()
	if err != nil {
		t.Fatalf("the format 2 firmware could not commit: %v\n%s", err, out)
	}
	var committed struct {
		Committed uint64 `json:"committed"`
	}
	json.Unmarshal(out, &committed)
	if committed.Committed != wantRev+1 {
		t.Fatalf("the format 2 firmware committed revision %d, want %d: %s", committed.Committed, wantRev+1, out)
	}
	back := openTest(t, path, nil)
	if c, rev := back.Running(); rev != committed.Committed || c.System.Hostname != "under-v2" || len(c.Tunnels) != len(wantRunning.Tunnels) {
		t.Fatalf("back on format 3: revision %d, host %q", rev, c.System.Hostname)
	}
	backHistory, err := back.History()
	if err != nil || len(backHistory) != len(h)+1 {
		t.Fatalf("back on format 3: %d revisions (%v), want %d", len(backHistory), err, len(h)+1)
	}
	for _, info := range h {
		if _, _, err := back.Revision(info.Revision); err != nil {
			t.Fatalf("back on format 3: revision %d: %v", info.Revision, err)
		}
	}
	mustCommit(t, back, "admin", "format 3 again", func(c *Config) { c.System.Hostname = "fmt3-again" })
	back.Close()

	// And the new format's file, for contrast, is what it sets aside.
	s3, path3, _ := handOffStore(t)
	s3.Close()
	out, err = exec.Command(bin, path3).Output()
	if err != nil || !strings.Contains(string(out), "not one this firmware reads") {
		t.Fatalf("the format 2 firmware on a format 3 database: %v %s; the oracle does not tell the formats apart", err, out)
	}
}

const handOffPowerLossEnv = "FLASHGATE_HANDOFF_POWERLOSS_DB"

// handOffPowerLossHelper hands the database off and takes it back (opens
// it again, which turns format 2 into format 3) in a loop, saying when it
// starts and ends each hand-off; it never returns.
func handOffPowerLossHelper(path string) {
	fmt.Println("ready")
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		s, err := Open(path, Options{LockTimeout: 5 * time.Second})
		if err != nil {
			fmt.Printf("error %v\n", err)
			os.Exit(2)
		}
		fmt.Println("handing")
		if _, err := s.HandOff(SchemaVersion); err != nil {
			fmt.Printf("error %v\n", err)
			os.Exit(2)
		}
		fmt.Println("handed")
		s.Close()
	}
	os.Exit(0)
}

// A process killed at any moment of a hand-off, or of taking the database
// back, leaves a database this firmware opens without setting it aside,
// with the same running configuration and the same history (and so, after
// a completed hand-off, the one the older firmware gets), and no
// half-written copy once it is opened.
func TestHandOffPowerLoss(t *testing.T) {
	if path := os.Getenv(handOffPowerLossEnv); path != "" {
		handOffPowerLossHelper(path)
	}
	rounds := 30
	if testing.Short() {
		rounds = 8
	}
	path := filepath.Join(t.TempDir(), "config.db")
	s := openTest(t, path, nil)
	for i := range 6 {
		mustCommit(t, s, "admin", fmt.Sprint("step ", i), func(c *Config) {
			big := sampleConfig(150 + 10*i)
			c.Tunnels = big.Tunnels
			c.System.Hostname = fmt.Sprintf("h%d", i)
		})
	}
	c, wantRev := s.Running()
	want := configHash(c)
	wantHistory, err := s.History()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	rng := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
	inside, leftover := 0, 0
	for round := range rounds {
		cmd, lines := startWriter(t, round, "TestHandOffPowerLoss", handOffPowerLossEnv, path)
		time.Sleep(time.Duration(rng.IntN(1_500_000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		handing := false
		for l := range lines {
			switch {
			case l == "handing":
				handing = true
			case l == "handed":
				handing = false
			case strings.HasPrefix(l, "error"):
				t.Fatalf("round %d: helper: %s", round, l)
			}
		}
		cmd.Wait()
		if handing {
			inside++
		}
		if _, err := os.Stat(path + ".format2"); err == nil {
			leftover++
		}
		s, err := Open(path, Options{})
		if err != nil {
			t.Fatalf("round %d: open after the kill: %v", round, err)
		}
		if s.Recovered() != "" {
			t.Fatalf("round %d: set aside after the kill: %s", round, s.Recovered())
		}
		c, rev := s.Running()
		h, err := s.History()
		s.Close()
		if err != nil || rev != wantRev || configHash(c) != want || !reflect.DeepEqual(h, wantHistory) {
			t.Fatalf("round %d: running revision %d (%s), %d revisions (%v); want %d (%s), %d", round, rev, configHash(c), len(h), err, wantRev, want, len(wantHistory))
		}
		if _, err := os.Stat(path + ".format2"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("round %d: the half-written copy is still there after an open: %v", round, err)
		}
	}
	t.Logf("%d kills, %d inside a hand-off, %d left a half-written copy", rounds, inside, leftover)
	if inside == 0 {
		t.Errorf("no kill landed inside a hand-off: the test proved nothing")
	}
}
