package esp

import "sync/atomic"

// spiTable holds the inbound SAs by SPI for the packet workers, who read it
// without a lock: an open-addressed table of atomic pointers (linear
// probing), changed in place by one writer at a time (the Device's mu) and
// replaced by a larger copy when it fills up. A hub's thousand inbound SAs
// take 16 to 32 bytes each in it; in a sync.Map they took about 220 (its
// trie's nodes and entries), and each install allocated more.
//
// A deleted SA leaves a tombstone, so that a lookup probing past its slot
// still finds what lies beyond; an install reuses the first tombstone on
// its way, and the copy made when the table grows leaves them out.
type spiTable struct {
	slots atomic.Pointer[[]atomic.Pointer[SA]]
	// Writer's own counts: live SAs, and slots taken (live + tombstones).
	live, taken int
}

// deletedSA marks a slot whose SA was deleted.
var deletedSA = new(SA)

// spiSlot is where the probe for spi starts in a table of n slots (a power
// of two): a multiplicative hash, so that SPIs that differ only in their
// high bits spread too.
func spiSlot(spi uint32, n int) int {
	return int((spi * 0x9e3779b1) >> 7 & uint32(n-1))
}

// load returns the SA with inbound SPI spi, or nil.
func (t *spiTable) load(spi uint32) *SA {
	p := t.slots.Load()
	if p == nil {
		return nil
	}
	s := *p
	for i, n := spiSlot(spi, len(s)), 0; n < len(s); i, n = (i+1)&(len(s)-1), n+1 {
		sa := s[i].Load()
		if sa == nil {
			return nil
		}
		if sa != deletedSA && sa.SPI == spi {
			return sa
		}
	}
	return nil
}

// store adds sa under sa.SPI, which must not be in the table. Writers
// only, one at a time.
func (t *spiTable) store(sa *SA) {
	p := t.slots.Load()
	// Keep at least half of the slots empty, tombstones counted, so that
	// probes stay short and always end at an empty slot.
	if p == nil || 2*(t.taken+1) > len(*p) {
		t.grow(p)
		p = t.slots.Load()
	}
	s := *p
	for i := spiSlot(sa.SPI, len(s)); ; i = (i + 1) & (len(s) - 1) {
		switch s[i].Load() {
		case nil:
			t.taken++
			fallthrough
		case deletedSA:
			s[i].Store(sa)
			t.live++
			return
		}
	}
}

// remove takes the SA with SPI spi out of the table, if it is there.
// Writers only.
func (t *spiTable) remove(spi uint32) {
	p := t.slots.Load()
	if p == nil {
		return
	}
	s := *p
	for i, n := spiSlot(spi, len(s)), 0; n < len(s); i, n = (i+1)&(len(s)-1), n+1 {
		sa := s[i].Load()
		if sa == nil {
			return
		}
		if sa != deletedSA && sa.SPI == spi {
			s[i].Store(deletedSA)
			t.live--
			return
		}
	}
}

// grow replaces the slots by a copy without tombstones, of at least 4
// slots per live SA (16 at least), and publishes it: readers holding the
// old slots still find every SA in them.
func (t *spiTable) grow(old *[]atomic.Pointer[SA]) {
	n := 16
	for n < 4*(t.live+1) {
		n *= 2
	}
	s := make([]atomic.Pointer[SA], n)
	if old != nil {
		for i := range *old {
			sa := (*old)[i].Load()
			if sa == nil || sa == deletedSA {
				continue
			}
			j := spiSlot(sa.SPI, n)
			for s[j].Load() != nil {
				j = (j + 1) & (n - 1)
			}
			s[j].Store(sa)
		}
	}
	t.taken = t.live
	t.slots.Store(&s)
}
