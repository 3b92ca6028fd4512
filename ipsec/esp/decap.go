package esp

import (
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"net/netip"
)

// SPIOf returns the SPI of an ESP packet, or 0 if it is too short to have one.
func SPIOf(pkt []byte) uint32 {
	if len(pkt) < espHeaderLen {
		return 0
	}
	return binary.BigEndian.Uint32(pkt)
}

// Decap verifies and decrypts the ESP packet pkt (starting at the SPI) in
// place and returns the inner IP packet, a subslice of pkt. The replay
// window is checked before the ICV is verified and updated only after, so
// forged packets cannot move it (RFC 4303 3.4.3). On error the packet is to
// be dropped; the matching counter has been incremented.
func (sa *SA) Decap(pkt []byte) ([]byte, error) {
	if sa.dead.Load() {
		return nil, ErrExpired
	}
	if sa.replay == nil {
		return nil, fmt.Errorf("esp: Decap on outbound SA %08x", sa.SPI)
	}
	s := &sa.suite
	hdr := espHeaderLen + int(s.ivLen)
	body := len(pkt) - hdr - int(s.icvLen) // ciphertext length
	if align := int(s.blockAlign); body < align || body%align != 0 {
		return nil, ErrTruncated
	}
	seq := uint64(binary.BigEndian.Uint32(pkt[4:8]))
	if !sa.replay.check(seq) {
		sa.Counters.ReplayDrops.Add(1)
		return nil, ErrReplay
	}

	sc := s.getScratch()
	ct := pkt[hdr : hdr+body]
	if s.aead != nil {
		copy(sc.nonce[saltLen:], pkt[espHeaderLen:hdr])
		copy(sc.aad[:], pkt[:espHeaderLen])
		if _, err := s.aead.Open(ct[:0], sc.nonce[:], pkt[hdr:], sc.aad[:]); err != nil {
			s.putScratch(sc)
			sa.Counters.AuthFailures.Add(1)
			return nil, ErrAuth
		}
	} else {
		sc.mac.Reset()
		sc.mac.Write(pkt[:hdr+body])
		sum := sc.mac.Sum(sc.sum[:0])
		if subtle.ConstantTimeCompare(sum[:s.icvLen], pkt[hdr+body:]) != 1 {
			s.putScratch(sc)
			sa.Counters.AuthFailures.Add(1)
			return nil, ErrAuth
		}
		sc.cbcDec.(ivSetter).SetIV(pkt[espHeaderLen:hdr])
		sc.cbcDec.CryptBlocks(ct, ct)
	}
	s.putScratch(sc)

	ok, late := sa.replay.accept(seq)
	if !ok {
		sa.Counters.ReplayDrops.Add(1)
		return nil, ErrReplay
	}
	if late > 0 {
		sa.Counters.noteLate(late)
	}

	// Trailer: padding 1, 2, 3, ..., pad length, next header.
	pad := int(ct[body-2])
	next := ct[body-1]
	if pad > body-2 {
		sa.Counters.BadPadding.Add(1)
		return nil, ErrBadPadding
	}
	n := body - 2 - pad
	for i := 0; i < pad; i++ {
		if ct[n+i] != byte(i+1) {
			sa.Counters.BadPadding.Add(1)
			return nil, ErrBadPadding
		}
	}
	inner := ct[:n]
	switch next {
	case nextIPv4:
		if n < 20 || inner[0]>>4 != 4 || int(binary.BigEndian.Uint16(inner[2:4])) > n {
			sa.Counters.BadPadding.Add(1)
			return nil, ErrBadInner
		}
		inner = inner[:binary.BigEndian.Uint16(inner[2:4])]
		if !sa.allows(netip.AddrFrom4([4]byte(inner[12:16])), netip.AddrFrom4([4]byte(inner[16:20]))) {
			sa.Counters.PolicyDrops.Add(1)
			return nil, ErrPolicy
		}
	case nextIPv6:
		if n < 40 || inner[0]>>4 != 6 || 40+int(binary.BigEndian.Uint16(inner[4:6])) > n {
			sa.Counters.BadPadding.Add(1)
			return nil, ErrBadInner
		}
		inner = inner[:40+int(binary.BigEndian.Uint16(inner[4:6]))]
		if !sa.allows(netip.AddrFrom16([16]byte(inner[8:24])), netip.AddrFrom16([16]byte(inner[24:40]))) {
			sa.Counters.PolicyDrops.Add(1)
			return nil, ErrPolicy
		}
	case nextDummy:
		// Traffic flow confidentiality padding: authentic, but not for us.
		return nil, ErrDummy
	default:
		sa.Counters.BadPadding.Add(1)
		return nil, ErrBadPadding
	}
	sa.account(len(inner))
	return inner, nil
}
