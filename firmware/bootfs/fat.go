// Package bootfs reads and writes the card's boot partition (FAT16) without
// ever changing its file system metadata.
//
// An upgrade must leave the loader able to find the running slot at every
// instant, including when the power fails halfway through a sector. The
// builder therefore lays both slots' files out at flash time at their full
// size; afterwards the box only overwrites the data clusters of the inactive
// slot's files and the two copies of syslinux's ADV (auxiliary data vector),
// which lie inside ldlinux.sys. The boot sector, the FATs and every directory
// entry are read here, never written, so no cut can damage slot A's entries.
//
// The partition is never mounted: the Linux vfat driver would mark the volume
// dirty on a read-write mount and update times in directory entries.
package bootfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Device is what a Volume lies on: the partition's block device on the box,
// a card image file on the host and in tests.
type Device interface {
	io.ReaderAt
	io.WriterAt
}

// Volume is an opened FAT16 boot partition.
type Volume struct {
	dev          Device
	base         int64 // byte offset of the partition on dev
	sectorSize   int64
	clusterSize  int64
	fatStart     int64 // byte offset of the first FAT, relative to base
	fatBytes     int64
	rootStart    int64
	rootEntries  int
	dataStart    int64
	clusterCount uint32
	label        string
	fat          []byte // the first FAT, read once
}

// Open reads the boot sector and the first FAT of the FAT16 file system at
// byte offset base of dev.
func Open(dev Device, base int64) (*Volume, error) {
	bs := make([]byte, 512)
	if _, err := dev.ReadAt(bs, base); err != nil {
		return nil, fmt.Errorf("read the boot sector: %w", err)
	}
	if bs[510] != 0x55 || bs[511] != 0xAA {
		return nil, errors.New("no FAT boot sector (signature 55 AA missing)")
	}
	le := binary.LittleEndian
	v := &Volume{dev: dev, base: base}
	v.sectorSize = int64(le.Uint16(bs[11:]))
	spc := int64(bs[13])
	reserved := int64(le.Uint16(bs[14:]))
	nfats := int64(bs[16])
	v.rootEntries = int(le.Uint16(bs[17:]))
	total := int64(le.Uint16(bs[19:]))
	if total == 0 {
		total = int64(le.Uint32(bs[32:]))
	}
	fatSectors := int64(le.Uint16(bs[22:]))
	switch v.sectorSize {
	case 512, 1024, 2048, 4096:
	default:
		return nil, fmt.Errorf("boot sector: %d bytes per sector is not FAT", v.sectorSize)
	}
	if spc == 0 || spc&(spc-1) != 0 || reserved == 0 || nfats == 0 || fatSectors == 0 || v.rootEntries == 0 {
		return nil, errors.New("boot sector: not a FAT12/16 file system (FAT32 and exFAT are not used on the card)")
	}
	v.clusterSize = spc * v.sectorSize
	v.fatStart = reserved * v.sectorSize
	v.fatBytes = fatSectors * v.sectorSize
	v.rootStart = v.fatStart + nfats*v.fatBytes
	rootBytes := (int64(v.rootEntries)*32 + v.sectorSize - 1) / v.sectorSize * v.sectorSize
	v.dataStart = v.rootStart + rootBytes
	if total*v.sectorSize <= v.dataStart {
		return nil, errors.New("boot sector: the file system is smaller than its own metadata")
	}
	clusters := (total*v.sectorSize - v.dataStart) / v.clusterSize
	if clusters < 4085 || clusters >= 65525 {
		return nil, fmt.Errorf("boot sector: %d clusters is not FAT16", clusters)
	}
	if v.fatBytes < (clusters+2)*2 {
		return nil, errors.New("boot sector: the FAT is too small for the clusters")
	}
	v.clusterCount = uint32(clusters)
	if bs[38] == 0x29 {
		v.label = strings.TrimRight(string(bs[43:54]), " ")
	}
	v.fat = make([]byte, v.fatBytes)
	if _, err := dev.ReadAt(v.fat, base+v.fatStart); err != nil {
		return nil, fmt.Errorf("read the FAT: %w", err)
	}
	return v, nil
}

// Label is the volume label of the boot sector ("FGBOOT" on our cards).
func (v *Volume) Label() string { return v.label }

