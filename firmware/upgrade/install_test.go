package upgrade

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/firmware/bootfs"
	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/images"
	"github.com/flashgate/flashgate/upgrade/imagefile"
)

const cardBase = 1 << 20 // p1 starts 1 MiB into the card image

// lab is a card image laid out by the image builder around stand-in
// firmware, and upgrade files for it.
type lab struct {
	dir  string
	card string
	key  ed25519.PrivateKey
	v1   imagefile.Slot
}

func newLab(t *testing.T) *lab {
	t.Helper()
	os.Setenv("PATH", os.Getenv("PATH")+":/usr/sbin:/sbin")
	l := &lab{dir: t.TempDir()}
	l.key, _ = imagefile.GenerateKey()
	l.v1 = l.slot(t, "v1", 1700000000, 3<<20, 4<<20)
	work := filepath.Join(l.dir, "work")
	os.MkdirAll(work, 0o755)
	l.card = filepath.Join(l.dir, "card.img")
	_, _, err := images.MakeCard(context.Background(), images.CardSpec{
		Board:   boards.Board{Name: "qemu", MinCardMB: 32, Console: boards.Console{Device: "ttyS0", Baud: 115200}},
		Version: "v1", Epoch: time.Unix(l.v1.Built, 0), Kernel: l.v1.Kernel, Initrd: l.v1.Initrd, Key: l.key,
		Image: l.card, UpgradeFile: filepath.Join(l.dir, "v1.fgup"), Work: work})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// slot writes a kernel and initramfs of the given sizes whose bytes depend
// on the version.
func (l *lab) slot(t *testing.T, version string, built int64, kernel, initrd int) imagefile.Slot {
	t.Helper()
	s := imagefile.Slot{Version: version, Board: "qemu", Built: built,
		Kernel: filepath.Join(l.dir, version+"-vmlinuz"), Initrd: filepath.Join(l.dir, version+"-initrd")}
	r := rand.New(rand.NewSource(built))
	for p, n := range map[string]int{s.Kernel: kernel, s.Initrd: initrd} {
		b := make([]byte, n)
		r.Read(b)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func (l *lab) file(t *testing.T, s imagefile.Slot, key ed25519.PrivateKey) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := imagefile.Write(&b, s, key); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func (l *lab) open(t *testing.T) *Card {
	t.Helper()
	c, err := bootslot.OpenCard(l.card, cardBase)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var runningA = Running{Slot: "a", Version: "v1", Board: "qemu"}

// mtoolsRead reads a file of the card's boot partition with mtools: an
// independent reader of the FAT.
func mtoolsRead(t *testing.T, card, p string) []byte {
	t.Helper()
	cmd := exec.Command("mcopy", "-n", "-i", card+"@@1048576", "::"+p, "-")
	cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1", "MTOOLSRC=/dev/null")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcopy %s: %v", p, err)
	}
	return out
}

func TestInstall(t *testing.T) {
	l := newLab(t)
	c := l.open(t)
	meta0, _ := c.Vol.Metadata()
	dirA0, _ := c.Vol.DirectoryBytes("/a")
	dirB0, _ := c.Vol.DirectoryBytes("/b")
	slotA0 := mtoolsRead(t, l.card, "/a/vmlinuz")

	v2 := l.slot(t, "v2", 1700000100, 2<<20+123, 4<<20+77)
	file := l.file(t, v2, l.key)
	var stages []string
	p, err := Install(c, bytes.NewReader(file), runningA, Options{Size: int64(len(file)), WaitFor: []string{"eth0"},
		Progress: func(pr Progress) {
			if len(stages) == 0 || stages[len(stages)-1] != pr.Stage {
				stages = append(stages, pr.Stage)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Target != "b" || p.Downgrade {
		t.Fatalf("plan %+v", p)
	}
	if got := strings.Join(stages, ","); got != "write kernel,write initramfs,read back,switch" {
		t.Errorf("progress stages %s", got)
	}
	// What mtools reads from slot b is the new firmware, then zeros.
	for path, src := range map[string]string{"/b/vmlinuz": v2.Kernel, "/b/initrd.img": v2.Initrd} {
		want, _ := os.ReadFile(src)
		got := mtoolsRead(t, l.card, path)
		if !bytes.Equal(got[:len(want)], want) || !bytes.Equal(got[len(want):], make([]byte, len(got)-len(want))) {
			t.Errorf("%s does not hold the new firmware padded with zeros", path)
		}
	}
	if !bytes.Equal(mtoolsRead(t, l.card, "/a/vmlinuz"), slotA0) {
		t.Error("slot a changed")
	}
	meta1, _ := c.Vol.Metadata()
	dirA1, _ := c.Vol.DirectoryBytes("/a")
	dirB1, _ := c.Vol.DirectoryBytes("/b")
	if !bytes.Equal(meta0, meta1) || !bytes.Equal(dirA0, dirA1) || !bytes.Equal(dirB0, dirB1) {
		t.Error("the upgrade changed FAT metadata (boot sector, FATs, root or slot directories)")
	}
	b := ReadSlot(c, "b")
	if b.Manifest == nil || b.Manifest.Version != "v2" || b.Signer != imagefile.Fingerprint(l.key.Public().(ed25519.PublicKey)) {
		t.Errorf("slot b: %+v", b)
	}
	boot, err := bootslot.ReadBoot(c.Vol)
	if err != nil || boot.Committed != "a" || boot.Once != "b" || boot.Last == nil ||
		boot.Last.State != bootslot.StateTrial || boot.Last.ToVersion != "v2" || boot.Last.FromVersion != "v1" || strings.Join(boot.Last.WaitFor, ",") != "eth0" {
		t.Fatalf("boot state %+v %+v %v", boot, boot.Last, err)
	}
	if err := images.CheckCard(context.Background(), l.card); err != nil {
		t.Fatal(err)
	}
}

// BeforeArm sees the new firmware's manifest once the slot is written, and
// its error leaves the slot unarmed (configd's hand-off failed: the box
// must not boot a firmware that cannot read the database).
func TestBeforeArm(t *testing.T) {
	l := newLab(t)
	c := l.open(t)
	v2 := l.slot(t, "v2", 1700000100, 2<<20, 3<<20)
	v2.Extension = &imagefile.Extension{ConfigDBFormats: []int{2, 3}}
	file := l.file(t, v2, l.key)
	var seen []string
	refuse := errors.New("the hand-off failed")
	_, err := Install(c, bytes.NewReader(file), runningA, Options{Size: int64(len(file)), BeforeArm: func(m imagefile.Manifest) error {
		seen = append(seen, fmt.Sprint(m.Version, m.ConfigDBFormats()))
		return refuse
	}})
	if !errors.Is(err, refuse) || strings.Join(seen, ";") != "v2[2 3]" {
		t.Fatalf("Install with a failing BeforeArm: %v (saw %v)", err, seen)
	}
	if boot, _ := bootslot.ReadBoot(c.Vol); boot.Once != "" || boot.Last != nil {
		t.Fatalf("armed after BeforeArm failed: %+v", boot)
	}
	_, err = Install(c, bytes.NewReader(file), runningA, Options{Size: int64(len(file)), BeforeArm: func(m imagefile.Manifest) error { return nil }})
	if boot, _ := bootslot.ReadBoot(c.Vol); err != nil || boot.Once != "b" {
		t.Fatalf("Install: %v, boot %+v", err, boot)
	}
}

// TestRefusedBeforeWriting: each bad file is refused with its reason and
// the card is byte for byte what it was.
func TestRefusedBeforeWriting(t *testing.T) {
	l := newLab(t)
	other, _ := imagefile.GenerateKey()
	v2 := l.slot(t, "v2", 1700000100, 1<<20, 1<<20)
	good := l.file(t, v2, l.key)
	otherBoard := v2
	otherBoard.Board = "alix2d13"
	old := l.slot(t, "v0", 1600000000, 1<<20, 1<<20)
	huge := l.slot(t, "v3", 1700000200, 1<<20, 9<<20)
	cases := []struct {
		name string
		file []byte
		size int64
		want error
		says string
	}{
		{"unsigned", l.file(t, v2, nil), -1, imagefile.ErrUnsigned, "accepts only images signed by"},
		{"other key", l.file(t, v2, other), -1, imagefile.ErrUntrusted, "this box trusts"},
		{"other board", l.file(t, otherBoard, l.key), -1, ErrBoard, "for alix2d13, this box is qemu"},
		{"truncated upload", good[:len(good)/2], int64(len(good) / 2), imagefile.ErrTruncated, "the upload is"},
		{"downgrade", l.file(t, old, l.key), -1, ErrDowngrade, "confirm the downgrade"},
		{"too big", l.file(t, huge, l.key), -1, ErrTooBig, "re-flash to grow them"},
		{"not an upgrade file", mtoolsRead(t, l.card, "/a/vmlinuz")[:4096], -1, imagefile.ErrNotImage, "starts with"},
	}
	for _, tc := range cases {
		before, _ := os.ReadFile(l.card)
		c := l.open(t)
		_, err := Install(c, bytes.NewReader(tc.file), runningA, Options{Size: tc.size})
		c.Close()
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: got %v, want %v saying %q", tc.name, err, tc.want, tc.says)
		}
		if after, _ := os.ReadFile(l.card); !bytes.Equal(before, after) {
			t.Errorf("%s: the card changed", tc.name)
		}
	}
	// Confirmed, the downgrade goes in.
	c := l.open(t)
	if p, err := Install(c, bytes.NewReader(l.file(t, old, l.key)), runningA, Options{Size: -1, AllowDowngrade: true}); err != nil || !p.Downgrade {
		t.Errorf("confirmed downgrade: %+v %v", p, err)
	}
	// During a test boot of b, slot a is the fallback: not writable.
	if _, err := Install(c, bytes.NewReader(good), Running{Slot: "b", Version: "v0", Board: "qemu"}, Options{Size: -1}); !errors.Is(err, ErrBusy) {
		t.Errorf("upgrade during a test boot: %v", err)
	}
}

// TestBadPayloadNeverArmed: a file whose header is good but whose kernel
// is damaged, or which ends early with no size known, is written partly
// but the slot is never armed: the box keeps booting slot a.
func TestBadPayloadNeverArmed(t *testing.T) {
	l := newLab(t)
	v2 := l.slot(t, "v2", 1700000100, 1<<20, 1<<20)
	good := l.file(t, v2, l.key)
	corrupt := bytes.Clone(good)
	corrupt[len(good)-(2<<20)+1000] ^= 1
	for name, tc := range map[string]struct {
		file []byte
		want error
	}{
		"corrupt kernel":   {corrupt, imagefile.ErrCorrupt},
		"truncated stream": {good[:len(good)-100], imagefile.ErrTruncated},
	} {
		c := l.open(t)
		_, err := Install(c, bytes.NewReader(tc.file), runningA, Options{Size: -1})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
		boot, _ := bootslot.ReadBoot(c.Vol)
		if boot.Once != "" || boot.Committed != "a" {
			t.Errorf("%s: boot state %+v: slot b armed", name, boot)
		}
		if s := ReadSlot(c, "b"); s.Manifest != nil {
			t.Errorf("%s: slot b claims to hold %s", name, s.Manifest.Version)
		}
		c.Close()
	}
}

// cutDevice is the card losing power: writes go through until budget
// bytes have been written, the write that crosses it lands only partly,
// and everything after fails.
type cutDevice struct {
	f      *os.File
	budget int64
}

var errPowerCut = errors.New("power cut")

func (d *cutDevice) ReadAt(p []byte, off int64) (int, error) { return d.f.ReadAt(p, off) }
func (d *cutDevice) WriteAt(p []byte, off int64) (int, error) {
	if d.budget <= 0 {
		return 0, errPowerCut
	}
	n := min(int64(len(p)), d.budget)
	d.budget -= n
	if _, err := d.f.WriteAt(p[:n], off); err != nil {
		return 0, err
	}
	if n < int64(len(p)) {
		return int(n), errPowerCut
	}
	return len(p), nil
}

// TestPowerCutDuringInstall cuts the power at random bytes of an
// upgrade's writes. After every cut the loader's view must be one of two:
// slot a by default with nothing armed (or an intact slot b armed), and
// the default slot's files must match its manifest; fsck.vfat must find
// nothing to repair.
func TestPowerCutDuringInstall(t *testing.T) {
	l := newLab(t)
	v2 := l.slot(t, "v2", 1700000100, 1<<20, 2<<20)
	file := l.file(t, v2, l.key)
	pristine, _ := os.ReadFile(l.card)
	total := int64(1<<20+2<<20) + 64<<10 // about the bytes an install writes
	r := rand.New(rand.NewSource(1))
	trials := 12
	if testing.Short() {
		trials = 4
	}
	armed := 0
	for i := 0; i < trials; i++ {
		os.WriteFile(l.card, pristine, 0o644)
		cut := r.Int63n(total + total/4)
		if i == trials-1 {
			cut = total * 4 // and one that completes
		}
		f, _ := os.OpenFile(l.card, os.O_RDWR, 0)
		dev := &cutDevice{f: f, budget: cut}
		vol, err := bootfs.Open(dev, cardBase)
		if err != nil {
			t.Fatal(err)
		}
		c := bootslot.NewCard(l.card, dev, vol)
		_, ierr := Install(c, bytes.NewReader(file), runningA, Options{Size: -1})
		f.Close()

		after := l.open(t)
		boot, err := bootslot.ReadBoot(after.Vol)
		if err != nil {
			t.Fatalf("cut at %d (%v): the ADV is unreadable: %v", cut, ierr, err)
		}
		if boot.Committed != "a" {
			t.Fatalf("cut at %d: default slot %s", cut, boot.Committed)
		}
		check := []string{"a"}
		if boot.Once != "" {
			armed++
			check = append(check, boot.Once)
		}
		for _, s := range check {
			if err := VerifySlot(after, s); err != nil {
				t.Fatalf("cut at %d (%v): slot %s: %v", cut, ierr, s, err)
			}
		}
		after.Close()
		if err := images.CheckCard(context.Background(), l.card); err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	if armed == 0 {
		t.Error("no trial got as far as arming slot b")
	}
	t.Logf("%d cuts, %d left slot b armed (and whole)", trials, armed)
}
