package images

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// HostRoots are where the host's sysfs and procfs are mounted. The checks
// before flashing read only these trees, so tests run them on fixtures.
type HostRoots struct {
	Sys  string // "/sys"
	Proc string // "/proc"
}

// SystemRoots are the running system's.
var SystemRoots = HostRoots{Sys: "/sys", Proc: "/proc"}

// DefaultFlashLimit is the largest device flash writes to without -force:
// CompactFlash and SD cards for these boards are far smaller, and a larger
// device is more likely a disk someone cares about.
const DefaultFlashLimit = 64 << 30

// Card is a block device that an image may be written to, as sysfs
// describes it.
type Card struct {
	Dev        string   // as given, e.g. "/dev/sdb"
	Name       string   // kernel name, e.g. "sdb"
	Model      string   // vendor and model, if sysfs has them
	Bytes      int64    //
	Removable  bool     //
	Partitions []string // kernel names of its partitions
	devNums    []string // "major:minor" of the disk and its partitions
}

// String is the line shown before asking for confirmation.
func (c *Card) String() string {
	s := fmt.Sprintf("%s: %s", c.Dev, humanDecimal(c.Bytes))
	if c.Model != "" {
		s += ", " + c.Model
	}
	if c.Removable {
		s += ", removable"
	}
	if len(c.Partitions) > 0 {
		s += ", partitions " + strings.Join(c.Partitions, " ")
	}
	return s
}

// InspectCard describes dev from sysfs. dev must be a whole disk.
func InspectCard(roots HostRoots, dev string) (*Card, error) {
	name := filepath.Base(dev)
	if real, err := filepath.EvalSymlinks(dev); err == nil {
		name = filepath.Base(real) // /dev/disk/by-id/... names
	}
	sys := filepath.Join(roots.Sys, "class", "block", name)
	if _, err := os.Stat(sys); err != nil {
		return nil, fmt.Errorf("%s is not a block device of this system (no %s)", dev, sys)
	}
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		parent := name
		if real, err := filepath.EvalSymlinks(sys); err == nil {
			parent = filepath.Base(filepath.Dir(real))
		}
		return nil, fmt.Errorf("%s is a partition: give the whole card, /dev/%s", dev, parent)
	}
	c := &Card{Dev: dev, Name: name}
	sectors, err := readSysInt(filepath.Join(sys, "size"))
	if err != nil {
		return nil, fmt.Errorf("size of %s: %w", dev, err)
	}
	c.Bytes = sectors * 512 // sysfs counts 512-byte sectors whatever the device's sector size
	if r, err := readSysInt(filepath.Join(sys, "removable")); err == nil {
		c.Removable = r == 1
	}
	c.Model = deviceModel(sys)
	d := readSysString(filepath.Join(sys, "dev"))
	if d == "" {
		return nil, fmt.Errorf("%s: sysfs gives no device number (no %s)", dev, filepath.Join(sys, "dev"))
	}
	c.devNums = append(c.devNums, d)
	entries, _ := os.ReadDir(sys)
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(sys, e.Name(), "partition")); err == nil {
			c.Partitions = append(c.Partitions, e.Name())
			if d := readSysString(filepath.Join(sys, e.Name(), "dev")); d != "" {
				c.devNums = append(c.devNums, d)
			}
		}
	}
	return c, nil
}

// deviceModel names the device behind a sysfs block directory the way its
// driver does: vendor and model for SCSI, USB and ATA disks, the card's name
// for MMC/SD, the backing file for a loop device.
func deviceModel(sys string) string {
	if m := strings.TrimSpace(readSysString(filepath.Join(sys, "device", "vendor")) + " " +
		readSysString(filepath.Join(sys, "device", "model"))); m != "" {
		return m
	}
	if m := readSysString(filepath.Join(sys, "device", "name")); m != "" {
		return readSysString(filepath.Join(sys, "device", "type")) + " card " + m
	}
	if f := readSysString(filepath.Join(sys, "loop", "backing_file")); f != "" {
		return "loop device on " + f
	}
	return ""
}

