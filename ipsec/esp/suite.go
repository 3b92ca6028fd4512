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
// the SA's pool of scratch buffers.
type suite struct {
	aead cipher.AEAD // AEAD transforms; nil for CBC+HMAC
	salt [saltLen]byte

	block   cipher.Block     // CBC: the data cipher
	ivBlock cipher.Block     // CBC: turns sequence numbers into unpredictable IVs
	newMAC  func() hash.Hash // CBC: the keyed HMAC
	macKey  []byte           // CBC: our copy of the HMAC key, zeroed with the SA

	ivLen      int
	blockAlign int // ciphertext length multiple (RFC 4303 2.4: at least 4)
	icvLen     int
}

// scratch is per-packet working memory, pooled per SA so that the nonce and
// AAD slices handed to the cipher interfaces do not escape to the heap on
// every packet.
type scratch struct {
	nonce  [saltLen + aeadIVLen]byte
	aad    [espHeaderLen]byte
	sum    [64]byte
	mac    hash.Hash
	cbcEnc cipher.BlockMode
	cbcDec cipher.BlockMode
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
		s.ivLen, s.blockAlign, s.icvLen = aeadIVLen, 4, icv
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
		var err error
		if s.block, err = newBlock(encKey); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Encryption, err)
		}
		// IVs must be unpredictable (RFC 3602 section 2.3), not merely
		// unique: encrypting the sequence number under a random key that
		// never leaves this process gives that without a syscall per packet.
		ivKey := make([]byte, ivKeyLen)
		if _, err := rand.Read(ivKey); err != nil {
			return nil, fmt.Errorf("%s: IV key: %w", t.Encryption, err)
		}
		s.ivBlock, _ = newBlock(ivKey)
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
		s.macKey = append([]byte(nil), integKey...)
		s.newMAC = func() hash.Hash { return hmac.New(newHash, s.macKey) }
		bs := s.block.BlockSize()
		s.ivLen, s.blockAlign, s.icvLen = bs, bs, full/8
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

func (s *suite) newScratch() *scratch {
	sc := &scratch{}
	copy(sc.nonce[:saltLen], s.salt[:])
	if s.newMAC != nil {
		sc.mac = s.newMAC()
		zero := make([]byte, s.block.BlockSize())
		sc.cbcEnc = cipher.NewCBCEncrypter(s.block, zero)
		sc.cbcDec = cipher.NewCBCDecrypter(s.block, zero)
	}
	return sc
}
