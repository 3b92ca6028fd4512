package config

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	mathrand "math/rand/v2"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// The database (format 3) holds three buckets:
//
//	flashgate   schema   "3": the database format (dbFormat)
//	            running  revision number of the running config (8 bytes, big endian)
//	            next     next revision number
//	            pending  commit-confirmed state, JSON, absent when none
//	revisions   <rev, 8 bytes big endian> -> record (see revision.go)
//	parts       <rev, 8 bytes | n, 4 bytes> -> a part of a configuration document (see parts.go)
//
// The running config is the record of the running revision. A commit
// writes the parts of the document that no revision holds yet (for a small
// change, one or two), one record listing the parts and two small keys, so
// a small change to a large config writes a few pages. The candidate lives
// in memory only: the card is written on commit and at no other time, and
// an edit that was never committed does not survive a reboot (as on VyOS).
//
// Format 2, the previous firmware's, had no parts bucket and whole
// documents in its records; Open turns it into format 3 by adding the
// bucket (its records stay as they are and are still read). Up to format 2
// the schema key held the config's SchemaVersion, which was the same
// number; the two now count separately.
var (
	bucketMeta      = []byte("flashgate")
	bucketRevisions = []byte("revisions")
	keySchema       = []byte("schema")
	keyRunning      = []byte("running")
	keyNext         = []byte("next")
	keyPending      = []byte("pending")
)

// dbFormat is the database layout this firmware writes (the meta bucket's
// schema key). Firmware that writes format 2 sets a format 3 database
// aside as "not one this firmware reads" and starts from the defaults; an
// upgrade's fallback to the old slot puts the pre-upgrade copy back first
// (docs/upgrade.md).
const dbFormat = 3

// Errors a caller may want to tell apart.
var (
	// ErrCandidateChanged: another writer changed the candidate after the
	// caller read it; re-read, re-apply, retry.
	ErrCandidateChanged = errors.New("the candidate changed since you read it")
	ErrNoChanges        = errors.New("no changes to commit")
	ErrNothingPending   = errors.New("no commit is waiting for confirmation")
	ErrNoRevision       = errors.New("no such revision")
	ErrClosed           = errors.New("config store is closed")
)

// Card is the storage the database lives on. configd's implementation
// remounts the config partition read-write for the duration of a write and
// read-only after it, so that the card is protected between commits.
type Card interface {
	BeginWrite() error
	EndWrite() error
}

// NoCard is a Card for files on a normal writable file system (tests, host
// use): it does nothing.
type NoCard struct{}

func (NoCard) BeginWrite() error { return nil }
func (NoCard) EndWrite() error   { return nil }

// Clock is the time source; tests replace it to step through a
// commit-confirmed window without waiting.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is what Clock.AfterFunc returns.
type Timer interface{ Stop() bool }

type systemClock struct{}

func (systemClock) Now() time.Time                            { return time.Now() }
func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Options configure Open. The zero value works on a writable file system.
type Options struct {
	Card         Card          // default NoCard
	Clock        Clock         // default the system clock
	HistoryLimit int           // revisions kept; default 50
	LockTimeout  time.Duration // waiting for the database file lock; default 5s
	// Defaults returns the configuration of a fresh database and of a
	// factory reset; default Default.
	Defaults func() *Config
	// Logf reports what the store did by itself (a rollback on a missed
	// confirmation, a database set aside). Default: discard.
	Logf func(format string, args ...any)
}

// Store is the configuration database: the running configuration with its
// history on the card, and the candidate being edited in memory. It is safe
// for concurrent use; writes are serialized.
type Store struct {
	path string
	opts Options

	mu           sync.Mutex
	closed       bool
	running      *Config
	runningRev   uint64
	runningEnc   encoded // running's JSON, once a commit needed it
	candidate    *Config
	candidateEnc encoded // candidate's JSON, when an edit encoded it
	etagBase     string
	etagSeq      uint64
	pending      *Pending
	timer        Timer
	recovered    string
	subs         map[chan Change]struct{}
	// handedOff: HandOff rewrote the file for the other slot's firmware;
	// every write is refused from then on (the file is not one this
	// store writes to any more). Reads go on from memory.
	handedOff bool
}

