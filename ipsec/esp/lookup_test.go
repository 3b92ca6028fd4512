package esp

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"testing"
)

// BenchmarkOutboundLookup is the per-packet search for a packet's outbound
// SA among n installed pairs (a hub's branches, one /24 each), for a packet
// to the last branch installed first (t.out is newest first, so the worst
// case is the oldest): the cost a head office's data plane pays per packet.
func BenchmarkOutboundLookup(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			t := &saTable{byRemote: newRemoteIndex()}
			if os.Getenv("FLASHGATE_LINEAR_LOOKUP") == "1" {
				t.byRemote = nil // the search before the index, for comparison
			}
			for i := range n {
				sa := &SA{
					LocalTS:  []netip.Prefix{netip.MustParsePrefix("10.98.0.0/24")},
					RemoteTS: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + i/256), byte(i % 256), 0}), 24)},
				}
				t.out = append([]*SA{sa}, t.out...) // newest first
				if t.byRemote != nil {
					t.byRemote.add(sa, uint64(i+1))
				}
			}
			pkt := make([]byte, 20)
			pkt[0] = 0x45
			copy(pkt[12:16], []byte{10, 98, 0, 1})
			copy(pkt[16:20], []byte{10, 100, 0, 7}) // branch 0: the oldest
			for b.Loop() {
				if t.outbound(pkt, 0) == nil {
					b.Fatal("no SA")
				}
			}
		})
	}
}

// TestRemoteIndexAsLinear: the index finds the SA the linear search finds,
// for tables of overlapping, nested, empty and IPv6 selectors, dead SAs
// and route tunnels' if_ids.
func TestRemoteIndexAsLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	prefix := func() netip.Prefix {
		if r.IntN(8) == 0 {
			return netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(r.IntN(4))}), []int{64, 120, 128}[r.IntN(3)]).Masked()
		}
		a := netip.AddrFrom4([4]byte{10, byte(r.IntN(3)), byte(r.IntN(4)), byte(r.IntN(8))})
		return netip.PrefixFrom(a, []int{0, 8, 16, 24, 30, 32}[r.IntN(6)]).Masked()
	}
	addr := func() netip.Addr {
		if r.IntN(8) == 0 {
			return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(r.IntN(4))})
		}
		return netip.AddrFrom4([4]byte{10, byte(r.IntN(3)), byte(r.IntN(4)), byte(r.IntN(8))})
	}
	for round := range 200 {
		var out []*SA
		for range 1 + r.IntN(40) {
			sa := &SA{IfID: uint32(r.IntN(2))}
			for range r.IntN(3) {
				sa.RemoteTS = append(sa.RemoteTS, prefix())
			}
			for range r.IntN(2) {
				sa.LocalTS = append(sa.LocalTS, prefix())
			}
			if r.IntN(10) == 0 {
				sa.dead.Store(true)
			}
			out = append(out, sa)
		}
		// out is newest first, as the table holds it; pairs come and go.
		x := newRemoteIndex()
		for i := len(out) - 1; i >= 0; i-- {
			x.add(out[i], uint64(len(out)-i))
		}
		for range min(r.IntN(5), len(out)-1) {
			i := r.IntN(len(out))
			x.remove(out[i])
			out = append(out[:i:i], out[i+1:]...)
		}
		if len(out) > 0 && r.IntN(2) == 0 { // removed and indexed again: still in its place
			x.remove(out[0])
			x.add(out[0], uint64(1000+round))
		}
		for range 200 {
			src, dst, ifID := addr(), addr(), uint32(r.IntN(2))
			var want *SA
			for _, sa := range out {
				if sa.IfID == ifID && !sa.dead.Load() && matchAny(sa.RemoteTS, dst) && matchAny(sa.LocalTS, src) {
					want = sa
					break
				}
			}
			if got := x.find(src, dst, ifID); got != want {
				t.Fatalf("round %d: %v -> %v (if_id %d): index found %p, linear search %p", round, src, dst, ifID, got, want)
			}
		}
	}
}
