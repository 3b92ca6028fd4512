package images

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/flashgate/flashgate/firmware/bootfs"
	"github.com/flashgate/flashgate/upgrade/imagefile"
)

// slotManifestBytes is the size of each slot's manifest file: the upgrade
// file's header, NUL-padded.
const slotManifestBytes = 4096

// VersionFile is where the firmware's version lies in its initramfs.
const VersionFile = "etc/flashgate/version"

// SlotPlan is how big each file of a slot is on the card. Both slots get
// the same sizes, fixed at flash time: a later firmware must fit them (the
// box refuses one that does not, and says by how much).
type SlotPlan struct {
	KernelBytes int64
	InitrdBytes int64
}

// bootFixedBytes is what the boot partition holds besides the two slots:
// FAT metadata (two FATs, the root directory), ldlinux.sys, ldlinux.c32,
// the menu modules (about 400 KiB together), syslinux.cfg and upgrade.pub,
// rounded up.
const bootFixedBytes = 768 * 1024

// planSlots splits the boot partition's room between two slots of equal
// size. Each file gets its size rounded up, and the slack left is shared a
// third to the kernel and two thirds to the initramfs (the Go code grows
// faster than the kernel). The split is fixed for the card's life: a later
// firmware must fit it.
func planSlots(bootBytes, kernel, initrd int64) (SlotPlan, error) {
	const cluster = 64 * 1024 // coarser than any FAT16 cluster, so no slack is lost to rounding
	roundUp := func(n int64) int64 { return (n + cluster - 1) / cluster * cluster }
	half := (bootBytes - bootFixedBytes - 2*slotManifestBytes) / 2 / cluster * cluster
	slack := half - roundUp(kernel) - roundUp(initrd)
	if slack < 0 {
		return SlotPlan{}, fmt.Errorf("%w: two slots of kernel %d + initramfs %d bytes need %d bytes, the boot partition has %d",
			ErrDoesNotFit, kernel, initrd, 2*(roundUp(kernel)+roundUp(initrd)+slotManifestBytes)+bootFixedBytes, bootBytes)
	}
	k := roundUp(kernel) + slack/3/cluster*cluster
	return SlotPlan{KernelBytes: k, InitrdBytes: half - k}, nil
}

// padFile copies src to dst and extends it with zeros to size bytes. A
// padded bzImage boots (the setup header says how much is kernel); the
// kernel skips NUL bytes after the initramfs's archives.
func padFile(src, dst string, size int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, in)
	if err == nil && n > size {
		err = fmt.Errorf("%s is %d bytes, more than the slot's %d", src, n, size)
	}
	if err == nil {
		err = out.Truncate(size)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// zeroFile makes a file of size NUL bytes (slot B before its first
// upgrade: an empty manifest says the slot holds nothing).
func zeroFile(dst string, size int64) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeSlotManifest writes header, padded, as a slot's manifest file.
func writeSlotManifest(dst string, header []byte) error {
	if len(header) > slotManifestBytes {
		return fmt.Errorf("upgrade header is %d bytes, the slot manifest holds %d", len(header), slotManifestBytes)
	}
	b := make([]byte, slotManifestBytes)
	copy(b, header)
	return os.WriteFile(dst, b, 0o644)
}

// AppendToInitramfs appends an uncompressed cpio archive (newc) holding
// files to the initramfs at path. The kernel unpacks concatenated archives
// in order, a later file replacing an earlier one, so this stamps the
// version into a built initramfs without rebuilding it; the archive starts
// 4-byte aligned (NUL padding before it is skipped). Directories named in
// files' paths are created.
func AppendToInitramfs(path string, files map[string][]byte, mode map[string]os.FileMode) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	// NULs up to a 4-byte boundary of the file, then the archive, whose
	// headers and data are aligned relative to its own start (the kernel
	// counts from the start of the whole initramfs, so both agree).
	pad := make([]byte, (4-st.Size()%4)%4)
	var b []byte
	ino := 0x7f000000
	entry := func(name string, m uint32, data []byte) {
		ino++
		hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
			ino, m, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
		b = append(b, hdr...)
		b = append(b, name...)
		b = append(b, 0)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		b = append(b, data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	dirs := map[string]bool{}
	for _, n := range names {
		for i := 0; i < len(n); i++ {
			if n[i] == '/' && !dirs[n[:i]] {
				dirs[n[:i]] = true
				entry(n[:i], 0o040755, nil)
			}
		}
		m := os.FileMode(0o644)
		if mm, ok := mode[n]; ok {
			m = mm
		}
		entry(n, 0o100000|uint32(m.Perm()), files[n])
	}
	entry("TRAILER!!!", 0, nil)
	_, err = f.Write(append(pad, b...))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteUpgradeFile writes the upgrade file (.fgup) of a slot's kernel and
// initramfs, signed with key (nil: unsigned), and returns its header.
func WriteUpgradeFile(dst string, s imagefile.Slot, key ed25519.PrivateKey) ([]byte, error) {
	tmp := dst + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return nil, err
	}
	hdr, err := imagefile.Write(f, s, key)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("write the upgrade file %s: %w", dst, err)
	}
	return hdr, nil
}

// ExtractSlot copies slot's kernel and initramfs (their manifest lengths,
// without the padding) out of a card image into dir, and returns them as
// a Slot with the manifest's version, board and build time: the stuff of
// new upgrade files in tests and benchmarks.
func ExtractSlot(card, slot, dir string) (imagefile.Slot, error) {
	f, err := os.Open(card)
	if err != nil {
		return imagefile.Slot{}, err
	}
	defer f.Close()
	v, err := bootfs.Open(readOnlyFile{f}, bootStart)
	if err != nil {
		return imagefile.Slot{}, fmt.Errorf("%s: %w", card, err)
	}
	k, i, m := SlotPaths(slot)
	raw, err := v.ReadFile(m, slotManifestBytes)
	if err != nil {
		return imagefile.Slot{}, err
	}
	h, err := imagefile.ReadHeader(bytes.NewReader(raw))
	if err != nil {
		return imagefile.Slot{}, fmt.Errorf("slot %s manifest: %w", slot, err)
	}
	s := imagefile.Slot{Version: h.Manifest.Version, Board: h.Manifest.Board, Built: h.Manifest.Built,
		Extension: h.Manifest.Extension, // what that firmware says it reads
		Kernel:    filepath.Join(dir, "vmlinuz-"+h.Manifest.Version), Initrd: filepath.Join(dir, "initrd-"+h.Manifest.Version)}
	for _, p := range []struct {
		src, dst string
		n        int64
	}{{k, s.Kernel, h.Manifest.Kernel.Length}, {i, s.Initrd, h.Manifest.Initrd.Length}} {
		bf, err := v.Open(p.src)
		if err != nil {
			return imagefile.Slot{}, err
		}
		out, err := os.Create(p.dst)
		if err != nil {
			return imagefile.Slot{}, err
		}
		_, err = io.Copy(out, io.NewSectionReader(bf, 0, p.n))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return imagefile.Slot{}, fmt.Errorf("extract %s: %w", p.src, err)
		}
	}
	return s, nil
}

type readOnlyFile struct{ f *os.File }

func (r readOnlyFile) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, off) }
func (r readOnlyFile) WriteAt([]byte, int64) (int, error) {
	return 0, errors.New("the card image is open read-only")
}
