package esp

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// The TUN device hands us and takes from us packets prefixed by a
// virtio_net_hdr (IFF_VNET_HDR). With TUNSETOFFLOAD the kernel sends TCP
// and UDP super-packets of up to 64 KiB with their checksums left to us:
// one read per 64 KiB instead of one per MTU is where a userspace tunnel
// gets its speed. Here such packets are split into MTU-sized segments
// (segmenter) and, in the other direction, consecutive TCP segments of a
// flow are merged back into super-packets (coalescer).

const vnetHdrLen = 10

// vnetHdr is struct virtio_net_hdr, in host byte order (little endian on
// every board flashgate runs on, and the TUN default without TUNSETVNETLE).
type vnetHdr struct {
	flags      uint8
	gsoType    uint8
	hdrLen     uint16
	gsoSize    uint16
	csumStart  uint16
	csumOffset uint16
}

func (h *vnetHdr) decode(b []byte) {
	h.flags, h.gsoType = b[0], b[1]
	h.hdrLen = binary.LittleEndian.Uint16(b[2:])
	h.gsoSize = binary.LittleEndian.Uint16(b[4:])
	h.csumStart = binary.LittleEndian.Uint16(b[6:])
	h.csumOffset = binary.LittleEndian.Uint16(b[8:])
}

func (h *vnetHdr) encode(b []byte) {
	b[0], b[1] = h.flags, h.gsoType
	binary.LittleEndian.PutUint16(b[2:], h.hdrLen)
	binary.LittleEndian.PutUint16(b[4:], h.gsoSize)
	binary.LittleEndian.PutUint16(b[6:], h.csumStart)
	binary.LittleEndian.PutUint16(b[8:], h.csumOffset)
}

const (
	protoTCP = 6
	protoUDP = 17

	tcpFlagFIN = 0x01
	tcpFlagPSH = 0x08
	tcpFlagACK = 0x10
	tcpFlagCWR = 0x80
)

var errBadOffload = errors.New("esp: malformed offload packet from TUN")

// segmenter cuts one packet read from the TUN into the packets that go on
// the wire, completing checksums the kernel left to the device.
type segmenter struct {
	h      vnetHdr
	pkt    []byte
	ipHL   int // IP header length
	l4HL   int // TCP or UDP header length; 0 when not splitting
	mss    int
	off    int // next payload byte to emit
	index  int
	v6     bool
	single bool
	done   bool
}

// reset prepares to emit the segments of pkt, described by h.
func (s *segmenter) reset(h vnetHdr, pkt []byte) error {
	*s = segmenter{h: h, pkt: pkt}
	if len(pkt) < 20 {
		return fmt.Errorf("%w: %d bytes", errBadOffload, len(pkt))
	}
	s.v6 = pkt[0]>>4 == 6
	gso := h.gsoType &^ unix.VIRTIO_NET_HDR_GSO_ECN
	if gso == unix.VIRTIO_NET_HDR_GSO_NONE {
		s.single = true
		if h.flags&unix.VIRTIO_NET_HDR_F_NEEDS_CSUM != 0 {
			if int(h.csumStart)+int(h.csumOffset)+2 > len(pkt) {
				return fmt.Errorf("%w: checksum at %d+%d of %d bytes", errBadOffload, h.csumStart, h.csumOffset, len(pkt))
			}
		}
		return nil
	}
	var proto byte
	if s.v6 {
		if len(pkt) < 40 {
			return fmt.Errorf("%w: short IPv6 header", errBadOffload)
		}
		s.ipHL, proto = 40, pkt[6] // extension headers are never offloaded by the TUN's stack
	} else {
		s.ipHL, proto = int(pkt[0]&0xf)*4, pkt[9]
	}
	switch gso {
	case unix.VIRTIO_NET_HDR_GSO_TCPV4, unix.VIRTIO_NET_HDR_GSO_TCPV6:
		if proto != protoTCP || len(pkt) < s.ipHL+20 {
			return fmt.Errorf("%w: TCP GSO on protocol %d", errBadOffload, proto)
		}
		s.l4HL = int(pkt[s.ipHL+12]>>4) * 4
	case unix.VIRTIO_NET_HDR_GSO_UDP_L4:
		if proto != protoUDP {
			return fmt.Errorf("%w: UDP GSO on protocol %d", errBadOffload, proto)
		}
		s.l4HL = 8
	default:
		return fmt.Errorf("%w: GSO type %d", errBadOffload, h.gsoType)
	}
	s.mss = int(h.gsoSize)
	if s.ipHL < 20 || s.l4HL < 8 || s.mss == 0 || s.ipHL+s.l4HL > len(pkt) {
		return fmt.Errorf("%w: headers %d+%d, mss %d, %d bytes", errBadOffload, s.ipHL, s.l4HL, s.mss, len(pkt))
	}
	s.off = s.ipHL + s.l4HL
	return nil
}

// maxSegment is the longest packet next can write.
func (s *segmenter) maxSegment() int {
	if s.single {
		return len(s.pkt)
	}
	return s.ipHL + s.l4HL + s.mss
}

