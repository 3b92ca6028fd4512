package esp

import (
	"encoding/binary"
)

// Next header values of the ESP trailer (IANA protocol numbers).
const (
	nextIPv4  = 4
	nextIPv6  = 41
	nextDummy = 59
)

// Encap turns the inner IP packet buf[off:off+n] into an ESP packet in
// place and returns it: it starts at most Headroom bytes before off and
// ends at most Tailroom bytes after off+n, within cap(buf). The returned
// slice is what goes after the outer IP (and UDP) header.
func (sa *SA) Encap(buf []byte, off, n int) ([]byte, error) {
	if sa.dead.Load() {
		return nil, ErrExpired
	}
	s := &sa.suite
	if n < 1 || off+n > len(buf) {
		return nil, ErrTruncated
	}
	var next byte
	switch buf[off] >> 4 {
	case 4:
		next = nextIPv4
	case 6:
		next = nextIPv6
	default:
		return nil, ErrBadInner
	}
	ivLen := int(s.ivLen)
	start := off - espHeaderLen - ivLen
	pad := padLen(n, int(s.blockAlign))
	plainEnd := off + n + pad + 2
	end := plainEnd + int(s.icvLen)
	if start < 0 || end > cap(buf) {
		return nil, ErrOversized
	}
	buf = buf[:end]
	seq, err := sa.nextSeq()
	if err != nil {
		return nil, err
	}
	pkt := buf[start:end]
	binary.BigEndian.PutUint32(pkt[0:4], sa.SPI)
	binary.BigEndian.PutUint32(pkt[4:8], seq)
	// Self-describing padding 1, 2, 3, ... (RFC 4303 2.4).
	for i := 0; i < pad; i++ {
		buf[off+n+i] = byte(i + 1)
	}
	buf[plainEnd-2] = byte(pad)
	buf[plainEnd-1] = next

	sc := s.getScratch()
	iv := pkt[espHeaderLen : espHeaderLen+ivLen]
	if s.aead != nil {
		// The explicit IV is the sequence number: unique per key, which is
		// all GCM and ChaCha20-Poly1305 need (RFC 4106 3.1, RFC 7634 2).
		binary.BigEndian.PutUint64(iv, uint64(seq))
		copy(sc.nonce[saltLen:], iv)
		copy(sc.aad[:], pkt[:espHeaderLen])
		plain := buf[off:plainEnd]
		s.aead.Seal(plain[:0], sc.nonce[:], plain, sc.aad[:])
	} else {
		binary.BigEndian.PutUint64(iv[:8], uint64(seq))
		clear(iv[8:])
		s.cbc.ivBlock.Encrypt(iv, iv)
		sc.cbcEnc.(ivSetter).SetIV(iv)
		sc.cbcEnc.CryptBlocks(buf[off:plainEnd], buf[off:plainEnd])
		sc.mac.Reset()
		sc.mac.Write(pkt[:plainEnd-start])
		sum := sc.mac.Sum(sc.sum[:0])
		copy(buf[plainEnd:end], sum)
	}
	s.putScratch(sc)
	sa.account(n)
	return pkt, nil
}
