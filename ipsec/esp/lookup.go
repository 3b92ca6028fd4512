package esp

import (
	"net/netip"
	"sync"
)

// remoteIndex finds a packet's outbound SA among many: the outbound SAs by
// each of their remote selectors, so that a packet is tried only against
// the SAs whose remote selectors contain its destination. A hub with a
// thousand branches otherwise tried up to a thousand SAs per packet (53 µs
// at 1000, BenchmarkOutboundLookup). The answer is the linear search's
// over the table (newest first): among the matching SAs, the newest.
//
// The Device keeps one index and changes it in place as pairs come and go
// (one SA's selectors each time), under its own lock: rebuilt with every
// table it made a thousand installs a million entries of garbage.
type remoteIndex struct {
	mu sync.RWMutex
	// byPrefix lists, for each remote selector, the SAs that have it,
	// newest first.
	byPrefix map[netip.Prefix][]indexed
	// lens counts the selectors of each length, per family (index 0:
	// IPv4, 1: IPv6), so a lookup tries only the lengths present.
	lens [2]map[int]int
	// any lists the SAs without remote selectors (they match anything).
	any []indexed
}

type indexed struct {
	sa    *SA
	added uint64 // the pair's AddPair order: larger is newer
}

func newRemoteIndex() *remoteIndex {
	return &remoteIndex{byPrefix: map[netip.Prefix][]indexed{}, lens: [2]map[int]int{{}, {}}}
}

func family(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

// add indexes an outbound SA installed as the added'th pair (newer than
// every SA indexed so far).
func (x *remoteIndex) add(sa *SA, added uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := indexed{sa, added}
	if len(sa.RemoteTS) == 0 {
		x.any = append([]indexed{e}, x.any...)
		return
	}
	seen := map[netip.Prefix]bool{}
	for _, p := range sa.RemoteTS {
		p = p.Masked()
		if seen[p] { // a selector given twice
			continue
		}
		seen[p] = true
		x.byPrefix[p] = append([]indexed{e}, x.byPrefix[p]...)
		x.lens[family(p.Addr())][p.Bits()]++
	}
}

// remove drops an outbound SA from the index.
func (x *remoteIndex) remove(sa *SA) {
	x.mu.Lock()
	defer x.mu.Unlock()
	drop := func(l []indexed) []indexed {
		out := make([]indexed, 0, len(l))
		for _, e := range l {
			if e.sa != sa {
				out = append(out, e)
			}
		}
		return out
	}
	if len(sa.RemoteTS) == 0 {
		x.any = drop(x.any)
		return
	}
	seen := map[netip.Prefix]bool{}
	for _, p := range sa.RemoteTS {
		p = p.Masked()
		if seen[p] {
			continue
		}
		seen[p] = true
		l := x.byPrefix[p]
		nl := drop(l)
		if len(nl) == len(l) {
			continue
		}
		if len(nl) == 0 {
			delete(x.byPrefix, p)
		} else {
			x.byPrefix[p] = nl
		}
		f := family(p.Addr())
		if x.lens[f][p.Bits()]--; x.lens[f][p.Bits()] <= 0 {
			delete(x.lens[f], p.Bits())
		}
	}
}

// find returns the newest SA that matches, as the linear search over the
// table would.
func (x *remoteIndex) find(src, dst netip.Addr, ifID uint32) *SA {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var best indexed
	try := func(l []indexed) {
		for _, e := range l {
			if best.sa != nil && e.added <= best.added {
				return
			}
			if e.sa.IfID == ifID && !e.sa.dead.Load() && matchAny(e.sa.LocalTS, src) {
				best = e
				return
			}
		}
	}
	for bits := range x.lens[family(dst)] {
		p, err := dst.Prefix(bits)
		if err != nil {
			continue
		}
		try(x.byPrefix[p])
	}
	try(x.any)
	return best.sa
}