// Pending is a commit waiting for Confirm.
type Pending struct {
	Revision   uint64    `json:"revision"`    // the unconfirmed commit
	RollbackTo uint64    `json:"rollback_to"` // restored when the deadline passes
	Deadline   time.Time `json:"deadline"`
	// Window is the timeout asked for; after a restart the rollback waits
	// at most this long even if the clock says the deadline is far off.
	Window time.Duration `json:"window"`
	Who    string        `json:"who"`
}

// Change tells subscribers that the running configuration changed.
type Change struct {
	Revision uint64    `json:"revision"`
	Sections []Section `json:"sections"` // see Sections
	Reason   string    `json:"reason"`   // commit, rollback, confirm-timeout, factory-reset
	Who      string    `json:"who"`
	Message  string    `json:"message"`
	When     time.Time `json:"when"`
}

// Touches reports whether the change concerns one of sections. The first
// change of every watch connection ("current") lists them all.
func (c Change) Touches(sections ...Section) bool {
	for _, s := range c.Sections {
		if slices.Contains(sections, s) {
			return true
		}
	}
	return false
}

func (c Change) String() string {
	return fmt.Sprintf("commit %d changed %v (%s by %s)", c.Revision, c.Sections, c.Reason, c.Who)
}

// Open opens the database at path, creating it with the defaults if it does
// not exist, migrating it if it is of an older schema, and rolling back a
// commit whose confirmation deadline passed while the store was closed.
//
// A file that is not a flashgate database, is corrupt, or was written by a
// newer firmware is never overwritten: it is renamed to
// "<path>.set-aside-<time>", a fresh database with the defaults takes its
// place, and Recovered says what happened. Open fails only when the file
// cannot be locked (another process has it) or the card cannot be written.
func Open(path string, opts Options) (*Store, error) {
	if opts.Card == nil {
		opts.Card = NoCard{}
	}
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.HistoryLimit <= 0 {
		opts.HistoryLimit = 50
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = 5 * time.Second
	}
	if opts.Defaults == nil {
		opts.Defaults = Default
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	// The ETag base only has to differ between opens, so that a client's
	// ETag from before a configd restart never matches. It is not a
	// secret: math/rand, seeded by the runtime, does not wait for the
	// kernel's CRNG as crypto/rand does, which at boot under emulation
	// held configd, and so the console's login prompt, for 2 s.
	var rnd [4]byte
	binary.LittleEndian.PutUint32(rnd[:], mathrand.Uint32())
	s := &Store{path: path, opts: opts, etagBase: hex.EncodeToString(rnd[:]), subs: map[chan Change]struct{}{}}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// boltOptions are the same for every open: a bounded wait for the lock and
// no mmap tuning (the default grows the map with the file, which suits
// 128 MB boards). The freelist is kept on disk (NoFreelistSync off) although
// that costs a page per commit: without it bbolt rebuilds the freelist by
// walking the tree in a goroutine of its own that panics, uncatchably, on a
// damaged page, and a damaged file must be set aside, not crash configd.
func (s *Store) boltOptions(readOnly bool) *bolt.Options {
	return &bolt.Options{Timeout: s.opts.LockTimeout, ReadOnly: readOnly}
}

// dbState is what load found in the file.
type dbState int

const (
	stateCurrent dbState = iota
	stateEmpty           // no file, or a bbolt file without buckets
	stateV1              // schema 1 layout
	stateV2              // format 2: no parts bucket
	stateBad             // set it aside
)

func (s *Store) load() error {
	// A hand-off's copy that a power cut left unfinished (HandOff renames
	// it over the database only when it is whole): 4 MiB cards have no
	// room to keep it.
	if tmp := s.path + ".format2"; fileExists(tmp) {
		if err := s.cardWrite(func() error { return os.Remove(tmp) }); err != nil {
			s.opts.Logf("config: remove the unfinished %s: %v", tmp, err)
		}
	}
	state, why, found, err := s.inspect()
	if err != nil {
		return err
	}
	switch state {
	case stateBad:
		aside := s.asideName()
		if err := s.cardWrite(func() error { return os.Rename(s.path, aside) }); err != nil {
			return fmt.Errorf("config database %s is unusable (%s) and could not be set aside: %w", s.path, why, err)
		}
		s.recovered = fmt.Sprintf("the config database was unusable (%s); it was kept as %s and the defaults are in use", why, aside)
		s.opts.Logf("config: %s", s.recovered)
		fallthrough
	case stateEmpty:
		if err := s.initialize(); err != nil {
			return err
		}
	case stateV1:
		if err := s.migrateV1(); err != nil {
			return err
		}
	case stateV2:
		if err := s.migrateV2(); err != nil {
			return err
		}
	}
	if found != nil && (state == stateCurrent || state == stateV2) {
		// inspect read the running configuration already (a migration
		// to format 3 leaves the records as they are): decoding a large
		// one is most of configd's start.
		p, err := decodePending(found.pending)
		if err != nil {
			return err
		}
		s.setRunningLocked(found.cfg, found.rev, encoded{})
		s.pending = p
	} else if err := s.readRunning(); err != nil {
		return err
	}
	// Neither is ever changed in place: they can share one value.
	s.candidate = s.running
	if p := s.pending; p != nil {
		if s.opts.Clock.Now().Before(p.Deadline) {
			s.armPending()
			s.opts.Logf("config: revision %d must be confirmed by %s or it is rolled back", p.Revision, p.Deadline.Format(time.RFC3339))
		} else {
			// The deadline passed while the store was closed (a
			// restart or a reboot inside the window): roll back now,
			// before any service reads the unconfirmed config.
			if _, err := s.rollbackLocked(p.RollbackTo, "flashgate", "confirm-timeout",
				fmt.Sprintf("revision %d was not confirmed before the restart deadline: back to revision %d", p.Revision, p.RollbackTo)); err != nil {
				// Refusing to open would leave the box without any
				// configuration; run the unconfirmed one and say so.
				// The pending state stays, so the next start tries again.
				s.recovered = fmt.Sprintf("revision %d was not confirmed in time but could not be rolled back (%v); it is still running", p.Revision, err)
				s.opts.Logf("config: %s", s.recovered)
			} else {
				s.opts.Logf("config: revision %d was not confirmed in time: rolled back to revision %d", p.Revision, p.RollbackTo)
			}
		}
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// asideName returns a name for setting the database aside that no file
// has yet: two set-asides within a second must not overwrite each other.
func (s *Store) asideName() string {
	base := fmt.Sprintf("%s.set-aside-%s", s.path, s.opts.Clock.Now().UTC().Format("20060102T150405Z"))
	name := base
	for i := 1; ; i++ {
		if _, err := os.Lstat(name); errors.Is(err, os.ErrNotExist) {
			return name
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}

// runningRead is what inspect read of a usable database.
type runningRead struct {
	cfg     *Config
	rev     uint64
	pending []byte // the pending key's value, decoded by load
}

// inspect opens the file read-only and classifies it, returning the running
// configuration when it read it. err is set only for conditions that must
// not lead to setting the file aside (the lock is held by someone else).
func (s *Store) inspect() (state dbState, why string, found *runningRead, err error) {
	fi, err := os.Stat(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return stateEmpty, "", nil, nil
	}
	if err == nil && fi.Size() == 0 {
		// Power was cut while the file was being created: nothing to
		// keep, so it is simply initialized.
		if err := s.cardWrite(func() error { return os.Remove(s.path) }); err != nil {
			return 0, "", nil, fmt.Errorf("remove empty config database: %w", err)
		}
		return stateEmpty, "", nil, nil
	}
	db, err := bolt.Open(s.path, 0o600, s.boltOptions(true))
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return 0, "", nil, fmt.Errorf("open config database %s: locked by another process for %v", s.path, s.opts.LockTimeout)
		}
		if errors.Is(err, fs.ErrPermission) {
			return 0, "", nil, fmt.Errorf("open config database: %w", err) // the file may be fine: not ours to move
		}
		return stateBad, describeBoltError(err), nil, nil
	}
	defer db.Close()
	err = safeView(db, func(tx *bolt.Tx) error {
		for cerr := range tx.Check() {
			return fmt.Errorf("consistency check: %w", cerr)
		}
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			if v1 := tx.Bucket(bucketV1); v1 != nil && string(v1.Get(keyV1Version)) == "1" {
				state = stateV1
				return nil
			}
			empty := true
			tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if empty {
				state = stateEmpty
				return nil
			}
			return errors.New("not a flashgate config database (unknown buckets)")
		}
		state = stateCurrent
		switch v := string(meta.Get(keySchema)); v {
		case fmt.Sprint(dbFormat):
			if tx.Bucket(bucketParts) == nil {
				return errors.New("no parts bucket")
			}
		case "2":
			state = stateV2
		case "":
			return errors.New("not a flashgate config database (no schema version)")
		default:
			return fmt.Errorf("schema version %s is not one this firmware reads (it writes %d)", v, dbFormat)
		}
		if tx.Bucket(bucketRevisions) == nil {
			return errors.New("no revisions bucket")
		}
		rev := getUint(meta, keyRunning)
		if rev == 0 {
			return errors.New("no running revision recorded")
		}
		_, cfg, err := readRecord(tx, rev)
		if err != nil {
			return fmt.Errorf("running revision %d: %w", rev, err)
		}
		found = &runningRead{cfg: cfg, rev: rev, pending: bytes.Clone(meta.Get(keyPending))}
		return nil
	})
	if err != nil {
		return stateBad, err.Error(), nil, nil
	}
	return state, "", found, nil
}

func describeBoltError(err error) string {
	switch {
	case errors.Is(err, bolterrors.ErrInvalid):
		return "not a database file, or both headers destroyed"
	case errors.Is(err, bolterrors.ErrVersionMismatch):
		return "database format version not supported"
	case errors.Is(err, bolterrors.ErrChecksum):
		return "header checksum mismatch"
	}
	return err.Error()
}

// safeView runs a read transaction, turning a panic inside bbolt (it panics
// on some kinds of page corruption) into an error.
func safeView(db *bolt.DB, fn func(tx *bolt.Tx) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt database: %v", r)
		}
	}()
	return db.View(fn)
}

// cardWrite brackets fn with the card's BeginWrite and EndWrite. A failure
// to protect the card again is logged but does not fail the write: the data
// is on the card by then, and reporting the commit as failed would make the
// caller's view differ from the card's.
func (s *Store) cardWrite(fn func() error) error {
	if s.handedOff {
		return ErrHandedOff
	}
	if err := s.opts.Card.BeginWrite(); err != nil {
		return fmt.Errorf("make the card writable: %w", err)
	}
	err := fn()
	if eerr := s.opts.Card.EndWrite(); eerr != nil {
		s.opts.Logf("config: card left writable: %v", eerr)
	}
	return err
}

// update runs fn in one read-write transaction. The database is opened for
// the write and closed after it: the config partition can only be remounted
// read-only when no file on it is open for writing.
func (s *Store) update(fn func(tx *bolt.Tx) error) error {
	return s.cardWrite(func() error {
		db, err := bolt.Open(s.path, 0o600, s.boltOptions(false))
		if err != nil {
			return fmt.Errorf("open config database %s for writing: %w", s.path, err)
		}
		err = db.Update(fn)
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close config database: %w", cerr)
		}
		return err
	})
}

