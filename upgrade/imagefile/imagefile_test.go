package imagefile

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// slotFiles writes a small kernel and initramfs and returns their slot.
func slotFiles(t *testing.T, kernel, initrd string) Slot {
	t.Helper()
	dir := t.TempDir()
	k, i := filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initrd.img")
	os.WriteFile(k, []byte(kernel), 0o644)
	os.WriteFile(i, []byte(initrd), 0o644)
	return Slot{Version: "v2", Board: "qemu", Built: 1700000000, Kernel: k, Initrd: i}
}

func build(t *testing.T, s Slot, key ed25519.PrivateKey) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := Write(&b, s, key); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// readAll reads a whole upgrade file as the box does: header, verify,
// both parts, end.
func readAll(file []byte, trust Trust) (*Header, []byte, []byte, error) {
	r := bytes.NewReader(file)
	h, err := ReadHeader(r)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := h.Verify(trust); err != nil {
		return h, nil, nil, err
	}
	k, err := io.ReadAll(PartReader(r, h.Manifest.Kernel, "kernel"))
	if err != nil {
		return h, nil, nil, err
	}
	i, err := io.ReadAll(PartReader(r, h.Manifest.Initrd, "initramfs"))
	if err != nil {
		return h, nil, nil, err
	}
	return h, k, i, ExpectEnd(r)
}

func TestRoundTripSigned(t *testing.T) {
	key, _ := GenerateKey()
	file := build(t, slotFiles(t, "KERNEL-BYTES", "INITRD-BYTES-LONGER"), key)
	trust := Trust{Keys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}}
	h, k, i, err := readAll(file, trust)
	if err != nil {
		t.Fatal(err)
	}
	if string(k) != "KERNEL-BYTES" || string(i) != "INITRD-BYTES-LONGER" {
		t.Fatalf("parts %q %q", k, i)
	}
	if h.Manifest.Version != "v2" || h.Manifest.Board != "qemu" || h.Size() != int64(len(file)) {
		t.Fatalf("header %+v size %d of %d", h.Manifest, h.Size(), len(file))
	}
	if h.SignerName() != Fingerprint(key.Public().(ed25519.PublicKey)) {
		t.Fatalf("signer %s", h.SignerName())
	}
}

func TestRefusals(t *testing.T) {
	key, _ := GenerateKey()
	other, _ := GenerateKey()
	trust := Trust{Keys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}}
	s := slotFiles(t, "KERNEL-BYTES", "INITRD-BYTES")
	good := build(t, s, key)
	hdrLen := len(good) - len("KERNEL-BYTES") - len("INITRD-BYTES")

	flip := func(at int) []byte {
		b := bytes.Clone(good)
		b[at] ^= 0x01
		return b
	}
	manifestAt := bytes.Index(good, []byte(`"version":"v2"`)) + len(`"version":"v`)
	cases := []struct {
		name string
		file []byte
		want error
		says string
	}{
		{"empty", nil, ErrNotImage, "empty"},
		{"card image", append([]byte{0xeb, 0x3c, 0x90}, make([]byte, 100)...), ErrNotImage, "flashgate flash"},
		{"unsigned", build(t, s, nil), ErrUnsigned, "accepts only images signed by " + Fingerprint(trust.Keys[0])},
		{"other key", build(t, s, other), ErrUntrusted, "signed by " + Fingerprint(other.Public().(ed25519.PublicKey))},
		{"manifest edited", flip(manifestAt), ErrSignature, "does not match its signature"},
		{"truncated in header", good[:hdrLen-10], ErrTruncated, "ends in the signature"},
		{"truncated in kernel", good[:hdrLen+5], ErrTruncated, "5 bytes into the kernel's 12"},
		{"truncated in initramfs", good[:len(good)-1], ErrTruncated, "11 bytes into the initramfs's 12"},
		{"kernel corrupt", flip(hdrLen + 3), ErrCorrupt, "kernel's SHA-256"},
		{"initramfs corrupt", flip(len(good) - 1), ErrCorrupt, "initramfs's SHA-256"},
		{"trailing data", append(bytes.Clone(good), 'x'), ErrCorrupt, "data after the initramfs"},
	}
	for _, c := range cases {
		_, _, _, err := readAll(c.file, trust)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: got %v, want %v saying %q", c.name, err, c.want, c.says)
		}
	}
	// A developer's box takes the unsigned file.
	if _, _, _, err := readAll(build(t, s, nil), Trust{AllowUnsigned: true}); err != nil {
		t.Errorf("unsigned on a developer's box: %v", err)
	}
}

func TestKeyFiles(t *testing.T) {
	key, _ := GenerateKey()
	back, err := ParsePrivateKey(MarshalPrivateKey(key))
	if err != nil || !back.Equal(key) {
		t.Fatalf("private key round trip: %v", err)
	}
	pub := key.Public().(ed25519.PublicKey)
	tr, err := ParseTrust(MarshalTrust(Trust{Keys: []ed25519.PublicKey{pub}, AllowUnsigned: true}))
	if err != nil || len(tr.Keys) != 1 || !tr.Keys[0].Equal(pub) || !tr.AllowUnsigned {
		t.Fatalf("trust round trip: %+v %v", tr, err)
	}
	if _, err := ParseTrust([]byte("ssh-ed25519 AAAA\n")); err == nil {
		t.Fatal("an ssh key line was accepted")
	}
	if _, err := ParsePrivateKey(MarshalPublicKey(pub, "x")); err == nil {
		t.Fatal("a public key was accepted as the signing key")
	}
}

// FuzzReadHeader feeds arbitrary bytes to the parser the box runs on
// uploads: it must never panic, never read more than a header's worth, and
// whatever it accepts must encode back to the same manifest.
func FuzzReadHeader(f *testing.F) {
	key, _ := GenerateKey()
	m := Manifest{Format: 1, Version: "v1", Board: "alix2d13", Built: 1, Kernel: Part{10, strings.Repeat("ab", 32)}, Initrd: Part{20, strings.Repeat("cd", 32)}}
	signed, _ := EncodeHeader(m, key)
	unsigned, _ := EncodeHeader(m, nil)
	f.Add(signed)
	f.Add(unsigned)
	m.Extension = &Extension{ConfigDBFormats: []int{1, 2, 3}, ConfigSchema: 2}
	extended, _ := EncodeHeader(m, key)
	f.Add(extended)
	f.Add([]byte(Magic + "\x00\x00\x00\x02{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		h, err := ReadHeader(r)
		consumed := len(b) - r.Len()
		if consumed > MaxHeader {
			t.Fatalf("read %d bytes, more than a header's %d", consumed, MaxHeader)
		}
		if err != nil {
			return
		}
		if len(h.Raw) != consumed {
			t.Fatalf("Raw is %d bytes, %d consumed", len(h.Raw), consumed)
		}
		h.Verify(Trust{Keys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}})
		if h.Manifest.Validate() != nil {
			t.Fatal("accepted an invalid manifest")
		}
	})
}
