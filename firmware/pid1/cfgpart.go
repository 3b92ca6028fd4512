package pid1

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ConfigLabel is the ext2 volume label of the config partition.
const ConfigLabel = "fgconfig"

// ext2 superblock: 1024 bytes into the device; magic at 56, volume name
// (16 bytes, NUL-padded) at 120.
const (
	superblockOffset = 1024
	superblockSize   = 1024
	ext2Magic        = 0xEF53
)

// ext2Label returns the volume label of an ext2/3/4 superblock, and false if
// sb is not one.
func ext2Label(sb []byte) (string, bool) {
	if len(sb) < 136 || binary.LittleEndian.Uint16(sb[56:58]) != ext2Magic {
		return "", false
	}
	name := sb[120:136]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	return string(name), true
}

// findByLabel scans the block devices listed in sysBlock (/sys/class/block)
// for an ext2 file system labelled label, reading each device node in
// devDir (/dev). No udev, no blkid: the superblock is read directly.
// Whole disks are checked too, so a card formatted without a partition
// table still works.
func findByLabel(sysBlock, devDir, label string) (string, error) {
	entries, err := os.ReadDir(sysBlock)
	if err != nil {
		return "", fmt.Errorf("list block devices: %w", err)
	}
	var seen []string
	for _, e := range entries {
		name := e.Name()
		// RAM disks, loop and zram devices never hold the card.
		if strings.HasPrefix(name, "ram") || strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "zram") {
			continue
		}
		dev := filepath.Join(devDir, name)
		got, ok := readLabel(dev)
		if !ok {
			continue
		}
		if got == label {
			return dev, nil
		}
		seen = append(seen, fmt.Sprintf("%s is labelled %q", name, got))
	}
	if len(seen) > 0 {
		return "", fmt.Errorf("no ext2 file system labelled %q (%s)", label, strings.Join(seen, ", "))
	}
	return "", fmt.Errorf("no ext2 file system labelled %q among %d block devices", label, len(entries))
}

func readLabel(dev string) (string, bool) {
	f, err := os.Open(dev)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sb := make([]byte, superblockSize)
	if _, err := f.ReadAt(sb, superblockOffset); err != nil {
		return "", false
	}
	return ext2Label(sb)
}