// view runs fn in a read transaction on a read-only open of the file.
func (s *Store) view(fn func(tx *bolt.Tx) error) error {
	db, err := bolt.Open(s.path, 0o600, s.boltOptions(true))
	if err != nil {
		return fmt.Errorf("open config database %s: %w", s.path, err)
	}
	defer db.Close()
	return safeView(db, fn)
}

func putUint(b *bolt.Bucket, key []byte, v uint64) error {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], v)
	return b.Put(key, buf[:])
}

func getUint(b *bolt.Bucket, key []byte) uint64 {
	v := b.Get(key)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func revKey(rev uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], rev)
	return k[:]
}

// createLayout makes the buckets of an empty database and returns the meta
// bucket.
func createLayout(tx *bolt.Tx) (*bolt.Bucket, error) {
	meta, err := tx.CreateBucket(bucketMeta)
	if err != nil {
		return nil, fmt.Errorf("create meta bucket: %w", err)
	}
	for _, name := range [][]byte{bucketRevisions, bucketParts} {
		if _, err := tx.CreateBucket(name); err != nil {
			return nil, fmt.Errorf("create %s bucket: %w", name, err)
		}
	}
	if err := meta.Put(keySchema, []byte(fmt.Sprint(dbFormat))); err != nil {
		return nil, err
	}
	return meta, nil
}

