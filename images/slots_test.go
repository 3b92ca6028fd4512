package images

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestPlanSlots(t *testing.T) {
	l, _ := PlanLayout(32)
	// Today's qemu firmware: 5.46 MiB kernel, 5.98 MiB initramfs.
	p, err := planSlots(l.BootBytes, 5728192, 6271592)
	if err != nil {
		t.Fatal(err)
	}
	if p.KernelBytes < 5728192 || p.InitrdBytes < 6271592 {
		t.Fatalf("plan %+v does not hold the firmware", p)
	}
	if total := 2*(p.KernelBytes+p.InitrdBytes+slotManifestBytes) + bootFixedBytes; total > l.BootBytes {
		t.Fatalf("two slots take %d bytes, p1 has %d", total, l.BootBytes)
	}
	if _, err := planSlots(l.BootBytes, 6<<20, 7<<20); !errors.Is(err, ErrDoesNotFit) {
		t.Fatalf("13 MiB slots on a 32 MB card: %v", err)
	}
}

// TestAppendToInitramfs checks the appended archive with cpio(1): the
// files are there, with their directories, after whatever came first.
func TestAppendToInitramfs(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("cpio is not installed")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "initrd")
	os.WriteFile(p, []byte("ABC"), 0o644) // unaligned, as a zstd stream ends
	if err := AppendToInitramfs(p, map[string][]byte{VersionFile: []byte("v9\n")}, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if string(b[:4]) != "ABC\x00" || string(b[4:10]) != "070701" {
		t.Fatalf("archive does not start aligned after the old content: %q", b[:12])
	}
	// The kernel's rule: every header at a multiple of 4 from the start
	// of the whole initramfs, name and data each padded to 4 ("broken
	// padding" otherwise, and the archive is ignored).
	for off := 4; ; {
		if off%4 != 0 || string(b[off:off+6]) != "070701" {
			t.Fatalf("no aligned header at %d: %q", off, b[off:min(off+10, len(b))])
		}
		hex := func(i int) int {
			n, _ := strconv.ParseInt(string(b[off+6+8*i:off+14+8*i]), 16, 64)
			return int(n)
		}
		size, namesize := hex(6), hex(11)
		name := string(b[off+110 : off+110+namesize-1])
		off = (off + 110 + namesize + 3) &^ 3
		off = (off + size + 3) &^ 3
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-off)
			}
			break
		}
	}
	os.WriteFile(filepath.Join(dir, "arch.cpio"), b[4:], 0o644)
	out := filepath.Join(dir, "out")
	os.MkdirAll(out, 0o755)
	cmd := exec.Command("cpio", "-id", "--quiet", "-F", filepath.Join(dir, "arch.cpio"))
	cmd.Dir = out
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio: %v\n%s", err, o)
	}
	if got, _ := os.ReadFile(filepath.Join(out, VersionFile)); string(got) != "v9\n" {
		t.Fatalf("version file holds %q", got)
	}
}
