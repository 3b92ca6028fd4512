package upgrade

import (
	"bytes"
	"fmt"

	"github.com/flashgate/flashgate/firmware/bootfs"
	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/upgrade/imagefile"
)

// TrustPath is the boot partition's file of trusted signing keys.
const TrustPath = "/upgrade.pub"

// Card is the boot partition, as bootslot opens it.
type Card = bootslot.Card

// Trust reads the keys the card trusts.
func Trust(c *Card) (imagefile.Trust, error) {
	b, err := c.Vol.ReadFile(TrustPath, 64*1024)
	if err != nil {
		return imagefile.Trust{}, fmt.Errorf("the card's trusted keys: %w", err)
	}
	return imagefile.ParseTrust(b)
}

// SlotFiles are a slot's files on the boot partition.
type SlotFiles struct {
	Kernel, Initrd, Manifest *bootfs.File
}

// Files opens slot's files.
func Files(c *Card, slot string) (SlotFiles, error) {
	if slot != "a" && slot != "b" {
		return SlotFiles{}, fmt.Errorf("slot %q: the card has slots a and b", slot)
	}
	var s SlotFiles
	var err error
	for _, x := range []struct {
		p **bootfs.File
		n string
	}{{&s.Kernel, "vmlinuz"}, {&s.Initrd, "initrd.img"}, {&s.Manifest, "manifest"}} {
		if *x.p, err = c.Vol.Open("/" + slot + "/" + x.n); err != nil {
			return SlotFiles{}, fmt.Errorf("slot %s: %w (a card flashed before A/B upgrades has no slot b: re-flash it once)", slot, err)
		}
	}
	return s, nil
}

// Slot describes what a slot holds.
type Slot struct {
	Name        string              `json:"name"`
	Manifest    *imagefile.Manifest `json:"manifest,omitempty"` // nil: empty or unreadable
	Signer      string              `json:"signer,omitempty"`
	Problem     string              `json:"problem,omitempty"` // why Manifest is nil
	KernelBytes int64               `json:"kernel_capacity"`
	InitrdBytes int64               `json:"initrd_capacity"`
}

// Slot reads slot's manifest.
func ReadSlot(c *Card, name string) Slot {
	s := Slot{Name: name}
	files, err := Files(c, name)
	if err != nil {
		s.Problem = err.Error()
		return s
	}
	s.KernelBytes, s.InitrdBytes = files.Kernel.Size, files.Initrd.Size
	raw := make([]byte, files.Manifest.Size)
	if _, err := files.Manifest.ReadAt(raw, 0); err != nil {
		s.Problem = fmt.Sprintf("read the manifest: %v", err)
		return s
	}
	if bytes.Equal(raw, make([]byte, len(raw))) {
		s.Problem = "empty"
		return s
	}
	h, err := imagefile.ReadHeader(bytes.NewReader(raw))
	if err != nil {
		s.Problem = fmt.Sprintf("manifest: %v", err)
		return s
	}
	s.Manifest, s.Signer = &h.Manifest, h.SignerName()
	return s
}

// VerifySlot reads a slot's files back and checks them against its
// manifest (the signature is not checked here: Install did, and the card
// is the box's own).
func VerifySlot(c *Card, slot string) error {
	s := ReadSlot(c, slot)
	if s.Manifest == nil {
		return fmt.Errorf("slot %s holds no firmware (%s)", slot, s.Problem)
	}
	files, err := Files(c, slot)
	if err != nil {
		return err
	}
	if err := verify(files.Kernel, s.Manifest.Kernel); err != nil {
		return fmt.Errorf("slot %s kernel: %w", slot, err)
	}
	if err := verify(files.Initrd, s.Manifest.Initrd); err != nil {
		return fmt.Errorf("slot %s initramfs: %w", slot, err)
	}
	return nil
}

// CheckOtherSlot checks what ArmOtherSlot checks, without writing: the
// slot that is not running holds whole firmware, and this boot is not a
// test boot. The console asks it before it changes anything for the
// switch (configd's hand-off of the database).
func CheckOtherSlot(c *Card, run Running) (Slot, error) {
	if run.Slot != "a" && run.Slot != "b" {
		return Slot{}, fmt.Errorf("the running firmware does not know its slot")
	}
	other := bootslot.OtherSlot(run.Slot)
	if err := VerifySlot(c, other); err != nil {
		return Slot{}, err
	}
	s := ReadSlot(c, other)
	boot, err := bootslot.ReadBoot(c.Vol)
	if err != nil {
		return s, err
	}
	if boot.Committed != run.Slot {
		return s, fmt.Errorf("%w: this is a test boot of slot %s; slot %s is the default and boots next anyway", ErrBusy, run.Slot, boot.Committed)
	}
	return s, nil
}

// ArmOtherSlot arms a test boot of the slot that is not running, as an
// upgrade does, after checking it (CheckOtherSlot): the console's "boot
// other slot". Its PID 1 commits it after the health checks, or the box
// comes back to the running slot.
func ArmOtherSlot(c *Card, run Running) (Slot, error) {
	s, err := CheckOtherSlot(c, run)
	if err != nil {
		return s, err
	}
	boot, err := bootslot.ReadBoot(c.Vol)
	if err != nil {
		return s, err
	}
	boot.Once = s.Name
	boot.Last = &bootslot.Record{State: bootslot.StateTrial, From: run.Slot, To: s.Name, FromVersion: run.Version, ToVersion: s.Manifest.Version}
	return s, bootslot.WriteBoot(c.Vol, boot)
}
