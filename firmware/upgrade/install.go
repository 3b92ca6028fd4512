package upgrade

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/flashgate/flashgate/firmware/bootfs"
	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/upgrade/imagefile"
)

// Errors Install and Check return (wrapped, with the numbers).
var (
	ErrBoard     = errors.New("built for another board")
	ErrDowngrade = errors.New("older than the running firmware")
	ErrTooBig    = errors.New("does not fit the slot")
	ErrBusy      = errors.New("a test boot is not finished")
	ErrSize      = errors.New("upload size does not match the file's manifest")
)

// Running is the firmware that installs.
type Running struct {
	Slot    string `json:"slot"` // "a" or "b", from the kernel command line
	Version string `json:"version"`
	Board   string `json:"board"`
}

// Options are the caller's choices.
type Options struct {
	AllowDowngrade bool     // the user confirmed installing an older build
	Size           int64    // the upload's length when known (Content-Length), else -1
	WaitFor        []string // interfaces that have an IPv4 address now: the new firmware must get them back
	Progress       func(Progress)
	// BeforeArm runs once the slot is written and read back, before its
	// test boot is armed; an error leaves it unarmed. configd hands its
	// database off there to a firmware that does not read it
	// (config.Store.HandOff): from then on nothing is committed that the
	// firmware would not get.
	BeforeArm func(imagefile.Manifest) error
}

// Progress is reported as the file streams in.
type Progress struct {
	Stage string `json:"stage"` // "write kernel", "write initramfs", "read back", "switch"
	Done  int64  `json:"done"`
	Total int64  `json:"total"`
}

// Plan is what an upgrade file would do, decided from its header alone.
type Plan struct {
	Header    *imagefile.Header
	Target    string // the slot it goes to
	Downgrade bool   // older than the running firmware (needs AllowDowngrade)
	Running   Slot   // the running slot's manifest, if it has one
}

// Check runs every check that needs only the header: signature, board,
// size against the slot and the upload, downgrade, and whether the card is
// in a state to take an upgrade. Nothing is written.
func Check(c *Card, h *imagefile.Header, run Running, opt Options) (Plan, error) {
	p := Plan{Header: h}
	trust, err := Trust(c)
	if err != nil {
		return p, err
	}
	if err := h.Verify(trust); err != nil {
		return p, err
	}
	m := h.Manifest
	if m.Board != run.Board {
		return p, fmt.Errorf("%w: the image is for %s, this box is %s", ErrBoard, m.Board, run.Board)
	}
	if opt.Size >= 0 && opt.Size != h.Size() {
		if opt.Size < h.Size() {
			return p, fmt.Errorf("%w: %v: the upload is %d bytes, the manifest says %d", imagefile.ErrTruncated, ErrSize, opt.Size, h.Size())
		}
		return p, fmt.Errorf("%w: the upload is %d bytes, the manifest says %d", ErrSize, opt.Size, h.Size())
	}
	if run.Slot != "a" && run.Slot != "b" {
		return p, fmt.Errorf("the running firmware does not know its slot (no flashgate.slot on the kernel command line): upgrades need a card flashed with A/B slots")
	}
	boot, err := bootslot.ReadBoot(c.Vol)
	if err != nil {
		return p, fmt.Errorf("read the boot state: %w", err)
	}
	if boot.Committed != run.Slot {
		return p, fmt.Errorf("%w: this is a test boot of slot %s (slot %s is the default); writing slot %s now would overwrite the firmware to fall back to", ErrBusy, run.Slot, boot.Committed, boot.Committed)
	}
	p.Target = bootslot.OtherSlot(run.Slot)
	p.Running = ReadSlot(c, run.Slot)
	files, err := Files(c, p.Target)
	if err != nil {
		return p, err
	}
	if m.Kernel.Length > files.Kernel.Size || m.Initrd.Length > files.Initrd.Size {
		return p, fmt.Errorf("%w: kernel %d bytes (slot holds %d), initramfs %d bytes (slot holds %d); the slots were sized when the card was flashed: re-flash to grow them",
			ErrTooBig, m.Kernel.Length, files.Kernel.Size, m.Initrd.Length, files.Initrd.Size)
	}
	if int64(len(h.Raw)) > files.Manifest.Size {
		return p, fmt.Errorf("%w: the header is %d bytes, the slot's manifest holds %d", ErrTooBig, len(h.Raw), files.Manifest.Size)
	}
	if p.Running.Manifest != nil && m.Built < p.Running.Manifest.Built {
		p.Downgrade = true
		if !opt.AllowDowngrade {
			return p, fmt.Errorf("%w: %s was built before the running %s; confirm the downgrade to install it", ErrDowngrade, m.Version, p.Running.Manifest.Version)
		}
	}
	return p, nil
}

