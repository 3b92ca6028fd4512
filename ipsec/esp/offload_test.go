package esp

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// tcpSuper builds a TCP packet with a 12-byte timestamp option and the
// given payload, its checksum field holding the pseudo-header sum the way
// the kernel hands CHECKSUM_PARTIAL packets to a TUN.
func tcpSuper(v6 bool, payload []byte, flags byte) []byte {
	ipHL := 20
	if v6 {
		ipHL = 40
	}
	const tcpHL = 32
	p := make([]byte, ipHL+tcpHL+len(payload))
	if v6 {
		p[0] = 0x60
		binary.BigEndian.PutUint16(p[4:], uint16(len(p)-40))
		p[6], p[7] = protoTCP, 64
		copy(p[8:24], bytes.Repeat([]byte{0xfd, 1}, 8))
		copy(p[24:40], bytes.Repeat([]byte{0xfd, 2}, 8))
	} else {
		p[0] = 0x45
		binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
		binary.BigEndian.PutUint16(p[4:], 1000)
		p[6] = 0x40 // DF
		p[8], p[9] = 64, protoTCP
		copy(p[12:16], []byte{10, 10, 1, 2})
		copy(p[16:20], []byte{10, 10, 2, 2})
		binary.BigEndian.PutUint16(p[10:], ^checksum(p[:20], 0))
	}
	t := p[ipHL:]
	binary.BigEndian.PutUint16(t[0:], 40000)
	binary.BigEndian.PutUint16(t[2:], 5201)
	binary.BigEndian.PutUint32(t[4:], 0xfffff000) // wraps during the test
	binary.BigEndian.PutUint32(t[8:], 77)
	t[12], t[13] = tcpHL/4<<4, flags
	binary.BigEndian.PutUint16(t[14:], 512)
	copy(t[20:], []byte{1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 8})
	copy(t[tcpHL:], payload)
	var ps uint64
	if v6 {
		ps = pseudoHeaderSum(p[8:24], p[24:40], protoTCP, len(t))
	} else {
		ps = pseudoHeaderSum(p[12:16], p[16:20], protoTCP, len(t))
	}
	binary.BigEndian.PutUint16(t[16:], checksum(nil, ps))
	return p
}

// validTCP reports whether the IP and TCP checksums of pkt verify.
func validTCP(pkt []byte) bool {
	var ps uint64
	ipHL := 40
	if pkt[0]>>4 == 4 {
		ipHL = 20
		if checksum(pkt[:20], 0) != 0xffff {
			return false
		}
		ps = pseudoHeaderSum(pkt[12:16], pkt[16:20], protoTCP, len(pkt)-ipHL)
	} else {
		ps = pseudoHeaderSum(pkt[8:24], pkt[24:40], protoTCP, len(pkt)-ipHL)
	}
	return checksum(pkt[ipHL:], ps) == 0xffff
}

