package esp

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"sync"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/flashgate/flashgate/ipsec"
)

// Linux crypto API names of the transforms this data plane implements.
const (
	EncAESGCM   = "rfc4106(gcm(aes))"
	EncChaPoly  = "rfc7539esp(chacha20,poly1305)"
	EncAESCBC   = "cbc(aes)"
	Enc3DESCBC  = "cbc(des3_ede)" // legacy (IKEv1 peers), only where a tunnel allows it
	IntegMD5    = "hmac(md5)"     // legacy
	IntegSHA1   = "hmac(sha1)"
	IntegSHA256 = "hmac(sha256)"
	IntegSHA384 = "hmac(sha384)"
	IntegSHA512 = "hmac(sha512)"
)

const (
	espHeaderLen = 8  // SPI + sequence number
	saltLen      = 4  // RFC 4106 section 8.1, RFC 7634 section 2
	aeadIVLen    = 8  // explicit IV of the AEAD transforms
	maxIVLen     = 16 // AES-CBC
	maxICVLen    = 32 // HMAC-SHA512-256

	// Headroom is what Encap needs free before the inner packet: the ESP
	// header and the largest IV.
	Headroom = espHeaderLen + maxIVLen
	// Tailroom is what Encap needs free after the inner packet: padding to
	// the largest block, pad length, next header and the largest ICV.
	Tailroom = 15 + 2 + maxICVLen
)

// suite is the keyed cryptography of one SA. It is immutable after
// newSuite and safe for concurrent use; mutable per-packet state lives in
// pooled scratch buffers. An AEAD SA holds only its keyed AEAD and salt
// (its scratch comes from a pool every AEAD SA shares): a hub keeps
// thousands of SAs, so what an SA carries is multiplied by them.
type suite struct {
	aead cipher.AEAD // AEAD transforms; nil for CBC+HMAC
	salt [saltLen]byte

	// Lengths in bytes (bytes, not ints: they keep the SA in a smaller
	// size class).
	ivLen      uint8
	blockAlign uint8 // ciphertext length multiple (RFC 4303 2.4: at least 4)
	icvLen     uint8

	cbc *cbcSuite // CBC+HMAC transforms only
}

// cbcSuite is the keyed state of a CBC+HMAC SA, and its own pool of
// scratch buffers (the HMAC and CBC modes in them are keyed).
type cbcSuite struct {
	block   cipher.Block     // the data cipher
	ivBlock cipher.Block     // turns sequence numbers into unpredictable IVs
	newMAC  func() hash.Hash // the keyed HMAC
	macKey  []byte           // our copy of the HMAC key, zeroed with the SA
	scratch sync.Pool
}

// scratch is per-packet working memory, pooled so that the nonce and AAD
// slices handed to the cipher interfaces do not escape to the heap on
// every packet.
type scratch struct {
	nonce  [saltLen + aeadIVLen]byte
	aad    [espHeaderLen]byte
	sum    [64]byte
	mac    hash.Hash
	cbcEnc cipher.BlockMode
	cbcDec cipher.BlockMode
}

// aeadScratch is the scratch of every AEAD SA: its nonce and AAD are
// rewritten per packet, so it need not be the SA's own. A pool per SA held
// a pool's per-CPU array and a buffer per CPU for each SA that carried
// traffic.
var aeadScratch = sync.Pool{New: func() any { return new(scratch) }}

// getScratch returns a scratch for one packet, its nonce starting with
// the SA's salt; putScratch gives it back.
func (s *suite) getScratch() *scratch {
	if s.cbc != nil {
		return s.cbc.scratch.Get().(*scratch)
	}
	sc := aeadScratch.Get().(*scratch)
	copy(sc.nonce[:saltLen], s.salt[:])
	return sc
}

func (s *suite) putScratch(sc *scratch) {
	if s.cbc != nil {
		s.cbc.scratch.Put(sc)
		return
	}
	aeadScratch.Put(sc)
}

type ivSetter interface{ SetIV([]byte) }

