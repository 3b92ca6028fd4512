package config

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/flashgate/flashgate/internal/atomicfile"
)

// DBFormats are the database formats this firmware's Open reads: the
// schema 1 layout (v1.go), format 2 and format 3 (the one it writes). The
// image's manifest records them (imagefile.Manifest's extension), so that
// a newer firmware going back to this one by hand knows what to leave it.
var DBFormats = []int{1, 2, dbFormat}

// DBFormat is the database format this firmware writes.
const DBFormat = dbFormat

// Going back by hand to firmware in the other slot that reads only format
// 2 (every firmware before format 3) needs a database it reads: format 3
// code still reads format 2 records, but not the other way round, and
// format 2 firmware sets a format 3 database aside and starts from the
// defaults. HandOff writes the database again in format 2, with the same
// revisions, history, running revision and next number, each record
// holding its whole document as format 2 wrote them; this firmware, when
// the box comes back to it, opens that file as any format 2 database and
// turns it into format 3 again without losing a revision.

// ErrHandedOff is what every write answers after HandOff.
var ErrHandedOff = errors.New("the configuration database was handed to the firmware in the other slot for the reboot into it; nothing can be committed until configd restarts")

// HandOff makes the database one that firmware reading only database
// format 2 and configuration documents up to schema maxSchema reads, for
// the reboot into that firmware, and ends this store's writes: the file
// is no longer one this store writes to. It refuses while a commit waits
// for confirmation (confirm it or let it roll back first) and when the
// running configuration's schema is newer than maxSchema. The file is
// written beside the database, checked to open as format 2 and replaced
// in one rename, so a power cut leaves the old file or the new one, both
// of which this firmware reads. A failure leaves the database and the
// store as they were.
func (s *Store) HandOff(maxSchema int) (RevisionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return RevisionInfo{}, ErrClosed
	}
	if s.handedOff {
		return RevisionInfo{}, ErrHandedOff
	}
	if p := s.pending; p != nil {
		return RevisionInfo{}, fmt.Errorf("revision %d waits for confirmation: confirm it or let it roll back before switching firmware", p.Revision)
	}
	tmp := s.path + ".format2"
	var running RevisionInfo
	err := s.cardWrite(func() error {
		if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		var err error
		running, err = s.writeFormat2(tmp, maxSchema)
		if err != nil {
			os.Remove(tmp)
			return err
		}
		if err := os.Rename(tmp, s.path); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("replace the database: %w", err)
		}
		return atomicfile.SyncDir(filepath.Dir(s.path))
	})
	if err != nil {
		return RevisionInfo{}, fmt.Errorf("write the configuration database in format 2: %w", err)
	}
	s.handedOff = true
	s.opts.Logf("config: %s is in database format 2 now (running revision %d), for the firmware in the other slot; this configd commits nothing more", s.path, running.Revision)
	return running, nil
}

// TakeBack undoes HandOff when the switch it was for did not happen (the
// slot could not be armed): the format 2 database becomes format 3 again,
// as at any open of one, and the store writes again.
func (s *Store) TakeBack() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.handedOff || s.closed {
		return nil
	}
	s.handedOff = false
	if err := s.migrateV2(); err != nil {
		s.handedOff = true
		return fmt.Errorf("take the database back: %w", err)
	}
	return nil
}

// writeFormat2 writes the format 2 copy of the database to dst and checks
// that it opens as format 2 with the same running revision.
func (s *Store) writeFormat2(dst string, maxSchema int) (RevisionInfo, error) {
	var running RevisionInfo
	err := s.view(func(src *bolt.Tx) error {
		var err error
		running, err = WriteFormat2(src, dst, maxSchema)
		return err
	})
	if err != nil {
		return running, err
	}
	// Inside the caller's card write: the check must not bracket one of
	// its own.
	opts := s.opts
	opts.Card = NoCard{}
	check := &Store{path: dst, opts: opts}
	state, why, found, err := check.inspect()
	switch {
	case err != nil:
		return running, fmt.Errorf("check the copy: %w", err)
	case state != stateV2:
		return running, fmt.Errorf("the copy does not open as format 2 (state %d: %s)", state, why)
	case found == nil || found.rev != running.Revision:
		return running, errors.New("the copy does not hold the running revision")
	}
	return running, nil
}

// WriteFormat2 writes src's revisions as a new database file dst in
// format 2 (dst must not exist) and returns the running revision's info.
// It fails when the running revision's document is of a schema newer than
// maxSchema; older revisions of a newer schema are kept (the old
// firmware's history lists them, and it refuses to roll back to one).
func WriteFormat2(src *bolt.Tx, dst string, maxSchema int) (RevisionInfo, error) {
	var running RevisionInfo
	meta := src.Bucket(bucketMeta)
	revs := src.Bucket(bucketRevisions)
	if meta == nil || revs == nil {
		return running, errors.New("not a format 2 or 3 database")
	}
	runningRev := getUint(meta, keyRunning)
	db, err := bolt.Open(dst, 0o600, &bolt.Options{Timeout: 0})
	if err != nil {
		return running, fmt.Errorf("create %s: %w", dst, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		m, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		out, err := tx.CreateBucket(bucketRevisions)
		if err != nil {
			return err
		}
		out.FillPercent = 0.9 // keys in order, as writeRevision appends
		if err := m.Put(keySchema, []byte("2")); err != nil {
			return err
		}
		for _, k := range [][]byte{keyRunning, keyNext, keyPending} {
			if v := meta.Get(k); v != nil {
				if err := m.Put(k, bytes.Clone(v)); err != nil {
					return err
				}
			}
		}
		found := false
		err = revs.ForEach(func(k, rec []byte) error {
			info, err := decodeRecordInfo(rec)
			if err != nil {
				return fmt.Errorf("revision %x: %w", k, err)
			}
			if binary.BigEndian.Uint64(k) == runningRev {
				if info.Schema > maxSchema {
					return fmt.Errorf("the running configuration (revision %d) is of schema %d, the other firmware reads up to %d", info.Revision, info.Schema, maxSchema)
				}
				running, found = info, true
			}
			rec2, err := format2Record(src, info, rec)
			if err != nil {
				return err
			}
			return out.Put(bytes.Clone(k), rec2)
		})
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("running revision %d: %w", runningRev, ErrNoRevision)
		}
		return nil
	})
	if cerr := db.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return running, err
}

// format2Record returns rec as format 2 stored it: the header without a
// body kind, then the whole document DEFLATEd. A format 2 record (from
// before the upgrade) is already that.
func format2Record(src *bolt.Tx, info RevisionInfo, rec []byte) ([]byte, error) {
	hdr, body, err := splitRecord(rec)
	if err != nil {
		return nil, fmt.Errorf("revision %d: %w", info.Revision, err)
	}
	if !recordHasParts(hdr) {
		return bytes.Clone(rec), nil
	}
	doc, err := readParts(src, body)
	if err != nil {
		return nil, fmt.Errorf("revision %d: %w", info.Revision, err)
	}
	h, err := json.Marshal(info) // RevisionInfo alone: no "body"
	if err != nil {
		return nil, err
	}
	var n [binary.MaxVarintLen64]byte
	out := append(make([]byte, 0, len(h)+len(doc)/4), n[:binary.PutUvarint(n[:], uint64(len(h)))]...)
	out = append(out, h...)
	return deflateAppend(out, doc)
}

// ReadsDBFormat reports whether firmware reading formats reads the
// databases this firmware writes.
func ReadsDBFormat(formats []int) bool { return slices.Contains(formats, dbFormat) }