func TestSegmentAndCoalesceTCP(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		const mss = 1348
		payload := seqBytes(10*mss+500, 3)
		super := tcpSuper(v6, payload, tcpFlagACK|tcpFlagPSH)
		h := vnetHdr{flags: unix.VIRTIO_NET_HDR_F_NEEDS_CSUM, gsoSize: mss, csumStart: 20, csumOffset: 16,
			gsoType: unix.VIRTIO_NET_HDR_GSO_TCPV4}
		ipHL := 20
		if v6 {
			h.gsoType, h.csumStart, ipHL = unix.VIRTIO_NET_HDR_GSO_TCPV6, 40, 40
		}
		var s segmenter
		if err := s.reset(h, super); err != nil {
			t.Fatal(err)
		}
		var segs [][]byte
		for {
			buf := make([]byte, s.maxSegment())
			n := s.next(buf)
			if n == 0 {
				break
			}
			segs = append(segs, buf[:n])
		}
		if len(segs) != 11 {
			t.Fatalf("v6=%v: %d segments, want 11", v6, len(segs))
		}
		var got []byte
		for i, seg := range segs {
			if !validTCP(seg) {
				t.Errorf("v6=%v segment %d: bad checksum", v6, i)
			}
			wantSeq := 0xfffff000 + uint32(i*mss)
			if seq := binary.BigEndian.Uint32(seg[ipHL+4:]); seq != wantSeq {
				t.Errorf("v6=%v segment %d: seq %#x, want %#x", v6, i, seq, wantSeq)
			}
			if psh := seg[ipHL+13]&tcpFlagPSH != 0; psh != (i == 10) {
				t.Errorf("v6=%v segment %d: PSH=%v", v6, i, psh)
			}
			if !v6 && binary.BigEndian.Uint16(seg[4:]) != 1000+uint16(i) {
				t.Errorf("segment %d: IP ID %d, want %d", i, binary.BigEndian.Uint16(seg[4:]), 1000+i)
			}
			got = append(got, seg[ipHL+32:]...)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("v6=%v: segments do not carry the payload in order", v6)
		}

		// Merge them back: one frame, a GSO super-packet equal to the
		// original apart from the checksum field, which stays partial.
		var frames [][]byte
		co := newCoalescer(func(f []byte) error { frames = append(frames, bytes.Clone(f)); return nil })
		for _, seg := range segs {
			if err := co.add(seg); err != nil {
				t.Fatal(err)
			}
		}
		if err := co.flush(); err != nil {
			t.Fatal(err)
		}
		if len(frames) != 1 {
			t.Fatalf("v6=%v: coalesced into %d frames, want 1", v6, len(frames))
		}
		var gh vnetHdr
		gh.decode(frames[0])
		if gh.gsoType != h.gsoType || gh.gsoSize != mss || gh.csumStart != h.csumStart || gh.csumOffset != 16 ||
			gh.flags != unix.VIRTIO_NET_HDR_F_NEEDS_CSUM || int(gh.hdrLen) != ipHL+32 {
			t.Errorf("v6=%v: vnet header %+v", v6, gh)
		}
		if merged := frames[0][vnetHdrLen:]; !bytes.Equal(merged, super) {
			t.Errorf("v6=%v: merged packet differs from the original super-packet\n got %x\nwant %x", v6, merged[:ipHL+32], super[:ipHL+32])
		}
	}
}

func TestCoalesceKeepsFlowsApart(t *testing.T) {
	a1 := tcpSuper(false, seqBytes(100, 1), tcpFlagACK)
	a2 := tcpSuper(false, seqBytes(100, 2), tcpFlagACK)
	binary.BigEndian.PutUint32(a2[24:], 0xfffff000+100)
	gap := tcpSuper(false, seqBytes(100, 3), tcpFlagACK) // same seq as a1: not contiguous
	other := tcpSuper(false, seqBytes(100, 4), tcpFlagACK)
	binary.BigEndian.PutUint16(other[20:], 40001) // another source port
	syn := tcpSuper(false, nil, 0x02)
	var sizes []int
	co := newCoalescer(func(f []byte) error { sizes = append(sizes, len(f)-vnetHdrLen); return nil })
	for _, p := range [][]byte{a1, a2, gap, other, syn} {
		if err := co.add(p); err != nil {
			t.Fatal(err)
		}
	}
	co.flush()
	want := []int{252, 152, 152, 52}
	if len(sizes) != len(want) {
		t.Fatalf("frames of %v bytes, want %v", sizes, want)
	}
	for i := range want {
		if sizes[i] != want[i] {
			t.Fatalf("frames of %v bytes, want %v", sizes, want)
		}
	}
}

func TestSegmentCompletesChecksum(t *testing.T) {
	pkt := tcpSuper(false, seqBytes(333, 1), tcpFlagACK)
	var s segmenter
	h := vnetHdr{flags: unix.VIRTIO_NET_HDR_F_NEEDS_CSUM, csumStart: 20, csumOffset: 16}
	if err := s.reset(h, pkt); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, s.maxSegment())
	n := s.next(out)
	if n != len(pkt) || !validTCP(out[:n]) {
		t.Fatalf("single packet: %d bytes, checksum valid %v", n, validTCP(out[:n]))
	}
	if s.next(out) != 0 {
		t.Fatal("a single packet gave two segments")
	}
}

