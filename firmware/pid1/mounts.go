package pid1

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/internal/paths"
)

// mountPoint is one file system PID 1 mounts at boot.
type mountPoint struct {
	source, target, fstype string
	flags                  uintptr
	data                   string
}

// earlyMounts are mounted in order before anything else runs. /run and /tmp
// are RAM: they are size-limited so a runaway log or core file cannot eat
// the memory the tunnels need (the ALIX has 256 MiB in all).
var earlyMounts = []mountPoint{
	{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755"},
	{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "mode=0620,ptmxmode=0666"},
	{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755,size=8m"},
	{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777,size=16m"},
}

// mountAll mounts each file system; one that fails is reported and the
// rest are still mounted.
func mountAll(mounts []mountPoint, logf func(string, ...any)) {
	for _, m := range mounts {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			logf("mount %s: %v", m.target, err)
			continue
		}
		err := unix.Mount(m.source, m.target, m.fstype, m.flags, m.data)
		if err != nil && !errors.Is(err, unix.EBUSY) { // EBUSY: already mounted (a re-exec)
			logf("mount %s on %s: %v", m.fstype, m.target, err)
		}
	}
}

// ensureConsole makes sure fds 0, 1 and 2 are open on /dev/console: the
// kernel opens it for init only if the initramfs has the node, and every
// message PID 1 prints goes there.
func ensureConsole() {
	var st unix.Stat_t
	if unix.Fstat(1, &st) == nil {
		return
	}
	fd, err := unix.Open("/dev/console", unix.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return // nowhere to say so
	}
	for i := 0; i < 3; i++ {
		unix.Dup2(fd, i)
	}
	if fd > 2 {
		unix.Close(fd)
	}
}

// mountConfig finds the config partition and mounts it read-only at /cfg.
// The disk driver may still be probing, so the scan is retried for up to
// wait.
func mountConfig(wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	var dev string
	var err error
	for {
		if dev, err = findByLabel("/sys/class/block", "/dev", ConfigLabel); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(paths.ConfigDir, 0o755); err != nil {
		return "", err
	}
	flags := uintptr(unix.MS_RDONLY | unix.MS_NOATIME | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_NOSUID)
	// ext4 first: the partition is ext3 (journalled) and the ext4 driver
	// replays its journal at mount; mounted as "ext2" a clean journalled
	// file system would be written without its journal. ext2 remains for
	// kernels built without ext4.
	for _, fstype := range []string{"ext4", "ext2"} {
		err = unix.Mount(dev, paths.ConfigDir, fstype, flags, "")
		if err == nil {
			return dev, nil
		}
	}
	return "", fmt.Errorf("mount %s read-only on /cfg: %w", dev, err)
}

// unmountConfig is the last thing before reboot(2): remount read-only (in
// case configd left it writable) so the file system is clean even if the
// unmount fails because something still holds a file open.
func unmountConfig(logf func(string, ...any)) {
	if err := unix.Mount("", paths.ConfigDir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil && !errors.Is(err, unix.EINVAL) {
		logf("remount /cfg read-only: %v", err)
	}
	if err := unix.Unmount(paths.ConfigDir, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		logf("unmount /cfg: %v", err)
	}
}