// Extent is a run of bytes of a file that lie contiguously on the device.
type Extent struct {
	Offset int64 // byte offset on the device (partition offset included)
	Length int64
}

// File is a file of the volume whose clusters are known. Its size never
// changes: reads and writes stay inside it.
type File struct {
	Path    string
	Size    int64
	Extents []Extent // cover Size bytes, in file order
	v       *Volume
}

type dirEntry struct {
	name    string // "NAME.EXT", upper case
	attr    byte
	cluster uint32
	size    int64
}

// chain follows the FAT from cluster first and returns the clusters in
// order; max bounds it (a loop in a damaged FAT must not hang the box).
func (v *Volume) chain(first uint32, max int) ([]uint32, error) {
	var out []uint32
	c := first
	for {
		if c < 2 || c >= v.clusterCount+2 {
			return nil, fmt.Errorf("cluster %d is outside the file system", c)
		}
		out = append(out, c)
		if len(out) > max {
			return nil, fmt.Errorf("cluster chain from %d is longer than %d clusters (a loop in the FAT?)", first, max)
		}
		next := uint32(binary.LittleEndian.Uint16(v.fat[2*c:]))
		switch {
		case next >= 0xFFF8:
			return out, nil
		case next == 0xFFF7:
			return nil, fmt.Errorf("cluster %d is marked bad", c)
		}
		c = next
	}
}

func (v *Volume) clusterOffset(c uint32) int64 {
	return v.base + v.dataStart + int64(c-2)*v.clusterSize
}

// readDir returns the entries of the root directory (cluster 0) or of a
// subdirectory.
func (v *Volume) readDir(cluster uint32) ([]dirEntry, error) {
	var raw []byte
	if cluster == 0 {
		raw = make([]byte, v.rootEntries*32)
		if _, err := v.dev.ReadAt(raw, v.base+v.rootStart); err != nil {
			return nil, fmt.Errorf("read the root directory: %w", err)
		}
	} else {
		cs, err := v.chain(cluster, 64)
		if err != nil {
			return nil, err
		}
		raw = make([]byte, int64(len(cs))*v.clusterSize)
		for i, c := range cs {
			if _, err := v.dev.ReadAt(raw[int64(i)*v.clusterSize:int64(i+1)*v.clusterSize], v.clusterOffset(c)); err != nil {
				return nil, fmt.Errorf("read a directory: %w", err)
			}
		}
	}
	var out []dirEntry
	for i := 0; i+32 <= len(raw); i += 32 {
		e := raw[i : i+32]
		if e[0] == 0 {
			break
		}
		attr := e[11]
		if e[0] == 0xE5 || attr&0x0F == 0x0F || attr&0x08 != 0 { // deleted, long name, volume label
			continue
		}
		name := strings.TrimRight(string(e[0:8]), " ")
		if e[0] == 0x05 {
			name = "\xE5" + name[1:]
		}
		if ext := strings.TrimRight(string(e[8:11]), " "); ext != "" {
			name += "." + ext
		}
		out = append(out, dirEntry{
			name:    name,
			attr:    attr,
			cluster: uint32(binary.LittleEndian.Uint16(e[26:])),
			size:    int64(binary.LittleEndian.Uint32(e[28:])),
		})
	}
	return out, nil
}