// Check refuses a card that must not be written: the disk holding the
// running system's root file system (whatever force says), one with a
// mounted file system or active swap (on the disk or any partition), and,
// unless force, a device larger than limit.
func (c *Card) Check(roots HostRoots, limit int64, force bool) error {
	mounts, err := readMountInfo(roots.Proc)
	if err != nil {
		return fmt.Errorf("cannot tell whether %s is in use: %w", c.Dev, err)
	}
	// The root file system first: it is the worst mistake, and a system
	// disk usually has other mounts too, which would be named instead.
	for _, m := range mounts {
		if m.MountPoint != "/" {
			continue
		}
		for _, disk := range disksOf(roots, m.DevNum) {
			if disk == c.Name {
				return fmt.Errorf("%s holds the running system's root file system: refusing to overwrite it", c.Dev)
			}
		}
	}
	names := append([]string{c.Name}, c.Partitions...)
	for _, m := range mounts {
		if slices.Contains(c.devNums, m.DevNum) || slices.Contains(names, filepath.Base(m.Source)) && strings.HasPrefix(m.Source, "/dev/") {
			return fmt.Errorf("%s is in use: %s is mounted on %s (unmount it first)", c.Dev, m.Source, m.MountPoint)
		}
	}
	if swaps, err := os.ReadFile(filepath.Join(roots.Proc, "swaps")); err == nil {
		for _, l := range strings.Split(string(swaps), "\n")[1:] {
			f := strings.Fields(l)
			if len(f) > 0 && slices.Contains(names, filepath.Base(f[0])) {
				return fmt.Errorf("%s is in use: %s is active swap (swapoff it first)", c.Dev, f[0])
			}
		}
	}
	if c.Bytes > limit && !force {
		return fmt.Errorf("%s is %s, larger than the %d GiB a flashgate card would be: if it really is the card, add -force",
			c.Dev, humanDecimal(c.Bytes), limit>>30)
	}
	return nil
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	DevNum     string // "major:minor" of the mounted device
	MountPoint string
	Source     string
}

// readMountInfo reads proc/self/mountinfo, which, unlike proc/mounts, names
// each mount's device by number (so /dev/root and by-uuid paths resolve).
func readMountInfo(proc string) ([]mountEntry, error) {
	b, err := os.ReadFile(filepath.Join(proc, "self", "mountinfo"))
	if err != nil {
		return nil, err
	}
	return parseMountInfo(b)
}

// parseMountInfo parses mountinfo lines:
// "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue".
func parseMountInfo(b []byte) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 2 || !strings.Contains(f[2], ":") {
			return nil, fmt.Errorf("malformed mountinfo line %q", line)
		}
		out = append(out, mountEntry{DevNum: f[2], MountPoint: unescapeMount(f[4]), Source: unescapeMount(g[1])})
	}
	return out, sc.Err()
}

// unescapeMount undoes the octal escapes (\040 for a space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// disksOf returns the whole disks under the block device devNum: the disk
// itself, the disk of a partition, and, through slaves/, the disks under a
// device-mapper or md device. An unknown number (a virtual file system)
// has none.
func disksOf(roots HostRoots, devNum string) []string {
	real, err := filepath.EvalSymlinks(filepath.Join(roots.Sys, "dev", "block", devNum))
	if err != nil {
		return nil
	}
	var out []string
	var walk func(path string, depth int)
	walk = func(path string, depth int) {
		if depth > 8 {
			return
		}
		if _, err := os.Stat(filepath.Join(path, "partition")); err == nil {
			out = append(out, filepath.Base(filepath.Dir(path)))
			return
		}
		slaves, _ := os.ReadDir(filepath.Join(path, "slaves"))
		if len(slaves) == 0 {
			out = append(out, filepath.Base(path))
			return
		}
		for _, s := range slaves {
			if p, err := filepath.EvalSymlinks(filepath.Join(path, "slaves", s.Name())); err == nil {
				walk(p, depth+1)
			}
		}
	}
	walk(real, 0)
	return out
}

// Write writes image to the card, flushes it to the device, verifies it
// by reading it back past the page cache, and has the kernel re-read the
// card's new partition table. It works on a regular file too (tests).
func (c *Card) Write(ctx context.Context, image string, progress io.Writer) error {
	in, err := os.Open(image)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	// O_EXCL on a block device fails if anything has it open exclusively,
	// mounted file systems included: a last check against races.
	out, err := os.OpenFile(c.Dev, os.O_WRONLY|os.O_EXCL, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", c.Dev, err)
	}
	defer out.Close()
	isDev, err := c.sameDevice(out)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	var done int64
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted after %d of %d bytes: %s is incomplete: %w", done, fi.Size(), c.Dev, err)
		}
		n, rerr := in.Read(buf)
		if n > 0 {
			if _, err := out.Write(buf[:n]); err != nil {
				return fmt.Errorf("write %s at byte %d: %w", c.Dev, done, err)
			}
			done += int64(n)
			if progress != nil && done%(8<<20) == 0 {
				fmt.Fprintf(progress, "\rwritten %d of %d MiB", done>>20, fi.Size()>>20)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("read %s: %w", image, rerr)
		}
	}
	if progress != nil {
		fmt.Fprintf(progress, "\rwritten %d of %d MiB\n", done>>20, fi.Size()>>20)
	}
	// fsync of a block device writes its dirty pages and flushes the
	// device's own write cache.
	if err := out.Sync(); err != nil {
		return fmt.Errorf("flush %s: %w", c.Dev, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("close %s: %w", c.Dev, err)
	}
	if err := verifyImage(image, c.Dev, fi.Size()); err != nil {
		return err
	}
	if isDev {
		if err := rereadPartitions(c.Dev); err != nil && progress != nil {
			fmt.Fprintf(progress, "note: %v; remove and reinsert the card before using it on this machine\n", err)
		}
	}
	return nil
}