// next writes the next segment to dst and returns its length, or 0 when
// all segments have been emitted. dst must hold maxSegment bytes.
func (s *segmenter) next(dst []byte) int {
	if s.done {
		return 0
	}
	if s.single {
		s.done = true
		n := copy(dst, s.pkt)
		if s.h.flags&unix.VIRTIO_NET_HDR_F_NEEDS_CSUM != 0 {
			start, at := int(s.h.csumStart), int(s.h.csumStart)+int(s.h.csumOffset)
			// The field holds the pseudo-header sum: summing over it
			// completes the checksum (the kernel's CHECKSUM_PARTIAL).
			c := ^checksum(dst[start:n], 0)
			if c == 0 && at-start == 6 { // UDP: zero means "no checksum"
				c = 0xffff
			}
			binary.BigEndian.PutUint16(dst[at:], c)
		}
		return n
	}
	hl := s.ipHL + s.l4HL
	payload := min(s.mss, len(s.pkt)-s.off)
	if payload <= 0 && s.index > 0 {
		s.done = true
		return 0
	}
	last := s.off+payload >= len(s.pkt)
	copy(dst, s.pkt[:hl])
	copy(dst[hl:], s.pkt[s.off:s.off+payload])
	n := hl + payload
	seg := dst[:n]
	if s.v6 {
		binary.BigEndian.PutUint16(seg[4:], uint16(n-40))
	} else {
		binary.BigEndian.PutUint16(seg[2:], uint16(n))
		id := binary.BigEndian.Uint16(s.pkt[4:])
		binary.BigEndian.PutUint16(seg[4:], id+uint16(s.index))
		seg[10], seg[11] = 0, 0
		binary.BigEndian.PutUint16(seg[10:], ^checksum(seg[:s.ipHL], 0))
	}
	l4 := seg[s.ipHL:]
	var csumAt int
	var proto byte
	if s.l4HL == 8 && s.h.gsoType&^unix.VIRTIO_NET_HDR_GSO_ECN == unix.VIRTIO_NET_HDR_GSO_UDP_L4 {
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
		csumAt, proto = 6, protoUDP
	} else {
		seq := binary.BigEndian.Uint32(s.pkt[s.ipHL+4:])
		binary.BigEndian.PutUint32(l4[4:], seq+uint32(s.off-hl))
		if !last {
			l4[13] &^= tcpFlagFIN | tcpFlagPSH
		}
		if s.index > 0 {
			l4[13] &^= tcpFlagCWR
		}
		csumAt, proto = 16, protoTCP
	}
	l4[csumAt], l4[csumAt+1] = 0, 0
	var ps uint64
	if s.v6 {
		ps = pseudoHeaderSum(seg[8:24], seg[24:40], proto, len(l4))
	} else {
		ps = pseudoHeaderSum(seg[12:16], seg[16:20], proto, len(l4))
	}
	c := ^checksum(l4, ps)
	if c == 0 && proto == protoUDP {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(l4[csumAt:], c)
	s.off += payload
	s.index++
	if last {
		s.done = true
	}
	return n
}

// coalescer merges consecutive in-order TCP segments of one flow into a
// super-packet for the TUN, the inverse of the segmenter, under the rules
// Linux GRO uses: same addresses, ports, IP header fields, TCP options and
// ACK number; only ACK (and PSH on the last) set; sequence numbers
// contiguous; every segment but the last of the MSS size.
type coalescer struct {
	buf   []byte // vnetHdrLen + 64 KiB
	n     int    // bytes of packet in buf after the vnet header; 0 = empty
	count int
	hl    int // IP + TCP header length of the super-packet
	ipHL  int
	mss   int
	next  uint32 // sequence number the next segment must carry
	v6    bool
	short bool // the last segment was shorter than mss or had PSH: closed
	write func(frame []byte) error
}

func newCoalescer(write func(frame []byte) error) *coalescer {
	return &coalescer{buf: make([]byte, vnetHdrLen+65535), write: write}
}

// tcpSegment returns the IP header length, TCP header length and payload
// length if pkt is a TCP segment that may take part in coalescing.
func tcpSegment(pkt []byte) (ipHL, tcpHL, payload int, ok bool) {
	if len(pkt) < 40 {
		return 0, 0, 0, false
	}
	switch pkt[0] >> 4 {
	case 4:
		// No options, no fragments.
		if pkt[0] != 0x45 || pkt[9] != protoTCP || binary.BigEndian.Uint16(pkt[6:])&0x3fff != 0 {
			return 0, 0, 0, false
		}
		ipHL = 20
	case 6:
		if len(pkt) < 60 || pkt[6] != protoTCP {
			return 0, 0, 0, false
		}
		ipHL = 40
	default:
		return 0, 0, 0, false
	}
	tcpHL = int(pkt[ipHL+12]>>4) * 4
	if tcpHL < 20 || ipHL+tcpHL > len(pkt) {
		return 0, 0, 0, false
	}
	flags := pkt[ipHL+13]
	if flags&^(tcpFlagPSH) != tcpFlagACK {
		return 0, 0, 0, false
	}
	payload = len(pkt) - ipHL - tcpHL
	return ipHL, tcpHL, payload, payload > 0
}

// add queues pkt for the TUN, merging it into the pending super-packet
// when the rules allow, and writing what can no longer grow.
func (c *coalescer) add(pkt []byte) error {
	ipHL, tcpHL, payload, ok := tcpSegment(pkt)
	if !ok {
		if err := c.flush(); err != nil {
			return err
		}
		return c.writeSingle(pkt)
	}
	if c.n > 0 && c.canAppend(pkt, ipHL, tcpHL, payload) {
		copy(c.buf[vnetHdrLen+c.n:], pkt[ipHL+tcpHL:])
		c.n += payload
		c.count++
		c.next += uint32(payload)
		if payload < c.mss || pkt[ipHL+13]&tcpFlagPSH != 0 {
			c.short = true
			c.buf[vnetHdrLen+c.ipHL+13] |= pkt[ipHL+13] & tcpFlagPSH
		}
		return nil
	}
	if err := c.flush(); err != nil {
		return err
	}
	copy(c.buf[vnetHdrLen:], pkt)
	c.n, c.count, c.hl, c.ipHL, c.mss = len(pkt), 1, ipHL+tcpHL, ipHL, payload
	c.v6 = ipHL == 40
	c.next = binary.BigEndian.Uint32(pkt[ipHL+4:]) + uint32(payload)
	c.short = pkt[ipHL+13]&tcpFlagPSH != 0
	return nil
}

func (c *coalescer) canAppend(pkt []byte, ipHL, tcpHL, payload int) bool {
	head := c.buf[vnetHdrLen : vnetHdrLen+c.hl]
	if c.short || ipHL != c.ipHL || ipHL+tcpHL != c.hl || payload > c.mss || c.n+payload > 65535 {
		return false
	}
	if binary.BigEndian.Uint32(pkt[ipHL+4:]) != c.next {
		return false
	}
	if c.v6 {
		// Version, traffic class, flow label; next header, hop limit; addresses.
		if binary.BigEndian.Uint32(pkt[0:]) != binary.BigEndian.Uint32(head[0:]) || pkt[7] != head[7] ||
			string(pkt[8:40]) != string(head[8:40]) {
			return false
		}
	} else {
		// TOS, TTL, protocol, addresses.
		if pkt[1] != head[1] || pkt[8] != head[8] || string(pkt[12:20]) != string(head[12:20]) {
			return false
		}
	}
	t, h := pkt[ipHL:ipHL+tcpHL], head[ipHL:]
	// Ports; ACK number; options. Flags were checked by tcpSegment.
	return string(t[0:4]) == string(h[0:4]) && string(t[8:12]) == string(h[8:12]) &&
		string(t[20:]) == string(h[20:tcpHL])
}

func (c *coalescer) writeSingle(pkt []byte) error {
	// Checksums of packets that come out of the tunnel are complete: the
	// peer's segmenter or sending host computed them.
	var h vnetHdr
	h.encode(c.buf[:vnetHdrLen])
	copy(c.buf[vnetHdrLen:], pkt)
	return c.write(c.buf[:vnetHdrLen+len(pkt)])
}

// flush writes the pending packet, as a GSO super-packet if it grew.
func (c *coalescer) flush() error {
	if c.n == 0 {
		return nil
	}
	pkt := c.buf[vnetHdrLen : vnetHdrLen+c.n]
	var h vnetHdr
	if c.count > 1 {
		var ps uint64
		if c.v6 {
			binary.BigEndian.PutUint16(pkt[4:], uint16(c.n-40))
			ps = pseudoHeaderSum(pkt[8:24], pkt[24:40], protoTCP, c.n-40)
			h.gsoType = unix.VIRTIO_NET_HDR_GSO_TCPV6
		} else {
			binary.BigEndian.PutUint16(pkt[2:], uint16(c.n))
			pkt[10], pkt[11] = 0, 0
			binary.BigEndian.PutUint16(pkt[10:], ^checksum(pkt[:20], 0))
			ps = pseudoHeaderSum(pkt[12:16], pkt[16:20], protoTCP, c.n-20)
			h.gsoType = unix.VIRTIO_NET_HDR_GSO_TCPV4
		}
		// CHECKSUM_PARTIAL: the field holds the pseudo-header sum and the
		// kernel (or the next NIC) completes it per segment.
		binary.BigEndian.PutUint16(pkt[c.ipHL+16:], checksum(nil, ps))
		h.flags = unix.VIRTIO_NET_HDR_F_NEEDS_CSUM
		h.hdrLen = uint16(c.hl)
		h.gsoSize = uint16(c.mss)
		h.csumStart = uint16(c.ipHL)
		h.csumOffset = 16
	}
	h.encode(c.buf[:vnetHdrLen])
	c.n, c.count = 0, 0
	return c.write(c.buf[:vnetHdrLen+len(pkt)])
}
