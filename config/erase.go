package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// eraseAndWriteFresh makes a database holding only cfg as revision info in
// a new file, overwrites the old database and every set-aside copy with
// zeros in place, renames the new file over the old and removes the
// copies. ext2 rewrites a file's blocks where they are, so the zeros reach
// the card (its flash translation layer may still keep old copies of
// blocks: only a new card, or `make flash` over the whole card, is sure).
//
// A power loss at any point leaves either the old database, a zeroed one
// (which the next Open sets aside, starting from the defaults, as the
// reset would have), or the new one.
func (s *Store) eraseAndWriteFresh(info RevisionInfo, cfg *Config) error {
	fresh := s.path + ".fresh"
	doc, err := encodeDocument(cfg)
	if err != nil {
		return err
	}
	return s.cardWrite(func() error {
		if err := os.Remove(fresh); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove a stale %s: %w", fresh, err)
		}
		db, err := bolt.Open(fresh, 0o600, s.boltOptions(false))
		if err != nil {
			return fmt.Errorf("create %s: %w", fresh, err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			meta, err := createLayout(tx)
			if err != nil {
				return err
			}
			return s.writeRevision(tx, meta, info, doc)
		})
		if cerr := db.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			os.Remove(fresh)
			return fmt.Errorf("write the fresh database %s: %w", fresh, err)
		}
		asides, _ := filepath.Glob(globEscape(s.path) + ".set-aside-*")
		for _, old := range append([]string{s.path}, asides...) {
			if err := zeroFile(old); err != nil {
				os.Remove(fresh)
				return fmt.Errorf("overwrite %s: %w", old, err)
			}
		}
		if err := os.Rename(fresh, s.path); err != nil {
			return fmt.Errorf("put the fresh database in place: %w", err)
		}
		var errs []error
		for _, old := range asides {
			if err := os.Remove(old); err != nil {
				errs = append(errs, err)
			}
		}
		errs = append(errs, syncDir(filepath.Dir(s.path)))
		return errors.Join(errs...)
	})
}

// ZeroFile overwrites a file with zeros where it lies on the card, before
// it is removed: removing alone leaves its blocks as they were.
func ZeroFile(path string) error { return zeroFile(path) }

// zeroFile overwrites the whole of path with zeros and syncs it. A file
// that does not exist is nothing to erase.
func zeroFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	zeros := make([]byte, 64<<10)
	for left := st.Size(); left > 0; {
		n := int64(len(zeros))
		if left < n {
			n = left
		}
		if _, err := f.Write(zeros[:n]); err != nil {
			return err
		}
		left -= n
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// globEscape quotes the glob metacharacters of a literal path.
func globEscape(p string) string {
	out := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '*', '?', '[', '\\':
			out = append(out, '\\')
		}
		out = append(out, p[i])
	}
	return string(out)
}
