package esp

import (
	"net/netip"
	"slices"
)

// remoteIndex finds a packet's outbound SA among many: the SAs by each of
// their remote selectors, so that a packet is tried only against the SAs
// whose remote selectors contain its destination. A hub with a thousand
// branches otherwise tried up to a thousand SAs per packet (53 µs at 1000,
// BenchmarkOutboundLookup). The answer is the linear search's: the first
// SA in table order that matches.
type remoteIndex struct {
	// byPrefix lists, for each remote selector, the positions in the
	// table's out of the SAs that have it, ascending.
	byPrefix map[netip.Prefix][]int32
	// lens4 and lens6 are the selector lengths present, per family.
	lens4, lens6 []int
	// any lists the SAs without remote selectors (they match anything).
	any []int32
}

func newRemoteIndex(out []*SA) *remoteIndex {
	x := &remoteIndex{byPrefix: map[netip.Prefix][]int32{}}
	for i, sa := range out {
		if len(sa.RemoteTS) == 0 {
			x.any = append(x.any, int32(i))
			continue
		}
		for _, p := range sa.RemoteTS {
			p = p.Masked()
			l := x.byPrefix[p]
			if len(l) == 0 || l[len(l)-1] != int32(i) { // a selector given twice
				x.byPrefix[p] = append(l, int32(i))
			}
			lens := &x.lens6
			if p.Addr().Is4() {
				lens = &x.lens4
			}
			if !slices.Contains(*lens, p.Bits()) {
				*lens = append(*lens, p.Bits())
			}
		}
	}
	return x
}

// find returns the first SA of out (by position) that matches, as the
// linear search would.
func (x *remoteIndex) find(out []*SA, src, dst netip.Addr, ifID uint32) *SA {
	best := -1
	try := func(list []int32) {
		for _, i := range list {
			if best >= 0 && int(i) >= best {
				return
			}
			sa := out[i]
			if sa.IfID == ifID && !sa.dead.Load() && matchAny(sa.LocalTS, src) {
				best = int(i)
				return
			}
		}
	}
	lens := x.lens6
	if dst.Is4() {
		lens = x.lens4
	}
	for _, bits := range lens {
		p, err := dst.Prefix(bits)
		if err != nil {
			continue
		}
		try(x.byPrefix[p])
	}
	try(x.any)
	if best < 0 {
		return nil
	}
	return out[best]
}
