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
		{"GOGC's goal above its minimum: no limit", 1 << 20, 40 << 20, 50, 512 << 10, 0, math.MaxInt64},
		{"just below GOGC's minimum", 1 << 20, 1300 << 10, 50, 512 << 10, 0, 1<<20 + 1300<<10 + 512<<10},
		{"at GOGC's minimum", 1 << 20, 1400 << 10, 50, 512 << 10, 0, math.MaxInt64},
		{"GOGC 100's minimum is 4 MB", 1 << 20, 1900 << 10, 100, 512 << 10, 0, 1<<20 + 1900<<10 + 512<<10},
		{"capped when above GOGC's minimum", 1 << 20, 40 << 20, 50, 512 << 10, 32 << 20, 32 << 20},
		{"capped when small", 1 << 20, 300 << 10, 50, 512 << 10, 1 << 20, 1 << 20},
		{"no overflow", 1 << 63, 1 << 10, 100, 0, 0, math.MaxInt64},
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

// TestFollowLiftsTheLimit: the limit follows the live heap, and is lifted
// once GOGC's own goal is above its minimum, after the collections that
// see it, so a service that needs more is not held to its idle size.
func TestFollowLiftsTheLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	defer debug.SetGCPercent(debug.SetGCPercent(50))
	debug.SetMemoryLimit(math.MaxInt64)
	note, stop := Follow(0)
	defer stop()
	if note == "" {
		t.Fatal("Follow says nothing")
	}
	runtime.GC()
	small := waitLimit(t, func(l int64) bool { return l < math.MaxInt64 })
	if u := Read(); u.Live >= 1<<20 {
		t.Skipf("the test binary holds %d bytes live: too much to see the idle limit", u.Live)
	}
	for range 64 {
		keep = append(keep, make([]byte, 1<<20))
	}
	defer func() { keep = nil }()
	runtime.GC()
	waitLimit(t, func(l int64) bool { return l == math.MaxInt64 })
	t.Logf("limit %d KiB idle, none with 64 MiB live", small>>10)
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
