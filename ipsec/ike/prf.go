package ike

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"sync"
)

// prf is a pseudo-random function of RFC 7296 section 2.13; all of the
// supported ones are HMACs, whose key may be of any length.
type prf struct {
	id   uint16
	hash func() hash.Hash
	size int
}

// macPools hold the states the PRFs' HMACs work in, a pool per hash. An
// IKE SA's setup computes about ten HMACs (SKEYSEED, prf+ for the IKE and
// the CHILD_SA keys, both AUTH payloads), and crypto/hmac.New allocated
// two hash states, two pads and their marshalled copies for each: 4.6 KB
// of garbage per setup, much of it in the size classes of long-lived
// state, on a hub whose thousand branches connect at once.
var macPools = map[uint16]*sync.Pool{}

func init() {
	for id, h := range map[uint16]func() hash.Hash{
		PRF_HMAC_MD5: md5.New, PRF_HMAC_SHA1: sha1.New, PRF_HMAC_SHA2_256: sha256.New,
		PRF_HMAC_SHA2_384: sha512.New384, PRF_HMAC_SHA2_512: sha512.New,
	} {
		macPools[id] = &sync.Pool{New: func() any { return &mac{h: h()} }}
	}
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

// maxHMACBlock is the largest block of the PRFs' hashes (SHA-512's).
const maxHMACBlock = 128

// mac is HMAC (RFC 2104) with one of the PRFs' hashes: the result of
// crypto/hmac, in a state taken from its pool (its scratch is part of it,
// so that nothing is allocated per MAC). Not safe for concurrent use;
// done zeroes it and returns it to the pool.
type mac struct {
	h     hash.Hash
	pool  *sync.Pool
	key   [maxHMACBlock]byte // the key, or its hash if longer than a block, zero-padded
	pad   [maxHMACBlock]byte
	inner [64]byte // the inner hash
	ctr   [1]byte  // prf+'s counter
	bs    int      // the hash's block size
}

func (p prf) newMAC(key []byte) *mac {
	var m *mac
	if pool := macPools[p.id]; pool != nil {
		m = pool.Get().(*mac)
		m.pool = pool
	} else {
		m = &mac{h: p.hash()}
	}
	m.bs = m.h.BlockSize()
	if len(key) > m.bs {
		m.h.Reset()
		m.h.Write(key)
		m.h.Sum(m.key[:0])
	} else {
		copy(m.key[:], key)
	}
	m.start()
	return m
}

// start begins a MAC: the hash of the key and the inner pad.
func (m *mac) start() {
	for i := range m.bs {
		m.pad[i] = m.key[i] ^ 0x36
	}
	m.h.Reset()
	m.h.Write(m.pad[:m.bs])
}

func (m *mac) Write(b []byte) { m.h.Write(b) }

// sum appends the MAC of what was written since start to b, and starts
// the next one.
func (m *mac) sum(b []byte) []byte {
	in := m.h.Sum(m.inner[:0])
	for i := range m.bs {
		m.pad[i] = m.key[i] ^ 0x5c
	}
	m.h.Reset()
	m.h.Write(m.pad[:m.bs])
	m.h.Write(in)
	b = m.h.Sum(b)
	m.start()
	return b
}

// done zeroes the key and what was derived from it, and returns the
// state to its pool.
func (m *mac) done() {
	clear(m.key[:])
	clear(m.pad[:])
	clear(m.inner[:])
	m.h.Reset()
	if m.pool != nil {
		m.pool.Put(m)
	}
}

// sum computes prf(key, data[0] | data[1] | ...).
func (p prf) sum(key []byte, data ...[]byte) []byte {
	m := p.newMAC(key)
	for _, d := range data {
		m.Write(d)
	}
	out := m.sum(make([]byte, 0, p.size))
	m.done()
	return out
}

// plus is prf+ (RFC 7296 2.13): T1 = prf(K, S | 0x01), Tn = prf(K, Tn-1 |
// S | n), concatenated until n bytes are produced.
func (p prf) plus(key, seed []byte, n int) ([]byte, error) {
	if n > 255*p.size {
		return nil, fmt.Errorf("prf+ cannot produce %d bytes", n)
	}
	out := make([]byte, 0, n+p.size)
	m := p.newMAC(key)
	defer m.done()
	var t []byte
	for i := 1; len(out) < n; i++ {
		m.Write(t)
		m.Write(seed)
		m.ctr[0] = byte(i)
		m.Write(m.ctr[:])
		t = m.sum(out[len(out):len(out)])
		out = out[:len(out)+len(t)]
	}
	clear(out[n:]) // the surplus of the last block is key material too
	return out[:n], nil
}
