package ike

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"

	"golang.org/x/crypto/chacha20poly1305"
)

func isAEAD(id uint16) bool {
	switch id {
	case ENCR_AES_GCM_8, ENCR_AES_GCM_12, ENCR_AES_GCM_16, ENCR_CHACHA20_POLY1305:
		return true
	}
	return false
}

// encrKeyLen is the key material an encryption algorithm takes from prf+,
// including the salt of AEAD algorithms (RFC 5282 section 7.1: 4 bytes for
// GCM; RFC 7634 section 2: 4 bytes for ChaCha20-Poly1305).
func encrKeyLen(e Encr) (int, error) {
	switch e.ID {
	case ENCR_3DES:
		return 24, nil
	case ENCR_AES_CBC:
		if e.KeyBits != 128 && e.KeyBits != 192 && e.KeyBits != 256 {
			return 0, fmt.Errorf("AES key length %d", e.KeyBits)
		}
		return e.KeyBits / 8, nil
	case ENCR_AES_GCM_8, ENCR_AES_GCM_12, ENCR_AES_GCM_16:
		if e.KeyBits != 128 && e.KeyBits != 192 && e.KeyBits != 256 {
			return 0, fmt.Errorf("AES-GCM key length %d", e.KeyBits)
		}
		return e.KeyBits/8 + 4, nil
	case ENCR_CHACHA20_POLY1305:
		return 32 + 4, nil
	}
	return 0, fmt.Errorf("encryption algorithm %d not supported", e.ID)
}

// integInfo gives an integrity algorithm's hash, key length and truncated
// ICV length (RFC 4868 for SHA-2, RFC 2404 for SHA-1).
func integInfo(id uint16) (h func() hash.Hash, keyLen, icvLen int, err error) {
	switch id {
	case AUTH_HMAC_MD5_96:
		return md5.New, 16, 12, nil
	case AUTH_HMAC_SHA1_96:
		return sha1.New, 20, 12, nil
	case AUTH_HMAC_SHA2_256_128:
		return sha256.New, 32, 16, nil
	case AUTH_HMAC_SHA2_384_192:
		return sha512.New384, 48, 24, nil
	case AUTH_HMAC_SHA2_512_256:
		return sha512.New, 64, 32, nil
	case AUTH_NONE:
		return nil, 0, 0, nil
	}
	return nil, 0, 0, fmt.Errorf("integrity algorithm %d not supported", id)
}

// errICV is returned when a protected message fails its integrity check.
var errICV = errors.New("integrity check failed")

// skDirection protects the messages of one direction of an IKE SA: the
// SK payload of RFC 7296 3.14 with AES-CBC and a truncated HMAC, or with an
// AEAD per RFC 5282 (AES-GCM) and RFC 7634 (ChaCha20-Poly1305).
//
// It keeps the key, not the keyed cipher: Go's AES-GCM with its tables is
// about 770 bytes, and an established IKE SA protects a message in each
// direction once in a while (dead peer detection, rekeys), so a hub of a
// thousand tunnels held 1.5 MB of ciphers it hardly used. Keying costs
// well under a microsecond per message next to that.
//
// The key and the salt are in the struct, not in slices of their own:
// two allocations fewer per direction, and the struct in Go's 112-byte
// size class instead of 144 (tests hold it), about 100 bytes less per IKE
// SA on a hub.
type skDirection struct {
	encr  uint16 // ENCR_* transform ID
	klen  uint8  // the key's length in key; 0 once zeroed
	tag   uint8  // AEAD tag length
	bs    uint8  // CBC: the cipher's block size; 0 for an AEAD
	icv   uint8
	salt  [4]byte  // AEAD: the nonce's salt (RFC 4106 8.1, RFC 7634 2)
	key   [32]byte // the cipher's key (AEAD: without the salt)
	integ func() hash.Hash
	ikey  []byte
	ivSeq uint64 // AEAD IVs: a counter never repeats under one key
}

// ekey is the cipher's key (nil once zeroed).
func (d *skDirection) ekey() []byte {
	if d.klen == 0 {
		return nil
	}
	return d.key[:d.klen]
}

// setKey keeps k as the cipher's key.
func (d *skDirection) setKey(k []byte) error {
	if len(k) == 0 || len(k) > len(d.key) {
		return fmt.Errorf("IKE encryption key of %d bytes", len(k))
	}
	d.klen = uint8(copy(d.key[:], k))
	return nil
}

// setSalt keeps s as the AEAD nonce's salt, which is 4 bytes.
func (d *skDirection) setSalt(s []byte) error {
	if len(s) != len(d.salt) {
		return fmt.Errorf("IKE AEAD salt of %d bytes, want %d", len(s), len(d.salt))
	}
	copy(d.salt[:], s)
	return nil
}

