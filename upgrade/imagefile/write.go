package imagefile

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// HashFile returns a file's Part (length and SHA-256), streaming it.
func HashFile(path string) (Part, error) {
	f, err := os.Open(path)
	if err != nil {
		return Part{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return Part{}, fmt.Errorf("hash %s: %w", path, err)
	}
	return Part{Length: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Slot is what goes into an upgrade file: the firmware's identity and its
// two files on the host.
type Slot struct {
	Version, Board string
	Built          int64
	Kernel, Initrd string // host paths
	// Extension says what the firmware reads (nil: nothing said).
	Extension *Extension
}

// Manifest hashes the slot's files and returns its manifest.
func (s Slot) Manifest() (Manifest, error) {
	m := Manifest{Format: 1, Version: s.Version, Board: s.Board, Built: s.Built, Extension: s.Extension}
	var err error
	if m.Kernel, err = HashFile(s.Kernel); err != nil {
		return Manifest{}, err
	}
	if m.Initrd, err = HashFile(s.Initrd); err != nil {
		return Manifest{}, err
	}
	return m, m.Validate()
}

// Write writes the upgrade file for s to w, signed with key (nil:
// unsigned), and returns its header.
func Write(w io.Writer, s Slot, key ed25519.PrivateKey) ([]byte, error) {
	m, err := s.Manifest()
	if err != nil {
		return nil, err
	}
	hdr, err := EncodeHeader(m, key)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(hdr); err != nil {
		return nil, err
	}
	for _, p := range []string{s.Kernel, s.Initrd} {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(w, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("write %s into the upgrade file: %w", p, err)
		}
	}
	return hdr, nil
}
