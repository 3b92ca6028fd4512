package esp

import (
	"fmt"
	"testing"
)

var benchSizes = []int{64, 512, 1400, 8192}

func BenchmarkEncap(b *testing.B) {
	for _, tc := range transforms {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/%d", tc.name, n), func(b *testing.B) {
				out, _ := testPair(b, tc, 0x9000)
				inner := ipv4Packet(n, 1)
				buf := make([]byte, Headroom+n+Tailroom)
				b.ReportAllocs()
				b.SetBytes(int64(n))
				for b.Loop() {
					copy(buf[Headroom:], inner)
					if _, err := out.Encap(buf, Headroom, n); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkDecap(b *testing.B) {
	for _, tc := range transforms {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/%d", tc.name, n), func(b *testing.B) {
				out, in := testPair(b, tc, 0x9000)
				// Seal enough distinct packets up front; the replay window
				// must see fresh numbers, so they are replayed in order
				// against a fresh SA each lap.
				const lap = 4096
				pkts := make([][]byte, lap)
				for i := range pkts {
					pkts[i] = encapCopy(b, out, ipv4Packet(n, 1))
				}
				buf := make([]byte, len(pkts[0]))
				b.ReportAllocs()
				b.SetBytes(int64(n))
				i := 0
				for b.Loop() {
					if i == lap {
						b.StopTimer()
						_, in = testPair(b, tc, 0x9000)
						i = 0
						b.StartTimer()
					}
					copy(buf, pkts[i])
					if _, err := in.Decap(buf); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}

// BenchmarkSegment cuts a 64 KiB TSO super-packet into 1348-byte segments
// with their checksums, as the TX path does for every read from the TUN.
func BenchmarkSegment(b *testing.B) {
	super := tcpSuper(false, seqBytes(48*1348, 1), tcpFlagACK)
	h := vnetHdr{flags: 1, gsoType: 1, gsoSize: 1348, csumStart: 20, csumOffset: 16}
	buf := make([]byte, 2048)
	var s segmenter
	b.ReportAllocs()
	b.SetBytes(int64(len(super)))
	for b.Loop() {
		if err := s.reset(h, super); err != nil {
			b.Fatal(err)
		}
		for s.next(buf) > 0 {
		}
	}
}

// BenchmarkCoalesce merges 48 in-order segments back into one frame, as
// the RX path does before writing to the TUN.
func BenchmarkCoalesce(b *testing.B) {
	super := tcpSuper(false, seqBytes(48*1348, 1), tcpFlagACK)
	h := vnetHdr{flags: 1, gsoType: 1, gsoSize: 1348, csumStart: 20, csumOffset: 16}
	var s segmenter
	s.reset(h, super)
	var segs [][]byte
	for {
		buf := make([]byte, 2048)
		n := s.next(buf)
		if n == 0 {
			break
		}
		segs = append(segs, buf[:n])
	}
	frames := 0
	co := newCoalescer(func([]byte) error { frames++; return nil })
	b.ReportAllocs()
	b.SetBytes(int64(len(super)))
	for b.Loop() {
		for _, seg := range segs {
			co.add(seg)
		}
		co.flush()
	}
	if frames != b.N {
		b.Fatalf("%d frames for %d super-packets", frames, b.N)
	}
}