// sameDevice refuses an opened device node that is not the block device the
// checks were made on (sysfs's "major:minor" for c.Name), and reports
// whether f is a device at all: a regular file (tests) is not compared.
func (c *Card) sameDevice(f *os.File) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("%s: %w", c.Dev, err)
	}
	if fi.Mode()&os.ModeDevice == 0 {
		return false, nil
	}
	if fi.Mode()&os.ModeCharDevice != 0 {
		return true, fmt.Errorf("%s is a character device, not a disk: give the card's block device", c.Dev)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || len(c.devNums) == 0 {
		return true, fmt.Errorf("%s: cannot tell which block device it is", c.Dev)
	}
	rdev := uint64(st.Rdev)
	if got := fmt.Sprintf("%d:%d", unix.Major(rdev), unix.Minor(rdev)); got != c.devNums[0] {
		return true, fmt.Errorf("%s is block device %s, but the checks were made on %s (%s): refusing to write", c.Dev, got, c.Name, c.devNums[0])
	}
	return true, nil
}

// rereadPartitions asks the kernel to read the card's new partition table
// (BLKRRPART), so its partitions (sdb1, sdb2) match what was written
// instead of what the card held when it was inserted. A device without
// partitions (a loop device attached without partition scanning) has
// nothing to re-read.
func rereadPartitions(dev string) error {
	f, err := os.Open(dev)
	if err != nil {
		return fmt.Errorf("re-read the partition table of %s: %w", dev, err)
	}
	defer f.Close()
	for attempt := 0; ; attempt++ {
		err = unix.IoctlSetInt(int(f.Fd()), unix.BLKRRPART, 0)
		// EBUSY: something (udev's probe of the new data) has the
		// device open exclusively for a moment.
		if err != unix.EBUSY || attempt == 20 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err == nil || err == unix.EINVAL {
		return nil
	}
	return fmt.Errorf("the kernel did not re-read the partition table of %s: %w", dev, err)
}

// verifyImage compares the first size bytes of dev with image. It drops the
// device's cached pages first, so the bytes come from the card.
func verifyImage(image, dev string, size int64) error {
	d, err := os.Open(dev)
	if err != nil {
		return fmt.Errorf("verify: open %s: %w", dev, err)
	}
	defer d.Close()
	if fi, err := d.Stat(); err == nil && fi.Mode()&os.ModeDevice != 0 {
		unix.IoctlSetInt(int(d.Fd()), unix.BLKFLSBUF, 0)
	}
	unix.Fadvise(int(d.Fd()), 0, 0, unix.FADV_DONTNEED)
	img, err := os.Open(image)
	if err != nil {
		return err
	}
	defer img.Close()
	a, b := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); off < size; {
		n := int64(len(a))
		if size-off < n {
			n = size - off
		}
		if _, err := io.ReadFull(img, a[:n]); err != nil {
			return fmt.Errorf("verify: read %s: %w", image, err)
		}
		if _, err := io.ReadFull(d, b[:n]); err != nil {
			return fmt.Errorf("verify: read back %s at byte %d: %w", dev, off, err)
		}
		if !bytes.Equal(a[:n], b[:n]) {
			for i := range n {
				if a[i] != b[i] {
					return fmt.Errorf("verify: %s differs from the image at byte %d: the card is bad or was removed", dev, off+i)
				}
			}
		}
		off += n
	}
	return nil
}

// ErrTooSmall is returned (wrapped) when an image is larger than the card.
var ErrTooSmall = errors.New("card too small")

// CheckFits refuses an image larger than the card, and a device with no
// medium: a card reader with no card, a loop device with no file, are 0
// bytes.
func (c *Card) CheckFits(imageBytes int64) error {
	if c.Bytes == 0 {
		return fmt.Errorf("%s has no medium (0 bytes): is the card in the reader?", c.Dev)
	}
	if imageBytes > c.Bytes {
		return fmt.Errorf("%w: the image is %d bytes, %s holds only %d", ErrTooSmall, imageBytes, c.Dev, c.Bytes)
	}
	return nil
}

func readSysInt(p string) (int64, error) {
	return strconv.ParseInt(readSysString(p), 10, 64)
}

func readSysString(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// humanDecimal prints a size the way card makers label them.
func humanDecimal(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	default:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
}
