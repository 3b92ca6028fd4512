package ike

import (
	"crypto/sha1"
	"encoding/binary"
	"net/netip"
)

// What arrives on the NAT-T port (RFC 3948 section 2): IKE behind a 4-byte
// zero "non-ESP marker", ESP (whose SPI is never zero), or a one-byte 0xFF
// keepalive.
type NATTKind int

const (
	NATTInvalid NATTKind = iota
	NATTIKE
	NATTESP
	NATTKeepalive
)

// ClassifyNATT sorts a datagram received on the NAT-T port. For IKE it
// returns the message without the marker, for ESP the datagram as it is.
func ClassifyNATT(b []byte) (NATTKind, []byte) {
	switch {
	case len(b) == 1 && b[0] == 0xff:
		return NATTKeepalive, nil
	case len(b) >= 4 && binary.BigEndian.Uint32(b) == 0:
		return NATTIKE, b[4:]
	case len(b) >= 8:
		return NATTESP, b
	}
	return NATTInvalid, nil
}

// nonESPMarker prefixes IKE messages sent from the NAT-T port.
var nonESPMarker = []byte{0, 0, 0, 0}

// natKeepalive is the NAT-keepalive packet (RFC 3948 section 2.3).
var natKeepalive = []byte{0xff}

// natHash is the NAT_DETECTION_*_IP data: SHA-1(SPIi | SPIr | IP | port)
// (RFC 7296 2.23).
func natHash(spii, spir uint64, ap netip.AddrPort) []byte {
	h := sha1.New()
	var b [16]byte
	binary.BigEndian.PutUint64(b[:], spii)
	binary.BigEndian.PutUint64(b[8:], spir)
	h.Write(b[:])
	h.Write(ap.Addr().Unmap().AsSlice())
	binary.BigEndian.PutUint16(b[:], ap.Port())
	h.Write(b[:2])
	return h.Sum(nil)
}

// natNotifies are the two NAT detection notifies. With fake set, the
// source hash is of an address nobody has, so that the peer believes we
// are behind a NAT and both sides encapsulate ESP in UDP.
func natNotifies(spii, spir uint64, local, remote netip.AddrPort, fake bool) []Payload {
	src := natHash(spii, spir, local)
	if fake {
		src = natHash(spii, spir, netip.AddrPortFrom(netip.IPv4Unspecified(), 0))
	}
	return []Payload{
		&Notify{NotifyType: NAT_DETECTION_SOURCE_IP, Data: src},
		&Notify{NotifyType: NAT_DETECTION_DESTINATION_IP, Data: natHash(spii, spir, remote)},
	}
}

// detectNAT evaluates the peer's NAT detection notifies: the peer is behind
// a NAT when none of its source hashes matches the address its message
// came from; we are when its destination hash does not match our address.
// ok is false when the peer sent no NAT detection at all.
func detectNAT(ps []Payload, spii, spir uint64, local, remote netip.AddrPort) (natLocal, natRemote, ok bool) {
	var srcSeen, dstSeen, srcMatch bool
	wantSrc := natHash(spii, spir, remote)
	wantDst := natHash(spii, spir, local)
	for _, p := range ps {
		n, isN := p.(*Notify)
		if !isN {
			continue
		}
		switch n.NotifyType {
		case NAT_DETECTION_SOURCE_IP:
			srcSeen = true
			if string(n.Data) == string(wantSrc) {
				srcMatch = true
			}
		case NAT_DETECTION_DESTINATION_IP:
			dstSeen = true
			natLocal = string(n.Data) != string(wantDst)
		}
	}
	if !srcSeen || !dstSeen {
		return false, false, false
	}
	return natLocal, !srcMatch, true
}