func newSuite(t ipsec.Transform, encKey, integKey []byte) (*suite, error) {
	s := &suite{}
	switch t.Encryption {
	case EncAESGCM:
		if t.Integrity != "" {
			return nil, fmt.Errorf("%s is AEAD but integrity %q was given", t.Encryption, t.Integrity)
		}
		key, err := splitSalt(t, encKey, &s.salt)
		if err != nil {
			return nil, err
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Encryption, err)
		}
		icv := t.ICVBits / 8
		if t.ICVBits == 0 {
			icv = 16
		}
		// RFC 4106 allows 8, 12 and 16 byte ICVs; Go's GCM does 12..16.
		if icv != 12 && icv != 16 {
			return nil, fmt.Errorf("%s: ICV of %d bits not supported (96 or 128)", t.Encryption, t.ICVBits)
		}
		if s.aead, err = cipher.NewGCMWithTagSize(block, icv); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Encryption, err)
		}
		s.ivLen, s.blockAlign, s.icvLen = aeadIVLen, 4, uint8(icv)
	case EncChaPoly:
		if t.Integrity != "" {
			return nil, fmt.Errorf("%s is AEAD but integrity %q was given", t.Encryption, t.Integrity)
		}
		if t.ICVBits != 0 && t.ICVBits != 128 {
			return nil, fmt.Errorf("%s: ICV must be 128 bits, not %d", t.Encryption, t.ICVBits)
		}
		key, err := splitSalt(t, encKey, &s.salt)
		if err != nil {
			return nil, err
		}
		if s.aead, err = chacha20poly1305.New(key); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Encryption, err)
		}
		s.ivLen, s.blockAlign, s.icvLen = aeadIVLen, 4, 16
	case EncAESCBC, Enc3DESCBC:
		if t.EncKeyBits != 0 && t.EncKeyBits != 8*len(encKey) {
			return nil, fmt.Errorf("%s: key is %d bits, transform says %d", t.Encryption, 8*len(encKey), t.EncKeyBits)
		}
		newBlock, ivKeyLen := aes.NewCipher, 16
		if t.Encryption == Enc3DESCBC {
			newBlock, ivKeyLen = des.NewTripleDESCipher, 24
		}
		c := &cbcSuite{}
		s.cbc = c
		var err error
		if c.block, err = newBlock(encKey); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Encryption, err)
		}
		// IVs must be unpredictable (RFC 3602 section 2.3), not merely
		// unique: encrypting the sequence number under a random key that
		// never leaves this process gives that without a syscall per packet.
		ivKey := make([]byte, ivKeyLen)
		if _, err := rand.Read(ivKey); err != nil {
			return nil, fmt.Errorf("%s: IV key: %w", t.Encryption, err)
		}
		c.ivBlock, _ = newBlock(ivKey)
		clear(ivKey)
		var newHash func() hash.Hash
		var full int
		switch t.Integrity {
		case IntegMD5:
			newHash, full = md5.New, 96
		case IntegSHA1:
			newHash, full = sha1.New, 96
		case IntegSHA256:
			newHash, full = sha256.New, 128
		case IntegSHA384:
			newHash, full = sha512.New384, 192
		case IntegSHA512:
			newHash, full = sha512.New, 256
		default:
			return nil, fmt.Errorf("%s: integrity %q not supported", t.Encryption, t.Integrity)
		}
		// RFC 2404, RFC 4868: the ICV is the HMAC truncated to half the
		// hash (96 bits for SHA-1); nothing else is interoperable.
		if t.ICVBits != 0 && t.ICVBits != full {
			return nil, fmt.Errorf("%s: ICV of %d bits, RFC says %d", t.Integrity, t.ICVBits, full)
		}
		if len(integKey) == 0 {
			return nil, fmt.Errorf("%s: empty integrity key", t.Integrity)
		}
		c.macKey = append([]byte(nil), integKey...)
		c.newMAC = func() hash.Hash { return hmac.New(newHash, c.macKey) }
		c.scratch.New = func() any { return s.newScratch() }
		bs := uint8(c.block.BlockSize())
		s.ivLen, s.blockAlign, s.icvLen = bs, bs, uint8(full/8)
	default:
		return nil, fmt.Errorf("encryption %q not supported", t.Encryption)
	}
	return s, nil
}

func splitSalt(t ipsec.Transform, encKey []byte, salt *[saltLen]byte) ([]byte, error) {
	if len(encKey) <= saltLen {
		return nil, fmt.Errorf("%s: key of %d bytes has no room for the salt", t.Encryption, len(encKey))
	}
	key := encKey[:len(encKey)-saltLen]
	if t.EncKeyBits != 0 && t.EncKeyBits != 8*len(key) {
		return nil, fmt.Errorf("%s: key is %d bits without salt, transform says %d", t.Encryption, 8*len(key), t.EncKeyBits)
	}
	copy(salt[:], encKey[len(key):])
	return key, nil
}

// newScratch is a scratch for this suite: for CBC with its keyed HMAC and
// CBC modes, and with the salt in front of the nonce.
func (s *suite) newScratch() *scratch {
	sc := &scratch{}
	copy(sc.nonce[:saltLen], s.salt[:])
	if c := s.cbc; c != nil {
		sc.mac = c.newMAC()
		zero := make([]byte, c.block.BlockSize())
		sc.cbcEnc = cipher.NewCBCEncrypter(c.block, zero)
		sc.cbcDec = cipher.NewCBCDecrypter(c.block, zero)
	}
	return sc
}