func newSKDirection(e Encr, integ uint16, ekey, akey []byte) (*skDirection, error) {
	d := &skDirection{encr: e.ID}
	switch e.ID {
	case ENCR_AES_GCM_12, ENCR_AES_GCM_16:
		n := len(ekey) - len(d.salt)
		if n < 0 {
			return nil, fmt.Errorf("AES-GCM key and salt of %d bytes", len(ekey))
		}
		d.tag = 16
		if e.ID == ENCR_AES_GCM_12 {
			d.tag = 12
		}
		d.icv = d.tag
		if n := len(ekey[:n]); n != 16 && n != 24 && n != 32 {
			return nil, aes.KeySizeError(n)
		}
		if err := errors.Join(d.setKey(ekey[:n]), d.setSalt(ekey[n:])); err != nil {
			d.zero()
			return nil, err
		}
	case ENCR_CHACHA20_POLY1305:
		if len(ekey) < 32 {
			return nil, fmt.Errorf("ChaCha20-Poly1305 key of %d bytes", len(ekey))
		}
		d.icv = 16
		if err := errors.Join(d.setKey(ekey[:32]), d.setSalt(ekey[32:])); err != nil {
			d.zero()
			return nil, err
		}
	case ENCR_AES_CBC, ENCR_3DES:
		h, _, icv, err := integInfo(integ)
		if err != nil {
			return nil, err
		}
		if h == nil {
			return nil, fmt.Errorf("AES-CBC needs an integrity algorithm")
		}
		if icv > 255 {
			return nil, fmt.Errorf("integrity check value of %d bytes", icv)
		}
		if err := d.setKey(ekey); err != nil {
			return nil, err
		}
		d.integ, d.ikey, d.icv = h, append([]byte(nil), akey...), uint8(icv)
	default:
		// ENCR_AES_GCM_8 lands here: Go's GCM has no 8-byte tags, and
		// nobody protects IKE with them.
		return nil, fmt.Errorf("encryption algorithm %d not supported for IKE", e.ID)
	}
	// A key the cipher would refuse fails here, not at the first
	// message. AES-GCM's key is checked by its length, not by keying the
	// cipher: that made two AES-GCMs (1.3 KB) of garbage per IKE SA, in
	// the size class of the ESP SAs' ciphers and the IKE SA itself, whose
	// spans it kept from being freed.
	if d.encr == ENCR_AES_GCM_12 || d.encr == ENCR_AES_GCM_16 {
		return d, nil // its length was checked above
	}
	aead, block, err := d.keyed()
	if err != nil {
		d.zero()
		return nil, err
	}
	if aead == nil {
		d.bs = uint8(block.BlockSize())
	}
	return d, nil
}

// keyed makes the cipher from the key: an AEAD, or a block cipher for CBC.
func (d *skDirection) keyed() (cipher.AEAD, cipher.Block, error) {
	key := d.ekey()
	if key == nil {
		return nil, nil, errors.New("IKE SA keys are gone")
	}
	switch d.encr {
	case ENCR_AES_GCM_12, ENCR_AES_GCM_16:
		b, err := aes.NewCipher(key)
		if err != nil {
			return nil, nil, err
		}
		a, err := cipher.NewGCMWithTagSize(b, int(d.tag))
		return a, nil, err
	case ENCR_CHACHA20_POLY1305:
		a, err := chacha20poly1305.New(key)
		return a, nil, err
	case ENCR_3DES:
		b, err := des.NewTripleDESCipher(key)
		return nil, b, err
	default:
		b, err := aes.NewCipher(key)
		return nil, b, err
	}
}

func (d *skDirection) zero() {
	clear(d.key[:])
	clear(d.ikey)
	clear(d.salt[:])
	d.klen = 0
}

// seal builds a complete protected message: header, SK payload carrying
// the encoded inner payloads. The header's NextPayload and Length are set.
// rand gives a CBC cipher its IVs (an AEAD counts them).
func (d *skDirection) seal(h Header, inner []Payload, rand io.Reader) ([]byte, error) {
	first := NoNextPayload
	if len(inner) > 0 {
		first = inner[0].Type()
	}
	return d.sealPlain(h, PayloadSK, first, nil, appendPayloads(make([]byte, 0, 256), inner), rand)
}

// overhead is what protection adds to a plaintext of n bytes: IV,
// padding, pad length and ICV.
func (d *skDirection) overhead(n int) int {
	icv := int(d.icv)
	if d.bs == 0 {
		return 8 + 1 + icv
	}
	bs := int(d.bs)
	return bs + (bs-(n+1)%bs)%bs + 1 + icv
}

