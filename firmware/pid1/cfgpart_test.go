package pid1

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// mkext2 makes an ext2 image with the given label using mke2fs (e2fsprogs),
// as the image builder does.
func mkext2(t *testing.T, path, label string) {
	t.Helper()
	mke2fs, err := exec.LookPath("mke2fs")
	if err != nil {
		t.Fatalf("mke2fs not found (install e2fsprogs): %v", err)
	}
	out, err := exec.Command(mke2fs, "-q", "-F", "-t", "ext2", "-L", label, path, "256").CombinedOutput()
	if err != nil {
		t.Fatalf("mke2fs: %v\n%s", err, out)
	}
}

func TestFindConfigPartition(t *testing.T) {
	root := t.TempDir()
	sys, dev := filepath.Join(root, "sys/class/block"), filepath.Join(root, "dev")
	for _, d := range []string{sys, dev} {
		os.MkdirAll(d, 0o755)
	}
	add := func(name string) string {
		os.MkdirAll(filepath.Join(sys, name), 0o755)
		return filepath.Join(dev, name)
	}
	os.WriteFile(add("sda"), make([]byte, 4096), 0o600)    // zeros: no file system
	os.WriteFile(add("sda1"), []byte("FAT16 boot"), 0o600) // too short to hold a superblock
	mkext2(t, add("sdb1"), "other")                        // ext2, wrong label
	add("sdc")                                             // listed in sysfs, no device node
	mkext2(t, add("loop0"), ConfigLabel)                   // never considered
	if _, err := findByLabel(sys, dev, ConfigLabel); err == nil || !strings.Contains(err.Error(), `sdb1 is labelled "other"`) {
		t.Fatalf("without the partition: %v, want an error naming what was seen", err)
	}
	mkext2(t, add("sdb2"), ConfigLabel)
	got, err := findByLabel(sys, dev, ConfigLabel)
	if err != nil || got != filepath.Join(dev, "sdb2") {
		t.Errorf("findByLabel = %q, %v; want %s", got, err, filepath.Join(dev, "sdb2"))
	}
	if _, err := findByLabel(filepath.Join(root, "nosys"), dev, ConfigLabel); err == nil {
		t.Error("findByLabel without sysfs succeeded")
	}
}

func TestExt2Label(t *testing.T) {
	sb := make([]byte, 1024)
	sb[56], sb[57] = 0x53, 0xEF
	copy(sb[120:], "fgconfig")
	if l, ok := ext2Label(sb); !ok || l != "fgconfig" {
		t.Errorf("ext2Label = %q, %v; want fgconfig", l, ok)
	}
	copy(sb[120:], "0123456789abcdefXYZ") // 16 bytes, no NUL
	if l, _ := ext2Label(sb); l != "0123456789abcdef" {
		t.Errorf("full-length label %q, want 16 bytes", l)
	}
	sb[56] = 0
	if _, ok := ext2Label(sb); ok {
		t.Error("accepted a superblock without the ext2 magic")
	}
	if _, ok := ext2Label(sb[:100]); ok {
		t.Error("accepted a short superblock")
	}
}

func FuzzExt2Label(f *testing.F) {
	sb := make([]byte, 1024)
	sb[56], sb[57] = 0x53, 0xEF
	copy(sb[120:], "fgconfig")
	f.Add(sb)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if l, ok := ext2Label(b); ok && len(l) > 16 {
			t.Errorf("label %q longer than 16 bytes", l)
		}
	})
}