// Install reads an upgrade file from r in one pass and writes it into the
// inactive slot, then arms a test boot of it. The running slot, the FAT
// metadata and the default in the ADV are not written; until the final ADV
// write a power cut leaves the box booting the running slot as before. The
// caller reboots (or not) afterwards.
func Install(c *Card, r io.Reader, run Running, opt Options) (Plan, error) {
	h, err := imagefile.ReadHeader(r)
	if err != nil {
		return Plan{}, err
	}
	p, err := Check(c, h, run, opt)
	if err != nil {
		return p, err
	}
	progress := func(stage string, done, total int64) {
		if opt.Progress != nil {
			opt.Progress(Progress{Stage: stage, Done: done, Total: total})
		}
	}
	files, err := Files(c, p.Target)
	if err != nil {
		return p, err
	}
	// A boot-once armed by an earlier upload that was never rebooted
	// must not boot the half-written slot: disarm it, and mark the slot
	// empty until it is whole again.
	boot, err := bootslot.ReadBoot(c.Vol)
	if err != nil {
		return p, err
	}
	if boot.Once != "" {
		boot.Once = ""
		if err := bootslot.WriteBoot(c.Vol, boot); err != nil {
			return p, fmt.Errorf("disarm the earlier test boot: %w", err)
		}
	}
	if err := zero(files.Manifest, 0); err != nil {
		return p, fmt.Errorf("clear slot %s's manifest: %w", p.Target, err)
	}
	m := h.Manifest
	buf := make([]byte, 64*1024)
	total := m.Kernel.Length + m.Initrd.Length
	for i, part := range []struct {
		name string
		f    *bootfs.File
		p    imagefile.Part
	}{{"kernel", files.Kernel, m.Kernel}, {"initramfs", files.Initrd, m.Initrd}} {
		base := int64(0)
		if i == 1 {
			base = m.Kernel.Length
		}
		src := imagefile.PartReader(r, part.p, part.name)
		for off := int64(0); off < part.p.Length; {
			n, err := io.ReadFull(src, buf[:min(int64(len(buf)), part.p.Length-off)])
			if err != nil {
				return p, err
			}
			if _, err := part.f.WriteAt(buf[:n], off); err != nil {
				return p, fmt.Errorf("write slot %s %s: %w", p.Target, part.name, err)
			}
			off += int64(n)
			progress("write "+part.name, base+off, total)
		}
		// The hash is checked on the read after the last byte.
		if _, err := src.Read(buf[:1]); err != io.EOF {
			return p, err
		}
		if err := zero(part.f, part.p.Length); err != nil {
			return p, fmt.Errorf("clear the rest of slot %s %s: %w", p.Target, part.name, err)
		}
	}
	if err := imagefile.ExpectEnd(r); err != nil {
		return p, err
	}
	if err := c.Sync(); err != nil {
		return p, fmt.Errorf("flush slot %s: %w", p.Target, err)
	}
	progress("read back", 0, total)
	for _, part := range []struct {
		name string
		f    *bootfs.File
		p    imagefile.Part
	}{{"kernel", files.Kernel, m.Kernel}, {"initramfs", files.Initrd, m.Initrd}} {
		if err := verify(part.f, part.p); err != nil {
			return p, fmt.Errorf("read back slot %s %s: %w", p.Target, part.name, err)
		}
	}
	manifest := make([]byte, files.Manifest.Size)
	copy(manifest, h.Raw)
	if _, err := files.Manifest.WriteAt(manifest, 0); err != nil {
		return p, fmt.Errorf("write slot %s manifest: %w", p.Target, err)
	}
	if err := c.Sync(); err != nil {
		return p, fmt.Errorf("flush slot %s manifest: %w", p.Target, err)
	}
	if opt.BeforeArm != nil {
		if err := opt.BeforeArm(m); err != nil {
			return p, fmt.Errorf("slot %s is written but not armed: %w", p.Target, err)
		}
	}
	progress("switch", total, total)
	boot.Once = p.Target
	boot.Last = &bootslot.Record{State: bootslot.StateTrial, From: run.Slot, To: p.Target,
		FromVersion: run.Version, ToVersion: m.Version, WaitFor: opt.WaitFor}
	if err := bootslot.WriteBoot(c.Vol, boot); err != nil {
		return p, fmt.Errorf("arm the test boot of slot %s: %w", p.Target, err)
	}
	return p, nil
}

// zeros is a run of NULs to write and compare with. An array, not a slice
// made at start: it lives in the binary's zeroed data, which no process
// allocates or touches until an upgrade uses it, where a make() here was
// 64 KiB of heap in every process of the multi-call binary.
var zeros [64 * 1024]byte

// zero writes NULs over f from off to its end.
func zero(f *bootfs.File, off int64) error {
	z := zeros[:]
	for off < f.Size {
		n := min(int64(len(z)), f.Size-off)
		if _, err := f.WriteAt(z[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// verify reads f back: the part's bytes must hash as the manifest says and
// the rest of the file must be NULs (the kernel would otherwise try to
// unpack what follows the initramfs).
func verify(f *bootfs.File, p imagefile.Part) error {
	h := sha256.New()
	buf := make([]byte, 64*1024)
	for off := int64(0); off < f.Size; {
		n := min(int64(len(buf)), f.Size-off)
		if _, err := f.ReadAt(buf[:n], off); err != nil && err != io.EOF {
			return err
		}
		data := buf[:n]
		if off < p.Length {
			k := min(n, p.Length-off)
			h.Write(data[:k])
			data = data[k:]
		}
		if len(data) > 0 && !bytes.Equal(data, zeros[:len(data)]) {
			return fmt.Errorf("%w: non-zero bytes after the data at %d", imagefile.ErrCorrupt, off)
		}
		off += n
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != p.SHA256 {
		return fmt.Errorf("%w: the card holds SHA-256 %s, the manifest says %s (the card did not keep what was written)", imagefile.ErrCorrupt, got, p.SHA256)
	}
	return nil
}
