package ike

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
)

// prf is a pseudo-random function of RFC 7296 section 2.13; all of the
// supported ones are HMACs, whose key may be of any length.
type prf struct {
	id   uint16
	hash func() hash.Hash
	size int
}

func newPRF(id uint16) (prf, error) {
	switch id {
	case PRF_HMAC_MD5:
		return prf{id, md5.New, md5.Size}, nil
	case PRF_HMAC_SHA1:
		return prf{id, sha1.New, sha1.Size}, nil
	case PRF_HMAC_SHA2_256:
		return prf{id, sha256.New, sha256.Size}, nil
	case PRF_HMAC_SHA2_384:
		return prf{id, sha512.New384, sha512.Size384}, nil
	case PRF_HMAC_SHA2_512:
		return prf{id, sha512.New, sha512.Size}, nil
	}
	return prf{}, fmt.Errorf("PRF %d not supported", id)
}

// sum computes prf(key, data[0] | data[1] | ...).
func (p prf) sum(key []byte, data ...[]byte) []byte {
	m := hmac.New(p.hash, key)
	for _, d := range data {
		m.Write(d)
	}
	return m.Sum(make([]byte, 0, p.size))
}

// plus is prf+ (RFC 7296 2.13): T1 = prf(K, S | 0x01), Tn = prf(K, Tn-1 |
// S | n), concatenated until n bytes are produced.
func (p prf) plus(key, seed []byte, n int) ([]byte, error) {
	if n > 255*p.size {
		return nil, fmt.Errorf("prf+ cannot produce %d bytes", n)
	}
	out := make([]byte, 0, n+p.size)
	m := hmac.New(p.hash, key)
	var t []byte
	for i := 1; len(out) < n; i++ {
		m.Reset()
		m.Write(t)
		m.Write(seed)
		m.Write([]byte{byte(i)})
		t = m.Sum(out[len(out):len(out)])
		out = out[:len(out)+len(t)]
	}
	clear(out[n:]) // the surplus of the last block is key material too
	return out[:n], nil
}