// initialize writes a fresh database holding the defaults as revision 1.
func (s *Store) initialize() error {
	cfg := s.opts.Defaults()
	cfg.normalize()
	doc, err := encodeDocument(cfg)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		meta, err := createLayout(tx)
		if err != nil {
			return err
		}
		info := RevisionInfo{Revision: 1, Who: "flashgate", When: s.opts.Clock.Now().UTC(),
			Message: "factory defaults", Sections: Sections, Reason: "factory-reset"}
		return s.writeRevision(tx, meta, info, doc)
	})
}

// migrateV2 turns a format 2 database into format 3: its records stay
// and are read as they are; new revisions store their documents in parts.
func (s *Store) migrateV2() error {
	s.opts.Logf("config: %s: database format 2 to %d (revisions from now on share the unchanged parts of their configurations)", s.path, dbFormat)
	return s.update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketParts); err != nil {
			return fmt.Errorf("create parts bucket: %w", err)
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte(fmt.Sprint(dbFormat)))
	})
}

// encodeDocument is the JSON document a revision stores for c.
func encodeDocument(c *Config) ([]byte, error) {
	doc, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode the configuration: %w", err)
	}
	return doc, nil
}

// writeRevision stores doc, a configuration's JSON document, as revision
// info.Revision, makes it running, advances next and trims the history,
// inside tx. The parts of doc that revisions share with it (the running one,
// the one a rollback restores) are not stored again.
func (s *Store) writeRevision(tx *bolt.Tx, meta *bolt.Bucket, info RevisionInfo, doc []byte, shares ...uint64) error {
	reuse := partSet{}
	for _, rev := range shares {
		addPartsOf(tx, reuse, rev)
	}
	rec, err := encodeRecord(tx, info, doc, reuse)
	if err != nil {
		return err
	}
	revs := tx.Bucket(bucketRevisions)
	// Revision numbers only grow: full leaves split where they end instead
	// of in the middle (half-empty pages the next records never fill).
	revs.FillPercent = 0.9
	if err := revs.Put(revKey(info.Revision), rec); err != nil {
		return fmt.Errorf("store revision %d: %w", info.Revision, err)
	}
	if err := putUint(meta, keyRunning, info.Revision); err != nil {
		return err
	}
	if err := putUint(meta, keyNext, info.Revision+1); err != nil {
		return err
	}
	// Trim the oldest revisions beyond the limit, but never the one a
	// pending confirmation would roll back to.
	keep := map[uint64]bool{}
	if p, err := readPending(meta); err == nil && p != nil {
		keep[p.RollbackTo] = true
	}
	// Trimming touches the oldest leaf page of the history, so it is done
	// in batches: only when the history has grown trimBatch past the
	// limit, which spares the card a page on most commits.
	var keys [][]byte
	revs.ForEach(func(k, _ []byte) error { keys = append(keys, bytes.Clone(k)); return nil })
	if len(keys) <= s.opts.HistoryLimit+trimBatch {
		return nil
	}
	for n := len(keys); n > s.opts.HistoryLimit && len(keys) > 0; keys = keys[1:] {
		if keep[binary.BigEndian.Uint64(keys[0])] {
			continue
		}
		if err := revs.Delete(keys[0]); err != nil {
			return fmt.Errorf("trim history: %w", err)
		}
		n--
	}
	// The parts only the trimmed revisions listed go with them.
	return collectParts(tx)
}

