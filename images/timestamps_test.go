package images

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFATDateTime(t *testing.T) {
	d, c := fatDateTime(time.Date(2024, 1, 2, 12, 34, 56, 0, time.UTC))
	if d != (44<<9|1<<5|2) || c != (12<<11|34<<5|28) {
		t.Errorf("fatDateTime = %#04x %#04x, want %#04x %#04x", d, c, 44<<9|1<<5|2, 12<<11|34<<5|28)
	}
}

// TestPinTimes makes small FAT16 and ext2 file systems with the real tools,
// pins their timestamps and reads them back with the same tools.
func TestPinTimes(t *testing.T) {
	if err := checkTools(toolMkfsVfat, toolMcopy, toolMmd, toolMdir, toolMke2fs, hostTool{"dumpe2fs", "e2fsprogs"}, hostTool{"e2fsck", "e2fsprogs"}); err != nil {
		t.Fatalf("cannot make file systems on this host: %v", err)
	}
	ctx := context.Background()
	dir := t.TempDir()
	img := filepath.Join(dir, "fs.img")
	const fatAt, extAt = 512 * 8, 16 << 20
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Truncate(img, 20<<20)
	env := []string{"MTOOLS_SKIP_CHECK=1", "TZ=UTC"}
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := command{Env: env}.run(ctx, tool(hostTool{name, ""}), args...)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	run("mkfs.vfat", "-F", "16", "-s", "1", "--offset", "8", img, "8192")
	mimg := img + "@@4096"
	run("mmd", "-i", mimg, "::/a")
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
	run("mcopy", "-i", mimg, filepath.Join(dir, "f"), "::/a/file")
	run("mcopy", "-i", mimg, filepath.Join(dir, "f"), "::/top")
	run("mke2fs", "-q", "-F", "-t", "ext2", "-E", "offset=16777216", img, "4096")

	epoch := time.Date(2024, 1, 2, 12, 34, 56, 0, time.UTC)
	if err := pinFATTimes(img, fatAt, epoch); err != nil {
		t.Fatalf("pinFATTimes: %v", err)
	}
	if err := pinExt2Times(img, extAt, epoch); err != nil {
		t.Fatalf("pinExt2Times: %v", err)
	}

	listing := run("mdir", "-i", mimg, "-/", "::")
	stamps := 0
	for _, l := range strings.Split(listing, "\n") {
		if strings.Contains(l, "<DIR>") || strings.Contains(l, "file") && !strings.Contains(l, "files") || strings.HasPrefix(l, "top") {
			if !strings.Contains(l, "2024-01-02  12:34") {
				t.Errorf("FAT entry not pinned: %q", l)
			}
			stamps++
		}
	}
	if stamps < 4 { // a, top, a/., a/.., a/file
		t.Errorf("found only %d entries in the listing:\n%s", stamps, listing)
	}
	sb := run("dumpe2fs", "-h", img+"?offset=16777216")
	for _, field := range []string{"Filesystem created:", "Last write time:", "Last checked:"} {
		if !strings.Contains(sb, field+strings.Repeat(" ", 26-len(field))+"Tue Jan  2 12:34:56 2024") {
			t.Errorf("ext2 %s not pinned:\n%s", field, sb)
		}
	}
	stat := run("debugfs", "-R", "stat <2>", img+"?offset=16777216")
	if strings.Count(stat, "Tue Jan  2 12:34:56 2024") < 3 {
		t.Errorf("ext2 root inode times not pinned:\n%s", stat)
	}
	if out, err := exec.Command(tool(hostTool{"e2fsck", ""}), "-fn", img+"?offset=16777216").CombinedOutput(); err != nil {
		t.Errorf("e2fsck after pinning: %v\n%s", err, out)
	}
}

func FuzzParseFAT16(f *testing.F) {
	boot := make([]byte, 512)
	copy(boot[11:], []byte{0, 2, 4, 4, 0, 2, 0, 2, 0, 0, 0xf8, 32, 0})
	boot[19], boot[20] = 0, 0x80
	boot[510], boot[511] = 0x55, 0xaa
	f.Add(boot)
	f.Fuzz(func(t *testing.T, b []byte) {
		fs, err := parseFAT16(b)
		if err != nil {
			return
		}
		fat := make([]byte, 1024)
		for _, r := range (fatRegion{cluster: 2}).expand(fs, fat) {
			if r.length <= 0 || r.start < 0 {
				t.Errorf("region %+v from %+v", r, fs)
			}
		}
	})
}

func FuzzParseExt2Super(f *testing.F) {
	sb := make([]byte, 1024)
	sb[0x38], sb[0x39] = 0x53, 0xef
	sb[0x04], sb[0x05] = 0x00, 0x10 // 4096 blocks
	sb[0x14] = 1
	sb[0x20], sb[0x21] = 0x00, 0x20
	sb[0x28], sb[0x29] = 0x00, 0x04
	sb[0x4c] = 1
	sb[0x58] = 0x80
	f.Add(sb)
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := parseExt2Super(b)
		if err != nil {
			return
		}
		if g.groups <= 0 || g.inodeSize < 128 || g.blockSize < 1024 {
			t.Errorf("accepted geometry %+v", g)
		}
	})
}
