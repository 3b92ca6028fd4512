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