// trimBatch is how far the history may grow past HistoryLimit before the
// oldest revisions are deleted (see writeRevision).
const trimBatch = 8

func readPending(meta *bolt.Bucket) (*Pending, error) {
	return decodePending(meta.Get(keyPending))
}

func decodePending(v []byte) (*Pending, error) {
	if v == nil {
		return nil, nil
	}
	var p Pending
	if err := decodeStrict(v, &p); err != nil {
		return nil, fmt.Errorf("pending confirmation: %w", err)
	}
	return &p, nil
}

// readRunning loads the running config and the pending confirmation.
func (s *Store) readRunning() error {
	return s.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		rev := getUint(meta, keyRunning)
		_, cfg, err := readRecord(tx, rev)
		if err != nil {
			return fmt.Errorf("read running revision %d: %w", rev, err)
		}
		p, err := readPending(meta)
		if err != nil {
			return err
		}
		s.setRunningLocked(cfg, rev, encoded{})
		s.pending = p
		return nil
	})
}

// Recovered says why the database was set aside and replaced by the
// defaults when the store was opened, or "" if it was not. The console
// prints it.
func (s *Store) Recovered() string { return s.recovered }

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close stops the confirmation timer and ends all subscriptions. A pending
// confirmation stays in the database and is honored by the next Open.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	for ch := range s.subs {
		close(ch)
		delete(s.subs, ch)
	}
	return nil
}

