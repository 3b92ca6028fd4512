package e2e

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// ikePacket builds an IPv4/UDP packet from 10.10.0.1:sport to
// 10.10.0.2:dport carrying payload.
func ikePacket(sport, dport uint16, payload []byte) []byte {
	p := make([]byte, 28+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:4], uint16(len(p)))
	p[8], p[9] = 64, 17
	copy(p[12:16], []byte{10, 10, 0, 1})
	copy(p[16:20], []byte{10, 10, 0, 2})
	binary.BigEndian.PutUint16(p[20:22], sport)
	binary.BigEndian.PutUint16(p[22:24], dport)
	binary.BigEndian.PutUint16(p[24:26], uint16(8+len(payload)))
	copy(p[28:], payload)
	return p
}

// ikeHeader is an IKEv2 header (RFC 7296 3.1) of an exchange, flags and
// message ID, with a payload's worth of room after it.
func ikeHeader(exchange, flags byte, msgID uint32) []byte {
	h := make([]byte, 28+8)
	h[0] = 1 // SPIi
	h[16], h[17], h[18], h[19] = 33, 0x20, exchange, flags
	binary.BigEndian.PutUint32(h[20:24], msgID)
	binary.BigEndian.PutUint32(h[24:28], uint32(len(h)))
	return h
}

func TestParseIKEPacket(t *testing.T) {
	a, b := netip.MustParseAddr("10.10.0.1"), netip.MustParseAddr("10.10.0.2")
	natt := append([]byte{0, 0, 0, 0}, ikeHeader(35, 0x20, 1)...)
	frag := ikePacket(500, 500, ikeHeader(34, 0x08, 0))
	frag[7] = 10 // fragment offset 80 bytes
	for _, tc := range []struct {
		name string
		pkt  []byte
		want *ikeMessage
	}{
		{"IKE_SA_INIT request on 500", ikePacket(500, 500, ikeHeader(34, 0x08, 0)),
			&ikeMessage{src: netip.AddrPortFrom(a, 500), dst: netip.AddrPortFrom(b, 500), exchange: 34}},
		{"IKE_AUTH response on 4500", ikePacket(4500, 4500, natt),
			&ikeMessage{src: netip.AddrPortFrom(a, 4500), dst: netip.AddrPortFrom(b, 4500), exchange: 35, response: true, msgID: 1}},
		{"ESP in UDP 4500", ikePacket(4500, 4500, append([]byte{0xc0, 1, 2, 3}, ikeHeader(35, 0, 1)...)), nil},
		{"IKEv1 version", ikePacket(500, 500, func() []byte { h := ikeHeader(34, 0, 0); h[17] = 0x10; return h }()), nil},
		{"other UDP port", ikePacket(53, 53, ikeHeader(34, 0, 0)), nil},
		{"truncated IKE header", ikePacket(500, 500, ikeHeader(34, 0, 0)[:20]), nil},
		{"later fragment", frag, nil},
		{"IPv6", append([]byte{0x60}, make([]byte, 60)...), nil},
		{"empty", nil, nil},
	} {
		got, ok := parseIKEPacket(tc.pkt)
		switch {
		case tc.want == nil && ok:
			t.Errorf("%s: parsed as %v, want not IKE", tc.name, got)
		case tc.want != nil && !ok:
			t.Errorf("%s: not parsed, want %v", tc.name, *tc.want)
		case tc.want != nil && got != *tc.want:
			t.Errorf("%s: %+v, want %+v", tc.name, got, *tc.want)
		}
	}
}

func FuzzParseIKEPacket(f *testing.F) {
	f.Add(ikePacket(500, 500, ikeHeader(34, 0x08, 0)))
	f.Add(ikePacket(4500, 4500, append([]byte{0, 0, 0, 0}, ikeHeader(35, 0x20, 1)...)))
	f.Add(ikePacket(4500, 4500, []byte{0xff}))
	f.Fuzz(func(t *testing.T, p []byte) {
		m, ok := parseIKEPacket(p)
		if !ok {
			return
		}
		// Whatever it accepts is a UDP packet of the IKE ports.
		if m.src.Port() != 500 && m.dst.Port() != 500 && m.src.Port() != 4500 && m.dst.Port() != 4500 {
			t.Fatalf("accepted a packet of ports %d -> %d", m.src.Port(), m.dst.Port())
		}
	})
}
