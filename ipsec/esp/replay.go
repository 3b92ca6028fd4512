package esp

import "sync"

// replayWindow is the RFC 4303 section 3.4.3 anti-replay window kept as a
// ring of 64-bit blocks (RFC 6479): advancing the window clears whole
// blocks instead of shifting a bitmap, so the cost does not grow with the
// window size. One spare block lets the window slide by a full block while
// still covering size packets behind the highest one seen.
//
// The ring has the blocks the window needs (18 for 1024 packets: it
// covers more than that many behind top), indexed modulo its length, not
// rounded up to a power of two (32): every inbound SA of a hub holds one,
// and a division per packet is nothing next to its cipher.
type replayWindow struct {
	mu     sync.Mutex
	top    uint64 // highest sequence number accepted so far
	blocks []uint64
	size   uint64 // packets covered behind top
}

func newReplayWindow(packets uint32) *replayWindow {
	if packets < 64 {
		packets = 64
	}
	// One block beyond the window: the block holding top is partly in the
	// future, so the ring needs size/64+1 blocks to hold size past packets,
	// and size is more than packets.
	n := uint64(packets)/64 + 2
	return &replayWindow{blocks: make([]uint64, n), size: (n - 1) * 64}
}

// slot is the ring index of the block holding sequence numbers
// block*64 .. block*64+63.
func (w *replayWindow) slot(block uint64) uint64 { return block % uint64(len(w.blocks)) }

// check reports whether seq may be a new packet. It runs before the ICV is
// verified so that replays cost no cryptography; it changes nothing.
func (w *replayWindow) check(seq uint64) bool {
	w.mu.Lock()
	ok := w.checkLocked(seq)
	w.mu.Unlock()
	return ok
}

func (w *replayWindow) checkLocked(seq uint64) bool {
	if seq == 0 {
		return false // the first packet has sequence number 1 (RFC 4303 3.3.3)
	}
	if seq > w.top {
		return true
	}
	if w.top-seq >= w.size {
		return false
	}
	return w.blocks[w.slot(seq>>6)]&(1<<(seq&63)) == 0
}

// accept marks seq as received once its ICV is verified. It checks again
// because another worker may have accepted the same number in between.
// late is how far behind the highest number seen the packet arrived (0
// for a packet in order).
func (w *replayWindow) accept(seq uint64) (ok bool, late uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.checkLocked(seq) {
		return false, 0
	}
	if seq > w.top {
		from, to := w.top>>6, seq>>6
		if to-from > uint64(len(w.blocks)) {
			from = to - uint64(len(w.blocks))
		}
		for b := from + 1; b <= to; b++ {
			w.blocks[w.slot(b)] = 0
		}
		w.top = seq
	} else {
		late = w.top - seq
	}
	w.blocks[w.slot(seq>>6)] |= 1 << (seq & 63)
	return true, late
}