func TestSegmentRejectsMalformed(t *testing.T) {
	pkt := tcpSuper(false, seqBytes(3000, 1), tcpFlagACK)
	cases := []struct {
		name string
		h    vnetHdr
		pkt  []byte
	}{
		{"short", vnetHdr{}, pkt[:10]},
		{"csum beyond end", vnetHdr{flags: unix.VIRTIO_NET_HDR_F_NEEDS_CSUM, csumStart: 3040, csumOffset: 16}, pkt},
		{"zero mss", vnetHdr{gsoType: unix.VIRTIO_NET_HDR_GSO_TCPV4}, pkt},
		{"udp gso on tcp", vnetHdr{gsoType: unix.VIRTIO_NET_HDR_GSO_UDP_L4, gsoSize: 1000}, pkt},
		{"unknown gso", vnetHdr{gsoType: 9, gsoSize: 1000}, pkt},
	}
	for _, c := range cases {
		var s segmenter
		if err := s.reset(c.h, c.pkt); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

func TestSegmentUDP(t *testing.T) {
	const mss = 1000
	payload := seqBytes(3*mss+10, 9)
	p := make([]byte, 28+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8], p[9] = 64, protoUDP
	copy(p[12:20], []byte{10, 10, 1, 2, 10, 10, 2, 2})
	binary.BigEndian.PutUint16(p[10:], ^checksum(p[:20], 0))
	binary.BigEndian.PutUint16(p[20:], 5000)
	binary.BigEndian.PutUint16(p[22:], 6000)
	copy(p[28:], payload)
	h := vnetHdr{flags: unix.VIRTIO_NET_HDR_F_NEEDS_CSUM, gsoType: unix.VIRTIO_NET_HDR_GSO_UDP_L4, gsoSize: mss, csumStart: 20, csumOffset: 6}
	var s segmenter
	if err := s.reset(h, p); err != nil {
		t.Fatal(err)
	}
	var got []byte
	var sizes []int
	buf := make([]byte, s.maxSegment())
	for n := s.next(buf); n > 0; n = s.next(buf) {
		seg := buf[:n]
		if checksum(seg[:20], 0) != 0xffff {
			t.Errorf("segment %d: bad IP checksum", len(sizes))
		}
		if binary.BigEndian.Uint16(seg[24:]) != uint16(n-20) {
			t.Errorf("segment %d: UDP length %d, want %d", len(sizes), binary.BigEndian.Uint16(seg[24:]), n-20)
		}
		if checksum(seg[20:], pseudoHeaderSum(seg[12:16], seg[16:20], protoUDP, n-20)) != 0xffff {
			t.Errorf("segment %d: bad UDP checksum", len(sizes))
		}
		sizes = append(sizes, n)
		got = append(got, seg[28:]...)
	}
	if len(sizes) != 4 || sizes[3] != 38 || !bytes.Equal(got, payload) {
		t.Fatalf("segments of %v bytes; payload intact %v; want 3x1028 and 38", sizes, bytes.Equal(got, payload))
	}
}

// FuzzOffload feeds arbitrary virtio headers and packets to the segmenter
// and whatever it emits to the coalescer: neither may panic, segments must
// fit the room maxSegment promised, and frames must fit the TUN's 64 KiB.
func FuzzOffload(f *testing.F) {
	super := tcpSuper(false, seqBytes(3000, 1), tcpFlagACK)
	hdr := make([]byte, vnetHdrLen)
	(&vnetHdr{flags: 1, gsoType: unix.VIRTIO_NET_HDR_GSO_TCPV4, gsoSize: 1000, csumStart: 20, csumOffset: 16}).encode(hdr)
	f.Add(append(hdr, super...))
	f.Add(append(make([]byte, vnetHdrLen), tcpSuper(true, seqBytes(100, 1), tcpFlagACK)...))
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < vnetHdrLen {
			return
		}
		var h vnetHdr
		h.decode(frame)
		var s segmenter
		if s.reset(h, frame[vnetHdrLen:]) != nil {
			return
		}
		co := newCoalescer(func(f []byte) error {
			if len(f) > vnetHdrLen+65535 {
				t.Fatalf("frame of %d bytes", len(f))
			}
			return nil
		})
		buf := make([]byte, s.maxSegment())
		for i := 0; i < 1000; i++ {
			n := s.next(buf)
			if n == 0 {
				break
			}
			if n > len(buf) {
				t.Fatalf("segment of %d bytes in %d of room", n, len(buf))
			}
			co.add(buf[:n])
		}
		co.flush()
	})
}
