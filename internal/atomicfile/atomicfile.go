// Package atomicfile replaces a file in one rename, so that a power cut
// or a reader at that moment sees the old file or the new one, never half
// of one. PID 1, netd and the web UI write their state files with it. It
// links nothing but the os package's, so PID 1 may use it.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile writes data to path with mode perm (whatever the umask):
// into a temporary file in path's directory (created if missing, 0755;
// rename does not cross file systems), synced, then renamed over path, and
// the directory synced so that the rename is on the disk too.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	err = f.Chmod(perm) // CreateTemp makes it 0600
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir makes what was renamed or created in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
