package bootslot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flashgate/flashgate/firmware/bootfs"
	"golang.org/x/sys/unix"
)

// BootLabel is the FAT volume label of the card's boot partition.
const BootLabel = "FGBOOT"

// Card is the boot partition, opened for reading and in-place writing.
type Card struct {
	Path string // the block device (/dev/sda1) or, in tests, a card image
	f    *os.File
	dev  bootfs.Device // f, or in tests a twin that loses power
	Vol  *bootfs.Volume
}

// NewCard is a card on dev that is not a file: a test's twin.
func NewCard(path string, dev bootfs.Device, v *bootfs.Volume) *Card {
	return &Card{Path: path, dev: dev, Vol: v}
}

// OpenCard opens the FAT file system at byte offset base of path and
// takes an exclusive lock on it, so that the web UI, the console and PID 1
// never write the ADV or a slot at the same time.
func OpenCard(path string, base int64) (*Card, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open the boot partition: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("the boot partition %s is in use (another upgrade or slot switch is running): %w", path, err)
	}
	v, err := bootfs.Open(f, base)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("boot partition %s: %w", path, err)
	}
	return &Card{Path: path, f: f, dev: f, Vol: v}, nil
}

// OpenCardWaiting is OpenCard for a writer that must not give up because
// a reader holds the lock for a moment: configd opens the card to list the
// slots whenever the web UI asks for the firmware's status, which the
// System page does every few seconds while an upgrade's test boot runs,
// the very moment PID 1 must record that test boot's result. It retries a
// card that is in use until wait has passed; other errors return at once.
func OpenCardWaiting(path string, base int64, wait time.Duration) (*Card, error) {
	deadline := time.Now().Add(wait)
	for {
		c, err := OpenCard(path, base)
		if err == nil || !errors.Is(err, unix.EWOULDBLOCK) || !time.Now().Before(deadline) {
			return c, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Close releases the card.
func (c *Card) Close() error {
	if c.f == nil {
		return nil
	}
	return c.f.Close()
}

// Sync puts what was written on the medium and, on a block device, drops
// the kernel's cached copy so that a read-back reads the card.
func (c *Card) Sync() error {
	if fl, ok := c.dev.(bootfs.Flusher); ok {
		if err := fl.Sync(); err != nil {
			return err
		}
	}
	if c.f == nil {
		return nil
	}
	if err := unix.IoctlSetInt(int(c.f.Fd()), unix.BLKFLSBUF, 0); err != nil && !errors.Is(err, unix.ENOTTY) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("drop the block device's cache: %w", err)
	}
	return nil
}

// FindBootPartition scans the block devices in sysBlock (/sys/class/block)
// for the FAT file system labelled FGBOOT and returns its device node in
// devDir.
func FindBootPartition(sysBlock, devDir string) (string, error) {
	entries, err := os.ReadDir(sysBlock)
	if err != nil {
		return "", fmt.Errorf("list block devices: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "ram") || strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "zram") {
			continue
		}
		dev := filepath.Join(devDir, name)
		f, err := os.Open(dev)
		if err != nil {
			continue
		}
		bs := make([]byte, 512)
		_, err = f.ReadAt(bs, 0)
		f.Close()
		if err == nil && bs[510] == 0x55 && bs[511] == 0xAA && bs[38] == 0x29 && strings.TrimRight(string(bs[43:54]), " ") == BootLabel {
			return dev, nil
		}
	}
	return "", fmt.Errorf("no boot partition labelled %s among %d block devices", BootLabel, len(entries))
}

// OpenBox opens the running box's boot partition.
func OpenBox() (*Card, error) {
	return OpenBoxWaiting(0) // one try
}

// OpenBoxWaiting is OpenBox that waits up to wait for a card in use
// (OpenCardWaiting).
func OpenBoxWaiting(wait time.Duration) (*Card, error) {
	dev, err := FindBootPartition("/sys/class/block", "/dev")
	if err != nil {
		return nil, err
	}
	return OpenCardWaiting(dev, 0, wait)
}
