package gomem

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestLimit(t *testing.T) {
	for _, c := range []struct {
		name                string
		overhead, live      uint64
		gogc                int
		headroom, max, want int64
	}{
		{"idle: the headroom, not 2 MB", 1 << 20, 300 << 10, 50, 512 << 10, 0, 1<<20 + 300<<10 + 512<<10},
		{"busy: GOGC's growth", 1 << 20, 40 << 20, 50, 512 << 10, 0, 1<<20 + 40<<20 + 20<<20},
		{"capped", 1 << 20, 40 << 20, 50, 512 << 10, 32 << 20, 32 << 20},
		{"no overflow", math.MaxUint64 / 2, math.MaxUint64 / 4, 100, 0, 0, math.MaxInt64},
	} {
		if got := Limit(c.overhead, c.live, c.gogc, c.headroom, c.max); got != c.want {
			t.Errorf("%s: Limit(%d, %d, %d, %d, %d) = %d, want %d", c.name, c.overhead, c.live, c.gogc, c.headroom, c.max, got, c.want)
		}
	}
}

func TestRead(t *testing.T) {
	runtime.GC()
	u := Read()
	if u.Total == 0 || u.Objects == 0 || u.Stacks == 0 || u.Metadata == 0 {
		t.Fatalf("Read() = %+v: a figure the runtime has is 0", u)
	}
	if u.Overhead() >= u.Total {
		t.Fatalf("overhead %d of a total %d: the heap is not subtracted", u.Overhead(), u.Total)
	}
}

// keep holds the test's live heap where the compiler cannot drop it.
var keep [][]byte

// TestFollowRaisesTheLimit: the limit follows the live heap up, after
// the collections that see it, so a service that needs more is not
// held to its idle size.
func TestFollowRaisesTheLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	defer debug.SetGCPercent(debug.SetGCPercent(50))
	note, stop := Follow(0)
	defer stop()
	if note == "" {
		t.Fatal("Follow says nothing")
	}
	runtime.GC()
	small := waitLimit(t, func(l int64) bool { return l < math.MaxInt64 })
	for range 64 {
		keep = append(keep, make([]byte, 1<<20))
	}
	defer func() { keep = nil }()
	runtime.GC()
	big := waitLimit(t, func(l int64) bool { return l > 64<<20+32<<20 })
	t.Logf("limit %d KiB idle, %d KiB with 64 MiB live", small>>10, big>>10)
	// GOGC's own growth: the limit is above live + 50%.
	if big < 96<<20 {
		t.Errorf("limit %d with 64 MiB live at GOGC=50, want at least 96 MiB", big)
	}
}

// waitLimit waits (collecting) until the memory limit satisfies ok: the
// follower runs in the runtime's cleanup goroutine after a collection.
func waitLimit(t *testing.T, ok func(int64) bool) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l := debug.SetMemoryLimit(-1)
		if ok(l) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("memory limit still %d after 30 s of collections", l)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFollowLeavesTheEnvironmentsLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "100MiB")
	before := debug.SetMemoryLimit(-1)
	_, stop := Follow(0)
	defer stop()
	if after := debug.SetMemoryLimit(-1); after != before {
		t.Errorf("limit %d -> %d with GOMEMLIMIT set", before, after)
	}
}