// Open finds the file at path ("/b/vmlinuz"), by its 8.3 name, any case.
func (v *Volume) Open(path string) (*File, error) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	dir := uint32(0)
	for i, p := range parts {
		entries, err := v.readDir(dir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var found *dirEntry
		for j := range entries {
			if entries[j].name == strings.ToUpper(p) {
				found = &entries[j]
				break
			}
		}
		if found == nil {
			return nil, fmt.Errorf("%s: %w", path, errNotExist)
		}
		last := i == len(parts)-1
		isDir := found.attr&0x10 != 0
		if !last {
			if !isDir {
				return nil, fmt.Errorf("%s: %s is not a directory", path, p)
			}
			dir = found.cluster
			continue
		}
		if isDir {
			return nil, fmt.Errorf("%s is a directory", path)
		}
		f := &File{Path: path, Size: found.size, v: v}
		if found.size == 0 {
			return f, nil
		}
		need := int((found.size + v.clusterSize - 1) / v.clusterSize)
		if need > int(v.clusterCount) {
			return nil, fmt.Errorf("%s: %d bytes is more than the file system holds", path, found.size)
		}
		cs, err := v.chain(found.cluster, need)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(cs) != need {
			return nil, fmt.Errorf("%s: %d bytes need %d clusters, the FAT chains %d", path, found.size, need, len(cs))
		}
		left := found.size
		for _, c := range cs {
			n := min(left, v.clusterSize)
			off := v.clusterOffset(c)
			if k := len(f.Extents); k > 0 && f.Extents[k-1].Offset+f.Extents[k-1].Length == off {
				f.Extents[k-1].Length += n
			} else {
				f.Extents = append(f.Extents, Extent{Offset: off, Length: n})
			}
			left -= n
		}
		return f, nil
	}
	return nil, fmt.Errorf("%s: empty path", path)
}

var errNotExist = errors.New("no such file on the boot partition")

// IsNotExist reports whether err says a file is missing.
func IsNotExist(err error) bool { return errors.Is(err, errNotExist) }

// span calls f for each piece of [off, off+n) of the file, with the device
// offset and the position in the caller's buffer.
func (f *File) span(off, n int64, do func(devOff, bufOff, length int64) error) error {
	if off < 0 || n < 0 || off+n > f.Size {
		return fmt.Errorf("%s: bytes %d..%d are outside the file's %d bytes (files on the boot partition never grow)", f.Path, off, off+n, f.Size)
	}
	pos := int64(0) // file offset of the current extent
	done := int64(0)
	for _, e := range f.Extents {
		if done == n {
			break
		}
		start := off + done
		if start >= pos+e.Length {
			pos += e.Length
			continue
		}
		in := start - pos
		k := min(e.Length-in, n-done)
		if err := do(e.Offset+in, done, k); err != nil {
			return err
		}
		done += k
		pos += e.Length
	}
	return nil
}

// ReadAt reads len(p) bytes at off; it never reads past the file's size.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	n := int64(len(p))
	if off+n > f.Size {
		n = max(f.Size-off, 0)
	}
	err := f.span(off, n, func(devOff, bufOff, length int64) error {
		_, err := f.v.dev.ReadAt(p[bufOff:bufOff+length], devOff)
		return err
	})
	if err != nil {
		return 0, err
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// WriteAt overwrites len(p) bytes of the file's data at off. It refuses to
// write past the file's size: that would need a new cluster, a FAT change.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	err := f.span(off, int64(len(p)), func(devOff, bufOff, length int64) error {
		_, err := f.v.dev.WriteAt(p[bufOff:bufOff+length], devOff)
		return err
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// ReadFile reads a whole small file (up to limit bytes).
func (v *Volume) ReadFile(path string, limit int64) ([]byte, error) {
	f, err := v.Open(path)
	if err != nil {
		return nil, err
	}
	if f.Size > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d expected", path, f.Size, limit)
	}
	b := make([]byte, f.Size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// Metadata returns a copy of every byte of the volume that is file system
// metadata: boot and reserved sectors, both FATs and the root directory.
// Tests compare it before and after an upgrade.
func (v *Volume) Metadata() ([]byte, error) {
	b := make([]byte, v.dataStart)
	if _, err := v.dev.ReadAt(b, v.base); err != nil {
		return nil, err
	}
	return b, nil
}

// DirectoryClusters returns the raw bytes of a subdirectory, for the same
// comparison.
func (v *Volume) DirectoryBytes(path string) ([]byte, error) {
	entries, err := v.readDir(0)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.name == strings.ToUpper(strings.Trim(path, "/")) && e.attr&0x10 != 0 {
			cs, err := v.chain(e.cluster, 64)
			if err != nil {
				return nil, err
			}
			var buf bytes.Buffer
			for _, c := range cs {
				b := make([]byte, v.clusterSize)
				if _, err := v.dev.ReadAt(b, v.clusterOffset(c)); err != nil {
					return nil, err
				}
				buf.Write(b)
			}
			return buf.Bytes(), nil
		}
	}
	return nil, fmt.Errorf("%s: %w", path, errNotExist)
}