// sealPlain protects plain in a payload of type pt (SK, or SKF with extra
// holding its fragment number and total, RFC 7383 2.5): the extra bytes
// sit between the generic header and the IV and are authenticated.
func (d *skDirection) sealPlain(h Header, pt, first PayloadType, extra, plain []byte, rand io.Reader) ([]byte, error) {
	h.NextPayload = pt
	icv := int(d.icv)
	aead, block, err := d.keyed()
	if err != nil {
		return nil, fmt.Errorf("SK: %w", err)
	}
	var ivLen, padLen int
	if aead != nil {
		ivLen = 8
		padLen = 0 // RFC 5282 3: no padding needed beyond the pad length octet
	} else {
		bs := int(d.bs)
		ivLen = bs
		padLen = (bs - (len(plain)+1)%bs) % bs
	}
	ctLen := len(plain) + padLen + 1
	total := HeaderLen + genericHeaderLen + len(extra) + ivLen + ctLen + icv
	if total > MaxMessageLen {
		return nil, fmt.Errorf("message of %d bytes too large", total)
	}
	h.Length = uint32(total)
	out := h.append(make([]byte, 0, total))
	out = append(out, byte(first), 0)
	out = binary.BigEndian.AppendUint16(out, uint16(genericHeaderLen+len(extra)+ivLen+ctLen+icv))
	out = append(out, extra...)
	aad := out
	iv := out[len(out) : len(out)+ivLen]
	out = out[:len(out)+ivLen]
	plain = append(plain, make([]byte, padLen)...)
	plain = append(plain, byte(padLen))
	if aead != nil {
		d.ivSeq++
		binary.BigEndian.PutUint64(iv, d.ivSeq)
		nonce := append(append(make([]byte, 0, 12), d.salt[:]...), iv...)
		out = aead.Seal(out, nonce, plain, aad)
		return out, nil
	}
	if _, err := io.ReadFull(rand, iv); err != nil {
		return nil, fmt.Errorf("SK IV: %w", err)
	}
	ct := out[len(out) : len(out)+ctLen]
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(ct, plain)
	out = out[:len(out)+ctLen]
	m := hmac.New(d.integ, d.ikey)
	m.Write(out)
	out = append(out, m.Sum(nil)[:icv]...)
	return out, nil
}

// open checks and decrypts the SK payload of msg (the whole datagram as
// received, h its decoded header, sk its SK payload) and decodes the
// payloads inside.
func (d *skDirection) open(msg []byte, h Header, sk *Encrypted) ([]Payload, error) {
	plain, err := d.openPlain(msg, h, sk.Data)
	if err != nil {
		return nil, err
	}
	return DecodePayloads(sk.NextPayload, plain)
}

// openPlain checks and decrypts body, the IV-to-ICV part of the last
// payload of msg (SK or SKF): everything before it is authenticated.
func (d *skDirection) openPlain(msg []byte, h Header, body []byte) ([]byte, error) {
	msg = msg[:h.Length]
	aadEnd := len(msg) - len(body)
	icv := int(d.icv)
	aead, block, err := d.keyed()
	if err != nil {
		return nil, fmt.Errorf("SK: %w", err)
	}
	var plain []byte
	if aead != nil {
		if len(body) < 8+icv+1 {
			return nil, fmt.Errorf("SK payload of %d bytes: %w", len(body), ErrTruncated)
		}
		nonce := append(append(make([]byte, 0, 12), d.salt[:]...), body[:8]...)
		plain, err = aead.Open(nil, nonce, body[8:], msg[:aadEnd])
		if err != nil {
			return nil, errICV
		}
	} else {
		bs := int(d.bs)
		if len(body) < bs+bs+icv || (len(body)-bs-icv)%bs != 0 {
			return nil, fmt.Errorf("SK payload of %d bytes: %w", len(body), ErrMalformed)
		}
		m := hmac.New(d.integ, d.ikey)
		m.Write(msg[:len(msg)-icv])
		if subtle.ConstantTimeCompare(m.Sum(nil)[:icv], msg[len(msg)-icv:]) != 1 {
			return nil, errICV
		}
		ct := body[bs : len(body)-icv]
		plain = make([]byte, len(ct))
		cipher.NewCBCDecrypter(block, body[:bs]).CryptBlocks(plain, ct)
	}
	pad := int(plain[len(plain)-1])
	if pad+1 > len(plain) {
		return nil, fmt.Errorf("SK pad length %d: %w", pad, ErrMalformed)
	}
	return plain[:len(plain)-1-pad], nil
}
