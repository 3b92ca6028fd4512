package images

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/bootfs"
	"github.com/flashgate/flashgate/upgrade/imagefile"
)

// signedSmallCard lays out a card as Build does (both slots, syslinux
// menu, trusted key, slot A's manifest) around a stand-in kernel and
// initramfs, with the real tools. It returns the card and slot A's files.
func signedSmallCard(t *testing.T, key ed25519.PrivateKey) (card string, slot imagefile.Slot) {
	t.Helper()
	if err := checkTools(toolSfdisk, toolMkfsVfat, toolMcopy, toolMmd, toolSyslinux, toolMBR, toolMke2fs, toolMenuC32); err != nil {
		t.Fatalf("cannot lay out cards on this host: %v", err)
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	os.MkdirAll(work, 0o755)
	slot = imagefile.Slot{Version: "v1", Board: "qemu", Built: 1700000000,
		Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd.img")}
	os.WriteFile(slot.Kernel, bytes.Repeat([]byte("K"), 3<<20), 0o644)
	os.WriteFile(slot.Initrd, bytes.Repeat([]byte("I"), 4<<20), 0o644)
	card = filepath.Join(dir, "card.img")
	_, _, err := MakeCard(context.Background(), CardSpec{
		Board:   boards.Board{Name: "qemu", MinCardMB: 32, Console: boards.Console{Device: "ttyS0", Baud: 115200}},
		Version: "v1", Epoch: time.Unix(slot.Built, 0), Kernel: slot.Kernel, Initrd: slot.Initrd, Key: key,
		Image: card, UpgradeFile: filepath.Join(dir, "v1.fgup"), Work: work})
	if err != nil {
		t.Fatal(err)
	}
	return card, slot
}

// TestCardLayout checks the card Build lays out: both slots at the
// planned sizes, slot A padded with zeros after its files and described by
// its manifest, slot B empty, the key on the card, a journalled config
// partition, and both file systems clean by their own checkers.
func TestCardLayout(t *testing.T) {
	key, _ := imagefile.GenerateKey()
	card, slot := signedSmallCard(t, key)
	f, err := os.Open(card)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := bootfs.Open(readOnlyFile{f}, bootStart)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := PlanLayout(32)
	plan, _ := planSlots(l.BootBytes, 3<<20, 4<<20)
	for _, s := range Slots {
		k, i, m := SlotPaths(s)
		for p, size := range map[string]int64{k: plan.KernelBytes, i: plan.InitrdBytes, m: slotManifestBytes} {
			bf, err := v.Open(p)
			if err != nil || bf.Size != size {
				t.Fatalf("%s: %v, %d bytes, want %d", p, err, bf.Size, size)
			}
		}
	}
	raw, _ := v.ReadFile("/a/manifest", slotManifestBytes)
	h, err := imagefile.ReadHeader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	trustText, _ := v.ReadFile(TrustPath, 4096)
	trust, err := imagefile.ParseTrust(trustText)
	if err != nil || trust.AllowUnsigned || len(trust.Keys) != 1 {
		t.Fatalf("upgrade.pub: %+v %v", trust, err)
	}
	if err := h.Verify(trust); err != nil || h.Manifest.Version != "v1" {
		t.Fatalf("slot a manifest: %+v %v", h.Manifest, err)
	}
	kf, _ := v.Open("/a/vmlinuz")
	tail := make([]byte, kf.Size-(3<<20))
	kf.ReadAt(tail, 3<<20)
	if !bytes.Equal(tail, make([]byte, len(tail))) {
		t.Fatal("slot a's kernel is not padded with zeros")
	}
	rawB, _ := v.ReadFile("/b/manifest", slotManifestBytes)
	if !bytes.Equal(rawB, make([]byte, slotManifestBytes)) {
		t.Fatal("slot b's manifest is not empty")
	}
	if _, err := v.ReadADV(); err != nil {
		t.Fatalf("ADV: %v", err)
	}
	CheckCardFileSystems(t, card)
	back, err := ExtractSlot(card, "a", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]string{{back.Kernel, slot.Kernel}, {back.Initrd, slot.Initrd}} {
		a, _ := os.ReadFile(p[0])
		b, _ := os.ReadFile(p[1])
		if !bytes.Equal(a, b) {
			t.Errorf("ExtractSlot: %s differs from what went in", p[0])
		}
	}
	// The card's slot says which configuration databases its firmware
	// (built from this tree) reads, and the extracted slot keeps it.
	if back.Extension == nil || !reflect.DeepEqual(back.Extension.ConfigDBFormats, config.DBFormats) || back.Extension.ConfigSchema != config.SchemaVersion {
		t.Errorf("ExtractSlot: extension %+v, want formats %v, schema %d", back.Extension, config.DBFormats, config.SchemaVersion)
	}
}

// CheckCardFileSystems fails t unless CheckCard finds both file systems
// clean.
func CheckCardFileSystems(t *testing.T, card string) {
	t.Helper()
	if err := CheckCard(context.Background(), card); err != nil {
		t.Fatal(err)
	}
}
