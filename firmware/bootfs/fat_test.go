package bootfs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fatImage makes a 25 MiB FAT16 file system at offset 1 MiB of a file with
// the real tools (mkfs.vfat, mtools, syslinux), like the card's p1, with a
// fragmented file, and returns its path.
func fatImage(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"mkfs.vfat", "mcopy", "mmd", "syslinux"} {
		if _, err := exec.LookPath(tool); err != nil {
			if _, err := os.Stat("/usr/sbin/" + tool); err != nil {
				t.Fatalf("%s is not installed (make setup installs it)", tool)
			}
		}
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "card.img")
	f, _ := os.Create(img)
	f.Truncate(27 << 20)
	f.Close()
	env := append(os.Environ(), "MTOOLS_SKIP_CHECK=1", "MTOOLSRC=/dev/null", "PATH="+os.Getenv("PATH")+":/usr/sbin:/sbin")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run("mkfs.vfat", "-F", "16", "-n", "FGBOOT", "--offset", "2048", "-h", "2048", img, "25600")
	fat := img + "@@1048576"
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o644)
		return p
	}
	run("mmd", "-i", fat, "::/a", "::/b")
	// small, then big, then delete small and grow: "frag" gets two runs.
	run("mcopy", "-i", fat, write("one", bytes.Repeat([]byte{1}, 5000)), "::/a/one")
	run("mcopy", "-i", fat, write("vmlinuz", pattern(300000)), "::/a/vmlinuz")
	run("mcopy", "-i", fat, write("two", bytes.Repeat([]byte{2}, 7000)), "::/b/two")
	run("mdel", "-i", fat, "::/a/one")
	run("mcopy", "-i", fat, write("frag", pattern(40000)), "::/b/frag")
	run("syslinux", "--offset", "1048576", "--install", img)
	return img
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func openCard(t *testing.T, img string) (*Volume, *os.File) {
	t.Helper()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	v, err := Open(f, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return v, f
}

func mtoolsRead(t *testing.T, img, p string) []byte {
	t.Helper()
	cmd := exec.Command("mcopy", "-n", "-i", img+"@@1048576", "::"+p, "-")
	cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1", "MTOOLSRC=/dev/null")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcopy %s: %v", p, err)
	}
	return out
}

func TestReadMatchesMtools(t *testing.T) {
	img := fatImage(t)
	v, _ := openCard(t, img)
	if v.Label() != "FGBOOT" {
		t.Errorf("label %q", v.Label())
	}
	for _, p := range []string{"/a/vmlinuz", "/b/frag", "/b/two"} {
		f, err := v.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, f.Size)
		if _, err := f.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, mtoolsRead(t, img, p)) {
			t.Errorf("%s differs from what mtools reads", p)
		}
	}
	f, _ := v.Open("/b/frag")
	if len(f.Extents) < 2 {
		t.Errorf("/b/frag lies in %d run(s); the test meant it fragmented", len(f.Extents))
	}
	if _, err := v.Open("/c/none"); !IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
}

// TestWriteInPlaceKeepsMetadata overwrites a fragmented file and checks
// that mtools reads the new bytes while the boot sector, FATs, root
// directory and the directories' clusters are byte for byte the same, and
// that dosfsck finds nothing to repair.
func TestWriteInPlaceKeepsMetadata(t *testing.T) {
	img := fatImage(t)
	v, _ := openCard(t, img)
	meta0, _ := v.Metadata()
	dirA0, _ := v.DirectoryBytes("/a")
	dirB0, _ := v.DirectoryBytes("/b")
	f, _ := v.Open("/b/frag")
	want := bytes.Repeat([]byte("new!"), 10000)
	if _, err := f.WriteAt(want, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("x"), f.Size); err == nil {
		t.Fatal("a write past the end of the file was allowed")
	}
	if got := mtoolsRead(t, img, "/b/frag"); !bytes.Equal(got, want) {
		t.Fatal("mtools does not read what was written")
	}
	meta1, _ := v.Metadata()
	dirA1, _ := v.DirectoryBytes("/a")
	dirB1, _ := v.DirectoryBytes("/b")
	if !bytes.Equal(meta0, meta1) || !bytes.Equal(dirA0, dirA1) || !bytes.Equal(dirB0, dirB1) {
		t.Fatal("writing a file's data changed file system metadata")
	}
	if a := mtoolsRead(t, img, "/a/vmlinuz"); !bytes.Equal(a, pattern(300000)) {
		t.Fatal("another file changed")
	}
	fsck(t, img)
}

