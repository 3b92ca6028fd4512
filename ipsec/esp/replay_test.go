package esp

import (
	"math/rand/v2"
	"testing"
)

// TestReplayWindowAgainstModel holds the ring (sized exactly, not to a
// power of two) to the plain definition of RFC 4303 3.4.3: a number is
// new if it is above the highest accepted, or within size behind it and
// not accepted before.
func TestReplayWindowAgainstModel(t *testing.T) {
	for _, packets := range []uint32{1, 64, 100, 1024, 1500, 4096} {
		w := newReplayWindow(packets)
		if w.size <= uint64(max(packets, 64)) {
			t.Fatalf("window of %d: covers %d packets", packets, w.size)
		}
		if want := uint64(max(packets, 64))/64 + 2; uint64(len(w.blocks)) != want {
			t.Errorf("window of %d: %d blocks, want %d", packets, len(w.blocks), want)
		}
		r := rand.New(rand.NewPCG(uint64(packets), 7))
		seen := map[uint64]bool{}
		var top uint64
		for i := range 200000 {
			// Mostly forward, often late by up to twice the window, now
			// and then a jump of many windows.
			var seq uint64
			switch k := r.IntN(100); {
			case k < 60:
				seq = top + 1 + uint64(r.IntN(3))
			case k < 98:
				seq = max(top, 1) - min(max(top, 1)-1, uint64(r.IntN(int(2*w.size))))
			default:
				seq = top + uint64(r.IntN(int(8*w.size)))
			}
			want := seq != 0 && (seq > top || (top-seq < w.size && !seen[seq]))
			if got := w.check(seq); got != want {
				t.Fatalf("window of %d, step %d: check(%d) = %v with top %d, want %v", packets, i, seq, got, top, want)
			}
			ok, _ := w.accept(seq)
			if ok != want {
				t.Fatalf("window of %d, step %d: accept(%d) = %v with top %d, want %v", packets, i, seq, ok, top, want)
			}
			if ok {
				seen[seq] = true
				top = max(top, seq)
			}
		}
	}
}
