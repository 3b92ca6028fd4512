// Package imagefile is the signed firmware upgrade file: one slot's kernel
// and initramfs behind a signed manifest, read in a single pass.
//
//	magic      8 bytes  "FGUPGRD\x01"
//	length     4 bytes  big-endian length of the manifest (at most MaxManifest)
//	manifest   JSON     Manifest: version, board, build time, the parts' lengths and SHA-256,
//	                    then optionally its Extension, a second JSON object (see below)
//	sigLength  2 bytes  big-endian: 0 (unsigned) or 96
//	signature  32-byte Ed25519 public key, 64-byte signature over SignedPrefix + manifest
//	kernel     Manifest.Kernel.Length bytes
//	initramfs  Manifest.Initrd.Length bytes
//	(end of file)
//
// The header (everything before the kernel) is also what the card keeps
// per slot in /<slot>/manifest, padded with NULs, so the box can say what
// each slot holds and re-check it. The signature covers the manifest, and
// the manifest the hashes of the parts, so the signature is checked before
// a single byte is written and the parts as they stream through.
//
// Firmware before the extension decodes the manifest object strictly (an
// unknown field makes the file "corrupt") and reads nothing after it, so a
// field added to the manifest object would make every box in the field
// refuse the file. What later firmware says about itself goes into the
// Extension instead: a second object after the first, inside the
// manifest's length and so under the signature, which those boxes skip.
// The extension is decoded leniently, so that a field added to it later
// is skipped in turn.
package imagefile

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
)

const (
	Magic        = "FGUPGRD\x01"
	MaxManifest  = 2048
	SignedPrefix = "flashgate upgrade manifest v1\x00"
	sigBlockSize = ed25519.PublicKeySize + ed25519.SignatureSize
	// MaxHeader bounds the header: the slot manifest file on the card
	// is this size.
	MaxHeader = len(Magic) + 4 + MaxManifest + 2 + sigBlockSize
	// MaxPart bounds a kernel or initramfs: no card we support has room
	// for more, and a bogus length must not make the box wait for it.
	MaxPart = 64 << 20
)

// Errors a caller can tell apart (wrapped with the details).
var (
	ErrNotImage  = errors.New("not a flashgate upgrade file")
	ErrTruncated = errors.New("truncated")
	ErrCorrupt   = errors.New("corrupt")
	ErrUnsigned  = errors.New("unsigned image")
	ErrUntrusted = errors.New("signed by a key this box does not trust")
	ErrSignature = errors.New("bad signature")
)

// Part is one file of the slot.
type Part struct {
	Length int64  `json:"length"`
	SHA256 string `json:"sha256"` // hex
}

// Manifest says what an upgrade file holds.
type Manifest struct {
	Format  int    `json:"format"` // 1
	Version string `json:"version"`
	Board   string `json:"board"`
	Built   int64  `json:"built"` // Unix seconds (the build's SOURCE_DATE_EPOCH): orders versions
	Kernel  Part   `json:"kernel"`
	Initrd  Part   `json:"initrd"`
	// Extension is the second object (nil: the file has none, as every
	// file made before it).
	Extension *Extension `json:"-"`
}

// Extension is what a firmware says about itself that firmware from before
// the extension does not read.
type Extension struct {
	// ConfigDBFormats are the configuration database formats the firmware
	// reads (config.DBFormats). Firmware without an extension reads
	// formats 1 and 2.
	ConfigDBFormats []int `json:"config_db_formats,omitempty"`
	// ConfigSchema is the newest configuration schema it reads
	// (config.SchemaVersion); 0: 2, as every firmware without one.
	ConfigSchema int `json:"config_schema,omitempty"`
}

// ConfigDBFormats returns the configuration database formats the firmware
// reads, [1 2] for firmware that does not say.
func (m Manifest) ConfigDBFormats() []int {
	if m.Extension == nil || len(m.Extension.ConfigDBFormats) == 0 {
		return []int{1, 2}
	}
	return m.Extension.ConfigDBFormats
}

// ConfigSchema returns the newest configuration schema the firmware reads,
// 2 for firmware that does not say.
func (m Manifest) ConfigSchema() int {
	if m.Extension == nil || m.Extension.ConfigSchema == 0 {
		return 2
	}
	return m.Extension.ConfigSchema
}

