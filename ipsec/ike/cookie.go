package ike

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"net/netip"
	"sync"
	"time"
)

// cookieJar makes and checks the stateless COOKIEs of RFC 7296 2.6:
// <VersionIDofSecret> | Hash(Ni | IPi | SPIi | <secret>). The secret is
// replaced every cookieSecretLife; cookies of the previous secret stay valid
// so that an initiator caught by the change is not turned away.
type cookieJar struct {
	mu      sync.Mutex
	version uint8
	cur     [32]byte
	prev    [32]byte
	born    time.Time
}

const cookieSecretLife = 10 * time.Minute

func (j *cookieJar) rotate(now time.Time, rand io.Reader) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.born.IsZero() && now.Sub(j.born) < cookieSecretLife {
		return
	}
	j.prev = j.cur
	io.ReadFull(rand, j.cur[:])
	j.version++
	j.born = now
}

func cookieHash(secret *[32]byte, version uint8, ni []byte, ip netip.Addr, spii uint64) []byte {
	m := hmac.New(sha256.New, secret[:])
	m.Write(ni)
	m.Write(ip.Unmap().AsSlice())
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], spii)
	m.Write(b[:])
	return append([]byte{version}, m.Sum(nil)[:16]...)
}

func (j *cookieJar) make(ni []byte, ip netip.Addr, spii uint64) []byte {
	j.mu.Lock()
	defer j.mu.Unlock()
	return cookieHash(&j.cur, j.version, ni, ip, spii)
}

func (j *cookieJar) valid(c, ni []byte, ip netip.Addr, spii uint64) bool {
	if len(c) != 17 {
		return false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	switch c[0] {
	case j.version:
		return hmac.Equal(c, cookieHash(&j.cur, j.version, ni, ip, spii))
	case j.version - 1:
		return hmac.Equal(c, cookieHash(&j.prev, j.version-1, ni, ip, spii))
	}
	return false
}