// Running returns a copy of the running configuration and its revision.
func (s *Store) Running() (*Config, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running.Clone(), s.runningRev
}

// Pending returns the commit waiting for confirmation, or nil.
func (s *Store) Pending() *Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		return nil
	}
	p := *s.pending
	return &p
}

// Subscribe returns a channel that receives a Change after every change of
// the running configuration, and a function to end the subscription. A
// subscriber that falls 16 changes behind has its channel closed: it should
// re-read the running config and subscribe again.
func (s *Store) Subscribe() (<-chan Change, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan Change, 16)
	if s.closed {
		close(ch)
		return ch, func() {}
	}
	s.subs[ch] = struct{}{}
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.subs[ch]; ok {
			delete(s.subs, ch)
			close(ch)
		}
	}
}

func (s *Store) notifyLocked(c Change) {
	for ch := range s.subs {
		select {
		case ch <- c:
		default:
			delete(s.subs, ch)
			close(ch)
		}
	}
}

// History returns the recorded revisions, newest first, at most
// HistoryLimit of them.
func (s *Store) History() ([]RevisionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []RevisionInfo
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRevisions).ForEach(func(k, v []byte) error {
			info, err := decodeRecordInfo(v)
			if err != nil {
				return fmt.Errorf("revision %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, info)
			return nil
		})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Revision > out[j].Revision })
	if len(out) > s.opts.HistoryLimit {
		out = out[:s.opts.HistoryLimit] // the rest waits for the next batch trim
	}
	return out, err
}

// Revision returns the configuration of revision rev as it was committed.
func (s *Store) Revision(rev uint64) (*Config, RevisionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cfg *Config
	var info RevisionInfo
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		info, cfg, err = readRecord(tx, rev)
		return err
	})
	return cfg, info, err
}

// RunningSystem returns a copy of the running configuration's system
// section and its revision: what a caller that needs the host name or the
// accounts reads without copying a head office's thousand tunnels.
func (s *Store) RunningSystem() (System, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		return System{}, s.runningRev
	}
	return (&Config{System: s.running.System}).Clone().System, s.runningRev
}

// CandidateChanged reports whether the candidate differs from the running
// configuration, as a commit would find it (ErrNoChanges when not). After
// a commit and until the next edit they are one object, and the answer is
// immediate; else each side's JSON is encoded once per configuration
// (kept for the commit), and the sections compared.
func (s *Store) CandidateChanged() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.candidate == s.running {
		return false, nil
	}
	if s.running == nil || s.candidate == nil {
		return true, nil
	}
	if s.candidateEnc.sections == nil {
		enc, err := encodeConfig(s.candidate)
		if err != nil {
			return false, err
		}
		s.candidateEnc = enc
	}
	running, err := s.runningEncodedLocked()
	if err != nil {
		return false, err
	}
	return len(changedSections(running, s.candidateEnc)) > 0, nil
}