// isName reports whether s is a version or board name: a letter or
// digit, then up to 63 of those or . _ + - (what goes into file names).
func isName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i, c := range s {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._+-", c)) {
			return false
		}
	}
	return true
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Validate checks the manifest's fields.
func (m Manifest) Validate() error {
	if m.Format != 1 {
		return fmt.Errorf("manifest format %d: this firmware reads format 1", m.Format)
	}
	if !isName(m.Version) {
		return fmt.Errorf("manifest version %q is not a version", m.Version)
	}
	if !isName(m.Board) {
		return fmt.Errorf("manifest board %q is not a board name", m.Board)
	}
	for _, p := range []struct {
		name string
		p    Part
	}{{"kernel", m.Kernel}, {"initramfs", m.Initrd}} {
		if p.p.Length <= 0 || p.p.Length > MaxPart {
			return fmt.Errorf("manifest %s length %d is outside 1..%d", p.name, p.p.Length, MaxPart)
		}
		if !isHex64(p.p.SHA256) {
			return fmt.Errorf("manifest %s sha256 %q is not 64 hex digits", p.name, p.p.SHA256)
		}
	}
	return nil
}

// Header is a parsed header.
type Header struct {
	Manifest  Manifest
	Signer    ed25519.PublicKey // nil when unsigned
	Signature []byte
	Raw       []byte // the header's bytes, as in the file
	manifest  []byte
}

// Size is the whole file's size: header and parts.
func (h *Header) Size() int64 {
	return int64(len(h.Raw)) + h.Manifest.Kernel.Length + h.Manifest.Initrd.Length
}

// EncodeHeader makes a header for m, signed with key (nil: unsigned).
func EncodeHeader(m Manifest, key ed25519.PrivateKey) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	js, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if m.Extension != nil {
		ext, err := json.Marshal(m.Extension)
		if err != nil {
			return nil, err
		}
		js = append(append(js, '\n'), ext...)
	}
	if len(js) > MaxManifest {
		return nil, fmt.Errorf("manifest is %d bytes, at most %d", len(js), MaxManifest)
	}
	var b bytes.Buffer
	b.WriteString(Magic)
	binary.Write(&b, binary.BigEndian, uint32(len(js)))
	b.Write(js)
	if key == nil {
		binary.Write(&b, binary.BigEndian, uint16(0))
		return b.Bytes(), nil
	}
	binary.Write(&b, binary.BigEndian, uint16(sigBlockSize))
	b.Write(key.Public().(ed25519.PublicKey))
	b.Write(ed25519.Sign(key, append([]byte(SignedPrefix), js...)))
	return b.Bytes(), nil
}

// ReadHeader reads and parses the header from r, consuming exactly its
// bytes. It checks the form, not the signature: see Verify.
func ReadHeader(r io.Reader) (*Header, error) {
	var raw bytes.Buffer
	take := func(n int, what string) ([]byte, error) {
		b := make([]byte, n)
		got, err := io.ReadFull(r, b)
		raw.Write(b[:got])
		if err == io.EOF && raw.Len() == 0 {
			return nil, fmt.Errorf("%w: the file is empty", ErrNotImage)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: the file ends in the %s (%d bytes read)", ErrTruncated, what, raw.Len())
		}
		return b, nil
	}
	m, err := take(len(Magic), "magic number")
	if err != nil {
		return nil, err
	}
	if string(m) != Magic {
		if string(m[:7]) == Magic[:7] {
			return nil, fmt.Errorf("%w: upgrade file format %d, this firmware reads format 1", ErrNotImage, m[7])
		}
		return nil, fmt.Errorf("%w: it starts with %q (a card image is flashed with `flashgate flash`, the box takes the .fgup file)", ErrNotImage, m)
	}
	lb, err := take(4, "manifest length")
	if err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(lb)
	if n == 0 || n > MaxManifest {
		return nil, fmt.Errorf("%w: manifest length %d is outside 1..%d", ErrCorrupt, n, MaxManifest)
	}
	js, err := take(int(n), "manifest")
	if err != nil {
		return nil, err
	}
	h := &Header{manifest: js}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h.Manifest); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	if err := decodeExtension(js[dec.InputOffset():], &h.Manifest); err != nil {
		return nil, fmt.Errorf("%w: manifest extension: %v", ErrCorrupt, err)
	}
	if err := h.Manifest.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	sb, err := take(2, "signature length")
	if err != nil {
		return nil, err
	}
	switch sl := binary.BigEndian.Uint16(sb); sl {
	case 0:
	case sigBlockSize:
		sig, err := take(sigBlockSize, "signature")
		if err != nil {
			return nil, err
		}
		h.Signer = ed25519.PublicKey(sig[:ed25519.PublicKeySize])
		h.Signature = sig[ed25519.PublicKeySize:]
	default:
		return nil, fmt.Errorf("%w: signature block of %d bytes (0 or %d expected)", ErrCorrupt, sl, sigBlockSize)
	}
	h.Raw = raw.Bytes()
	return h, nil
}

