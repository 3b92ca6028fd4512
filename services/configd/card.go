package configd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/config"
)

// RemountCard protects the config partition between commits: PID 1 mounts
// it read-only at /cfg, and configd remounts it read-write only for the
// duration of a database write. A power cut outside a commit then finds a
// clean, read-only file system.
type RemountCard struct {
	Dir string // mount point, /cfg
}

// preservedFlags are the mount flags PID 1 may have set that a remount must
// keep (MS_REMOUNT replaces the per-mount flags with the ones given).
var preservedFlags = []struct{ st, ms uintptr }{
	{unix.ST_NOSUID, unix.MS_NOSUID},
	{unix.ST_NODEV, unix.MS_NODEV},
	{unix.ST_NOEXEC, unix.MS_NOEXEC},
	{unix.ST_NOATIME, unix.MS_NOATIME},
	{unix.ST_NODIRATIME, unix.MS_NODIRATIME},
	{unix.ST_RELATIME, unix.MS_RELATIME},
}

func (c RemountCard) flags() (uintptr, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(c.Dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", c.Dir, err)
	}
	var f uintptr
	for _, p := range preservedFlags {
		if uintptr(st.Flags)&p.st != 0 {
			f |= p.ms
		}
	}
	return f, nil
}

// BeginWrite remounts the partition read-write.
func (c RemountCard) BeginWrite() error {
	f, err := c.flags()
	if err != nil {
		return err
	}
	if err := unix.Mount("", c.Dir, "", unix.MS_REMOUNT|f, ""); err != nil {
		return fmt.Errorf("remount %s read-write: %w", c.Dir, err)
	}
	return nil
}

// EndWrite flushes the file system and remounts it read-only.
func (c RemountCard) EndWrite() error {
	f, err := c.flags()
	if err != nil {
		return err
	}
	if fd, err := unix.Open(c.Dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		unix.Syncfs(fd)
		unix.Close(fd)
	}
	if err := unix.Mount("", c.Dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|f, ""); err != nil {
		return fmt.Errorf("remount %s read-only: %w", c.Dir, err)
	}
	return nil
}

// isMountPoint reports whether dir is the root of a mounted file system
// (its device differs from its parent's), which tells configd whether the
// config partition was found and mounted by PID 1.
func isMountPoint(dir string) bool {
	a, err1 := os.Stat(dir)
	b, err2 := os.Stat(filepath.Dir(filepath.Clean(dir)))
	if err1 != nil || err2 != nil {
		return false
	}
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev != sb.Dev
}

// sharedCard lets two writers, the config store and the file store, share
// one Card. Each brackets its writes with BeginWrite and EndWrite on its
// own schedule (a commit, a confirm timeout, a certificate being saved):
// without counting, one writer's EndWrite would remount the partition
// read-only under the other's open file. The partition is made writable by
// the first BeginWrite and protected again by the last EndWrite.
type sharedCard struct {
	card config.Card

	mu      sync.Mutex
	writers int
}

func (c *sharedCard) BeginWrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writers == 0 {
		if err := c.card.BeginWrite(); err != nil {
			return err
		}
	}
	c.writers++
	return nil
}

func (c *sharedCard) EndWrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writers == 0 {
		return errors.New("card: EndWrite without BeginWrite")
	}
	c.writers--
	if c.writers > 0 {
		return nil
	}
	return c.card.EndWrite()
}
