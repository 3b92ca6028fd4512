package bootfs

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// memDevice is a disk in memory.
type memDevice struct{ b []byte }

func (m *memDevice) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memDevice) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(m.b)) {
		return 0, io.ErrShortWrite
	}
	return copy(m.b[off:], p), nil
}

// FuzzVolume: a damaged boot partition (bit rot, a card from elsewhere)
// must give errors, never a panic, a hang or a write outside a file. The
// seed is the start of a real FAT16 made by mkfs.vfat and mtools.
func FuzzVolume(f *testing.F) {
	if img, err := os.ReadFile("testdata/fat16-head.img"); err == nil {
		f.Add(img)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// The fuzzer's bytes are the start of a 4 MiB disk; the rest
		// reads as zeros.
		dev := &memDevice{b: make([]byte, 4<<20)}
		copy(dev.b, b)
		v, err := Open(dev, 0)
		if err != nil {
			return
		}
		before := bytes.Clone(dev.b[:min(len(dev.b), 1<<20)])
		for _, p := range []string{"/a/vmlinuz", "/b/manifest", ADVPath, "/syslinux.cfg"} {
			if fl, err := v.Open(p); err == nil {
				buf := make([]byte, min(fl.Size, 4096))
				fl.ReadAt(buf, 0)
			}
		}
		v.ReadADV()
		if !bytes.Equal(before, dev.b[:len(before)]) {
			t.Fatal("reading changed the disk")
		}
	})
}