// decodeExtension reads the extension object after the manifest, if there
// is one, and wants nothing after it.
func decodeExtension(rest []byte, m *Manifest) error {
	ext := json.NewDecoder(bytes.NewReader(rest)) // lenient: later fields are skipped
	var e Extension
	switch err := ext.Decode(&e); {
	case err == io.EOF:
		return nil
	case err != nil:
		return err
	}
	if _, err := ext.Token(); err != io.EOF {
		return errors.New("data after the extension")
	}
	m.Extension = &e
	return nil
}

// Trust is which images a box accepts.
type Trust struct {
	Keys          []ed25519.PublicKey
	AllowUnsigned bool // a developer's box: unsigned images too
}

// Verify checks the signature against trust.
func (h *Header) Verify(t Trust) error {
	if h.Signer == nil {
		if t.AllowUnsigned {
			return nil
		}
		return fmt.Errorf("%w: this box accepts only images signed by %s", ErrUnsigned, fingerprints(t.Keys))
	}
	trusted := false
	for _, k := range t.Keys {
		if k.Equal(h.Signer) {
			trusted = true
		}
	}
	if !trusted {
		return fmt.Errorf("%w: the image is signed by %s, this box trusts %s", ErrUntrusted, Fingerprint(h.Signer), fingerprints(t.Keys))
	}
	if !ed25519.Verify(h.Signer, append([]byte(SignedPrefix), h.manifest...), h.Signature) {
		return fmt.Errorf("%w: the manifest does not match its signature by %s (changed after signing, or damaged)", ErrSignature, Fingerprint(h.Signer))
	}
	return nil
}

// SignerName says who signed: a key fingerprint, or "unsigned".
func (h *Header) SignerName() string {
	if h.Signer == nil {
		return "unsigned"
	}
	return Fingerprint(h.Signer)
}

func fingerprints(keys []ed25519.PublicKey) string {
	if len(keys) == 0 {
		return "no key (the card was flashed without one)"
	}
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += Fingerprint(k)
	}
	return s
}

// Fingerprint names a public key: "ed25519:" and the first 16 hex digits
// of its SHA-256.
func Fingerprint(k ed25519.PublicKey) string {
	s := sha256.Sum256(k)
	return "ed25519:" + hex.EncodeToString(s[:8])
}

// PartReader returns the next p.Length bytes of r. At the end it compares
// their SHA-256 with the manifest's, and returns ErrCorrupt instead of EOF
// on a mismatch; a short file gives ErrTruncated. name is for messages.
func PartReader(r io.Reader, p Part, name string) io.Reader {
	return &partReader{r: r, name: name, want: p, left: p.Length, h: sha256.New()}
}

type partReader struct {
	r    io.Reader
	name string
	want Part
	left int64
	h    hash.Hash
	err  error
}

func (p *partReader) Read(b []byte) (int, error) {
	if p.err != nil {
		return 0, p.err
	}
	if p.left == 0 {
		if got := hex.EncodeToString(p.h.Sum(nil)); got != p.want.SHA256 {
			p.err = fmt.Errorf("%w: the %s's SHA-256 is %s, the manifest says %s", ErrCorrupt, p.name, got, p.want.SHA256)
			return 0, p.err
		}
		p.err = io.EOF
		return 0, io.EOF
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	n, err := p.r.Read(b)
	p.h.Write(b[:n])
	p.left -= int64(n)
	if err == io.EOF && p.left > 0 {
		p.err = fmt.Errorf("%w: the file ends %d bytes into the %s's %d", ErrTruncated, p.want.Length-p.left, p.name, p.want.Length)
		return n, p.err
	}
	if err != nil && err != io.EOF {
		p.err = fmt.Errorf("read the %s: %w", p.name, err)
		return n, p.err
	}
	return n, nil
}

// ExpectEnd checks that r has nothing after the initramfs.
func ExpectEnd(r io.Reader) error {
	var b [1]byte
	n, err := io.ReadFull(r, b[:])
	if n > 0 {
		return fmt.Errorf("%w: data after the initramfs (the file is longer than its manifest says)", ErrCorrupt)
	}
	if err != io.EOF {
		return fmt.Errorf("read the end of the file: %w", err)
	}
	return nil
}