func fsck(t *testing.T, img string) {
	t.Helper()
	// fsck.vfat has no offset option: check a copy of the partition.
	b, _ := os.ReadFile(img)
	part := filepath.Join(t.TempDir(), "p1")
	os.WriteFile(part, b[1<<20:(1<<20)+25600*1024], 0o644)
	cmd := exec.Command("fsck.vfat", "-n", part)
	cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH")+":/usr/sbin:/sbin")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fsck.vfat -n: %v\n%s", err, out)
	}
}

// TestADV reads the empty ADV the syslinux installer wrote (so the place
// and the checksum rule agree with syslinux's), writes records, reads them
// back, and checks that a torn first copy falls back to the second. That
// ldlinux itself honours and clears the boot-once is checked by booting
// (images.TestSlotSwitchBoots).
func TestADV(t *testing.T) {
	img := fatImage(t)
	v, f := openCard(t, img)
	a, err := v.ReadADV()
	if err != nil {
		t.Fatalf("the ADV the installer wrote: %v", err)
	}
	if len(a) != 0 {
		t.Fatalf("a fresh ADV holds %q", a)
	}
	a[TagBootOnce] = []byte("b")
	a[TagMenuSave] = []byte("a")
	a[TagUpgrade] = []byte("state=trial")
	if err := v.WriteADV(a); err != nil {
		t.Fatal(err)
	}
	old := map[byte]string{TagBootOnce: "b", TagMenuSave: "a", TagUpgrade: "state=trial"}
	delete(a, TagBootOnce)
	a[TagMenuSave] = []byte("b")
	if err := v.WriteADV(a); err != nil {
		t.Fatal(err)
	}
	back, err := v.ReadADV()
	if err != nil || back[TagBootOnce] != nil || string(back[TagMenuSave]) != "b" || string(back[TagUpgrade]) != "state=trial" {
		t.Fatalf("ADV after write: %q %v", back, err)
	}
	lf, _ := v.Open(ADVPath)
	last := lf.Extents[len(lf.Extents)-1]
	first := last.Offset + last.Length - 1024
	// A cut while the second copy was written: the first (new) one wins.
	f.WriteAt(bytes.Repeat([]byte{0xff}, 100), first+512+200)
	if back, err = v.ReadADV(); err != nil || string(back[TagMenuSave]) != "b" {
		t.Fatalf("ADV with a torn second copy: %q %v", back, err)
	}
	// A cut while the first copy was written: the second one (here the
	// old records, as when the cut came before it was rewritten) is used.
	prev, _ := encodeADV(ADV{TagBootOnce: []byte(old[TagBootOnce]), TagMenuSave: []byte(old[TagMenuSave])})
	f.WriteAt(prev, first+512)
	f.WriteAt(bytes.Repeat([]byte{0xff}, 100), first+200)
	if back, err = v.ReadADV(); err != nil || string(back[TagMenuSave]) != "a" || string(back[TagBootOnce]) != "b" {
		t.Fatalf("ADV with a torn first copy: %q %v", back, err)
	}
	f.WriteAt(bytes.Repeat([]byte{0xff}, 100), first+512+200)
	if _, err = v.ReadADV(); err == nil {
		t.Fatal("two torn copies read as consistent")
	}
	if err := v.WriteADV(ADV{TagUpgrade: bytes.Repeat([]byte{'x'}, 255), TagBootOnce: bytes.Repeat([]byte{'y'}, 255)}); err == nil {
		t.Fatal("records larger than the ADV were accepted")
	}
	fsck(t, img)
}
