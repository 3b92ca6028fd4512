package configd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/config"
)

// FileStore keeps small secrets at rest on the config partition (the web
// UI's TLS key and certificate; SSH host keys later), one file each under
// Dir. They are not part of the configuration: no history, no backup, and
// a factory reset removes them. The partition is read-only between writes,
// so every write is bracketed by the card's BeginWrite and EndWrite, like a
// commit.
type FileStore struct {
	dir  string
	card config.Card
	logf func(string, ...any)
	mu   sync.Mutex // one write or removal at a time
}

// NewFileStore returns the store of files in dir (created on the first
// write), written through card (nil: a plain writable directory). logf
// reports a card left writable.
func NewFileStore(dir string, card config.Card, logf func(string, ...any)) *FileStore {
	if card == nil {
		card = config.NoCard{}
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &FileStore{dir: dir, card: card, logf: logf}
}

// endWrite protects the card again. As with a commit, a failure is logged
// but does not fail the write: the data is on the card by then.
func (f *FileStore) endWrite() {
	if err := f.card.EndWrite(); err != nil {
		f.logf("configd: card left writable after a file store write: %v", err)
	}
}

// Dir is where the files are kept.
func (f *FileStore) Dir() string { return f.dir }

// Get returns a stored file; an error matching fs.ErrNotExist when there
// is none.
func (f *FileStore) Get(name string) ([]byte, error) {
	if !configdapi.ValidFileName(name) {
		return nil, fmt.Errorf("file %q: %w", name, configdapi.ErrBadFileName)
	}
	data, err := os.ReadFile(filepath.Join(f.dir, name))
	if err != nil {
		return nil, fmt.Errorf("read stored file: %w", err)
	}
	return data, nil
}

// Put stores data as name, replacing what was there. A power cut at any
// moment leaves the old file or the new one: the data goes to a temporary
// file that is synced, renamed over the old one, and the directory synced.
func (f *FileStore) Put(name string, data []byte) error {
	if !configdapi.ValidFileName(name) {
		return fmt.Errorf("file %q: %w", name, configdapi.ErrBadFileName)
	}
	if len(data) > configdapi.MaxFileSize {
		return fmt.Errorf("file %q: %w", name, configdapi.ErrFileTooBig)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.card.BeginWrite(); err != nil {
		return fmt.Errorf("store file %s: make the card writable: %w", name, err)
	}
	defer f.endWrite()
	if err := f.makeDir(); err != nil {
		return fmt.Errorf("store file %s: %w", name, err)
	}
	// Temporary files a power cut left behind.
	if stale, _ := filepath.Glob(filepath.Join(f.dir, name+"~*")); len(stale) > 0 {
		for _, p := range stale {
			os.Remove(p)
		}
	}
	if err := writeSynced(f.dir, name, data); err != nil {
		return fmt.Errorf("store file %s: %w", name, err)
	}
	return nil
}

// makeDir creates the directory (0700: it holds private keys) and makes
// its entry durable in the parent.
func (f *FileStore) makeDir() error {
	if _, err := os.Stat(f.dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return err
	}
	return syncDir(filepath.Dir(f.dir))
}

// writeSynced is the atomic replacement of dir/name.
func writeSynced(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, name+"~*") // mode 0600
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o600) // whatever the umask did
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// RemoveAll deletes every stored file (a factory reset). It does not
// touch the card when there is nothing to remove.
func (f *FileStore) RemoveAll() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := os.Lstat(f.dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := f.card.BeginWrite(); err != nil {
		return fmt.Errorf("remove stored files: make the card writable: %w", err)
	}
	defer f.endWrite()
	// Zeros first: the files are keys, and removing them alone leaves
	// their blocks on the card as they were.
	entries, _ := os.ReadDir(f.dir)
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := config.ZeroFile(filepath.Join(f.dir, e.Name())); err != nil {
				return fmt.Errorf("remove stored files: overwrite %s: %w", e.Name(), err)
			}
		}
	}
	if err := os.RemoveAll(f.dir); err != nil {
		return fmt.Errorf("remove stored files: %w", err)
	}
	if err := syncDir(filepath.Dir(f.dir)); err != nil {
		return fmt.Errorf("remove stored files: %w", err)
	}
	return nil
}
