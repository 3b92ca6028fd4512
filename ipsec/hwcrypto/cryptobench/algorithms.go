package cryptobench

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"

	"golang.org/x/crypto/chacha20poly1305"
)

// algorithm is one row group of the table: an openssl-style name, the
// kernel crypto API name and type to bind over AF_ALG, the generic
// (software) kernel implementation to compare engines against, and Go's
// own implementation.
type algorithm struct {
	Name     string // "aes-128-cbc", as openssl speed -evp calls it
	Kernel   string // crypto API algorithm, "cbc(aes)"
	Generic  string // the software driver, bound by name for comparison
	Type     string // "skcipher" or "aead"
	KeyLen   int
	IVLen    int
	TagLen   int // AEAD only
	BlockLen int // input must be a multiple of this (CBC)

	// seal encrypts src into dst (len(src)+TagLen) with Go's implementation.
	newGo func(key []byte) (func(dst, iv, src []byte), error)
}

func cbc(newBlock func([]byte) (cipher.Block, error)) func(key []byte) (func(dst, iv, src []byte), error) {
	return func(key []byte) (func(dst, iv, src []byte), error) {
		b, err := newBlock(key)
		if err != nil {
			return nil, err
		}
		// Go's CBC encrypter can be re-keyed with a new IV: reusing it
		// keeps an allocation per message out of the measurement, as a
		// data plane would.
		var mode cipher.BlockMode
		return func(dst, iv, src []byte) {
			if r, ok := mode.(interface{ SetIV([]byte) }); ok {
				r.SetIV(iv)
			} else {
				mode = cipher.NewCBCEncrypter(b, iv)
			}
			mode.CryptBlocks(dst, src)
		}, nil
	}
}

func aead(newAEAD func(key []byte) (cipher.AEAD, error)) func(key []byte) (func(dst, iv, src []byte), error) {
	return func(key []byte) (func(dst, iv, src []byte), error) {
		a, err := newAEAD(key)
		if err != nil {
			return nil, err
		}
		return func(dst, iv, src []byte) {
			a.Seal(dst[:0], iv, src, nil)
		}, nil
	}
}

func newGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// algorithms are the transforms IPsec uses, in the order the table shows.
var algorithms = []algorithm{
	{Name: "aes-128-cbc", Kernel: "cbc(aes)", Generic: "cbc(aes-generic)", Type: "skcipher", KeyLen: 16, IVLen: 16, BlockLen: 16, newGo: cbc(aes.NewCipher)},
	{Name: "aes-256-cbc", Kernel: "cbc(aes)", Generic: "cbc(aes-generic)", Type: "skcipher", KeyLen: 32, IVLen: 16, BlockLen: 16, newGo: cbc(aes.NewCipher)},
	{Name: "aes-128-gcm", Kernel: "gcm(aes)", Generic: "gcm_base(ctr(aes-generic),ghash-generic)", Type: "aead", KeyLen: 16, IVLen: 12, TagLen: 16, BlockLen: 1, newGo: aead(newGCM)},
	{Name: "chacha20-poly1305", Kernel: "rfc7539(chacha20,poly1305)", Generic: "rfc7539(chacha20-generic,poly1305-generic)", Type: "aead", KeyLen: 32, IVLen: 12, TagLen: 16, BlockLen: 1, newGo: aead(chacha20poly1305.New)},
	{Name: "des-ede3-cbc", Kernel: "cbc(des3_ede)", Generic: "cbc(des3_ede-generic)", Type: "skcipher", KeyLen: 24, IVLen: 8, BlockLen: 8, newGo: cbc(des.NewTripleDESCipher)},
}
