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
type skDirection struct {
	aead  cipher.AEAD
	salt  []byte
	block cipher.Block
	integ func() hash.Hash
	ikey  []byte
	icv   int
	ivSeq uint64 // AEAD IVs: a counter never repeats under one key
	rand  io.Reader
}

func newSKDirection(e Encr, integ uint16, ekey, akey []byte, rand io.Reader) (*skDirection, error) {
	d := &skDirection{rand: rand}
	switch e.ID {
	case ENCR_AES_GCM_12, ENCR_AES_GCM_16:
		n := len(ekey) - 4
		b, err := aes.NewCipher(ekey[:n])
		if err != nil {
			return nil, err
		}
		tag := 16
		if e.ID == ENCR_AES_GCM_12 {
			tag = 12
		}
		if d.aead, err = cipher.NewGCMWithTagSize(b, tag); err != nil {
			return nil, err
		}
		d.salt = append([]byte(nil), ekey[n:]...)
		d.icv = tag
	case ENCR_CHACHA20_POLY1305:
		a, err := chacha20poly1305.New(ekey[:32])
		if err != nil {
			return nil, err
		}
		d.aead, d.salt, d.icv = a, append([]byte(nil), ekey[32:]...), 16
	case ENCR_AES_CBC, ENCR_3DES:
		var b cipher.Block
		var err error
		if e.ID == ENCR_3DES {
			b, err = des.NewTripleDESCipher(ekey)
		} else {
			b, err = aes.NewCipher(ekey)
		}
		if err != nil {
			return nil, err
		}
		h, _, icv, err := integInfo(integ)
		if err != nil {
			return nil, err
		}
		if h == nil {
			return nil, fmt.Errorf("AES-CBC needs an integrity algorithm")
		}
		d.block, d.integ, d.ikey, d.icv = b, h, append([]byte(nil), akey...), icv
	default:
		// ENCR_AES_GCM_8 lands here: Go's GCM has no 8-byte tags, and
		// nobody protects IKE with them.
		return nil, fmt.Errorf("encryption algorithm %d not supported for IKE", e.ID)
	}
	return d, nil
}

func (d *skDirection) zero() {
	clear(d.ikey)
	clear(d.salt)
	d.aead, d.block = nil, nil
}

// seal builds a complete protected message: header, SK payload carrying
// the encoded inner payloads. The header's NextPayload and Length are set.
func (d *skDirection) seal(h Header, inner []Payload) ([]byte, error) {
	first := NoNextPayload
	if len(inner) > 0 {
		first = inner[0].Type()
	}
	return d.sealPlain(h, PayloadSK, first, nil, appendPayloads(make([]byte, 0, 256), inner))
}

// overhead is what protection adds to a plaintext of n bytes: IV,
// padding, pad length and ICV.
func (d *skDirection) overhead(n int) int {
	if d.aead != nil {
		return 8 + 1 + d.icv
	}
	bs := d.block.BlockSize()
	return bs + (bs-(n+1)%bs)%bs + 1 + d.icv
}

// sealPlain protects plain in a payload of type pt (SK, or SKF with extra
// holding its fragment number and total, RFC 7383 2.5): the extra bytes
// sit between the generic header and the IV and are authenticated.
func (d *skDirection) sealPlain(h Header, pt, first PayloadType, extra, plain []byte) ([]byte, error) {
	h.NextPayload = pt
	var ivLen, padLen int
	if d.aead != nil {
		ivLen = 8
		padLen = 0 // RFC 5282 3: no padding needed beyond the pad length octet
	} else {
		bs := d.block.BlockSize()
		ivLen = bs
		padLen = (bs - (len(plain)+1)%bs) % bs
	}
	ctLen := len(plain) + padLen + 1
	total := HeaderLen + genericHeaderLen + len(extra) + ivLen + ctLen + d.icv
	if total > MaxMessageLen {
		return nil, fmt.Errorf("message of %d bytes too large", total)
	}
	h.Length = uint32(total)
	out := h.append(make([]byte, 0, total))
	out = append(out, byte(first), 0)
	out = binary.BigEndian.AppendUint16(out, uint16(genericHeaderLen+len(extra)+ivLen+ctLen+d.icv))
	out = append(out, extra...)
	aad := out
	iv := out[len(out) : len(out)+ivLen]
	out = out[:len(out)+ivLen]
	plain = append(plain, make([]byte, padLen)...)
	plain = append(plain, byte(padLen))
	if d.aead != nil {
		d.ivSeq++
		binary.BigEndian.PutUint64(iv, d.ivSeq)
		nonce := append(append(make([]byte, 0, 12), d.salt...), iv...)
		out = d.aead.Seal(out, nonce, plain, aad)
		return out, nil
	}
	if _, err := io.ReadFull(d.rand, iv); err != nil {
		return nil, fmt.Errorf("SK IV: %w", err)
	}
	ct := out[len(out) : len(out)+ctLen]
	cipher.NewCBCEncrypter(d.block, iv).CryptBlocks(ct, plain)
	out = out[:len(out)+ctLen]
	m := hmac.New(d.integ, d.ikey)
	m.Write(out)
	out = append(out, m.Sum(nil)[:d.icv]...)
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
	var plain []byte
	if d.aead != nil {
		if len(body) < 8+d.icv+1 {
			return nil, fmt.Errorf("SK payload of %d bytes: %w", len(body), ErrTruncated)
		}
		nonce := append(append(make([]byte, 0, 12), d.salt...), body[:8]...)
		var err error
		plain, err = d.aead.Open(nil, nonce, body[8:], msg[:aadEnd])
		if err != nil {
			return nil, errICV
		}
	} else {
		bs := d.block.BlockSize()
		if len(body) < bs+bs+d.icv || (len(body)-bs-d.icv)%bs != 0 {
			return nil, fmt.Errorf("SK payload of %d bytes: %w", len(body), ErrMalformed)
		}
		m := hmac.New(d.integ, d.ikey)
		m.Write(msg[:len(msg)-d.icv])
		if subtle.ConstantTimeCompare(m.Sum(nil)[:d.icv], msg[len(msg)-d.icv:]) != 1 {
			return nil, errICV
		}
		ct := body[bs : len(body)-d.icv]
		plain = make([]byte, len(ct))
		cipher.NewCBCDecrypter(d.block, body[:bs]).CryptBlocks(plain, ct)
	}
	pad := int(plain[len(plain)-1])
	if pad+1 > len(plain) {
		return nil, fmt.Errorf("SK pad length %d: %w", pad, ErrMalformed)
	}
	return plain[:len(plain)-1-pad], nil
}
