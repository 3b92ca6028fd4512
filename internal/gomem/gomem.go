// Package gomem keeps an idle service's Go heap close to what it holds.
//
// Go's collector lets the heap grow to GOGC percent over what was live at
// the last collection, but never to less than a minimum of 4 MB × GOGC/100
// (2 MB at the firmware's GOGC=50). Half a dozen Go programs sit idle side
// by side on the appliance, most of them holding under a megabyte, so that
// minimum, not what they hold, sets most of their resident heap.
//
// Follow replaces the minimum with a soft memory limit that follows the live
// heap: after every collection, while GOGC's goal is its minimum, it sets
// the limit to what the process maps besides its heap (stacks, the
// runtime's metadata) plus the live heap and Headroom, so a service that
// holds little collects when it has left Headroom of garbage instead of
// 2 MB. A service that holds more (a hub's thousand tunnels) has no limit:
// GOGC alone times its collections, as without Follow. The limit is set
// again at every collection, so it never holds a busy service to less
// than it needs for longer than one.
package gomem

import (
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"syscall"
)

// Headroom is the least garbage a service following the live heap may
// leave before a collection: at idle a service allocates a few KB a
// second (its timers, its status polls), so a collection every few
// hundred KB is rare, and a commit's burst raises the limit as the live
// heap grows.
//
// It was 512 KiB. At 256 the qemu appliance's idle PSS sum was 25 484 and
// 25 542 KiB against 26 120 and 26 221 at 512 (two boots each, in turns,
// December 2026; the services' free heap 0-152 KiB against 0-288), and
// configd run as a process, 40 rounds of set + commit + read-back, took
// the same CPU within the noise: 0.26-0.30 s against 0.28-0.34 s in 50
// tunnels, 0.18-0.22 against 0.19-0.25 in 10 (three runs each, one CPU);
// in 1000 tunnels the live heap is past GOGC's minimum and no limit is set.
const Headroom = 256 << 10

// heapMinimum is the least heap goal Go's collector sets, 4 MB scaled by
// GOGC (the runtime's defaultHeapMinimum).
func heapMinimum(gogc int) uint64 { return 4 << 20 * uint64(gogc) / 100 }

// Limit is the soft memory limit for a process whose memory besides its
// heap is overhead bytes and whose live heap is live bytes, with the
// collector at gogc percent. While GOGC's own goal is its minimum (the
// live heap and its GOGC percent come to less than heapMinimum), the
// limit is overhead + live + headroom; once they come to more, GOGC
// alone times the collections and the limit is max (0: none). A limit at
// GOGC's own goal would also have the scavenger give back, and the
// process fault in again, every burst's pages: configd committing in a
// head office's 1000 tunnels took twice the CPU so.
func Limit(overhead, live uint64, gogc int, headroom, max int64) int64 {
	if live+live*uint64(gogc)/100 >= heapMinimum(gogc) {
		if max > 0 {
			return max
		}
		return math.MaxInt64
	}
	limit := overhead + live + uint64(headroom)
	if limit > math.MaxInt64 {
		limit = math.MaxInt64
	}
	if max > 0 && int64(limit) > max {
		return max
	}
	return int64(limit)
}

// Usage is the Go runtime's own view of a process's memory, in bytes.
type Usage struct {
	Live     uint64 // the heap marked live at the last collection
	Objects  uint64 // heap objects, live or not yet swept
	Free     uint64 // heap pages free and still resident
	Released uint64 // heap pages given back to the kernel
	Unused   uint64 // the unused parts of heap spans
	Stacks   uint64 // goroutine stacks (and the OS threads')
	Metadata uint64 // the runtime's metadata: spans, GC bitmaps, mcaches, ...
	Other    uint64 // everything else the runtime maps (profiling, buffers)
	Total    uint64 // all the runtime maps, released pages included

	Goroutines uint64 // how many goroutines exist, each with its stack
}

// Overhead is what the process maps besides its heap's objects and free
// pages, which a memory limit counts.
func (u Usage) Overhead() uint64 { return u.Total - u.Released - u.Objects - u.Free }

func (u Usage) String() string {
	kib := func(n uint64) uint64 { return (n + 512) >> 10 }
	limit := "none"
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		limit = fmt.Sprintf("%d KiB", kib(uint64(l)))
	}
	return fmt.Sprintf("heap live %d KiB, objects %d KiB, free %d KiB, released %d KiB, span waste %d KiB, stacks %d KiB (%d goroutines), metadata %d KiB, other %d KiB; limit %s",
		kib(u.Live), kib(u.Objects), kib(u.Free), kib(u.Released), kib(u.Unused), kib(u.Stacks), u.Goroutines, kib(u.Metadata), kib(u.Other), limit)
}

// Read returns the runtime's view of this process's memory.
func Read() Usage {
	names := []string{
		"/gc/heap/live:bytes",
		"/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/free:bytes",
		"/memory/classes/heap/released:bytes",
		"/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/stacks:bytes",
		"/memory/classes/os-stacks:bytes",
		"/memory/classes/metadata/mcache/free:bytes",
		"/memory/classes/metadata/mcache/inuse:bytes",
		"/memory/classes/metadata/mspan/free:bytes",
		"/memory/classes/metadata/mspan/inuse:bytes",
		"/memory/classes/metadata/other:bytes",
		"/memory/classes/profiling/buckets:bytes",
		"/memory/classes/other:bytes",
		"/memory/classes/total:bytes",
		"/sched/goroutines:goroutines",
	}
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return Usage{
		Live: v(0), Objects: v(1), Free: v(2), Released: v(3), Unused: v(4),
		Stacks:   v(5) + v(6),
		Metadata: v(7) + v(8) + v(9) + v(10) + v(11),
		Other:    v(12) + v(13),
		Total:    v(14),

		Goroutines: v(15),
	}
}

// follower re-sets the limit after every collection.
type follower struct {
	gogc    int
	max     int64
	stopped atomic.Bool
}

// sentinel is garbage made to be collected: its cleanup tells the
// follower that a collection ran. It has a pointer so that it is not in
// a tiny-allocator block, whose cleanups wait for the whole block.
type sentinel struct {
	_ *int
	_ [8]byte
}

func (f *follower) arm() {
	runtime.AddCleanup(&sentinel{}, func(f *follower) {
		if f.stopped.Load() {
			return
		}
		f.adjust()
		f.arm()
	}, f)
}

func (f *follower) adjust() {
	u := Read()
	debug.SetMemoryLimit(Limit(u.Overhead(), u.Live, f.gogc, Headroom, f.max))
}

// Follow makes the memory limit follow the live heap (see the package
// comment), never above max bytes (0: no cap). It does nothing when the
// environment sets GOMEMLIMIT, or with the collector off; it says which
// through the returned note, for the service's log. stop ends the
// following (the limit stays where it is); services never call it.
func Follow(max int64) (note string, stop func()) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return "memory limit from GOMEMLIMIT", func() {}
	}
	gogc := debug.SetGCPercent(-1)
	debug.SetGCPercent(gogc)
	if gogc < 0 {
		return "collector off (GOGC=off): no memory limit", func() {}
	}
	// The first limit is set after the first collection, which GOGC
	// times: a limit set before it, with nothing yet known live, would
	// have the start-up (a web UI's templates, configd's database)
	// collect every 512 KiB, and a small service that never reaches
	// GOGC's minimum pays for no collection until Go's forced one.
	f := &follower{gogc: gogc, max: max}
	f.arm()
	return fmt.Sprintf("GOGC %d, memory limit following the live heap (at least %d KiB of headroom)", gogc, Headroom>>10),
		func() { f.stopped.Store(true) }
}

// ReportOnSignal logs the runtime's view of the process's memory (Read)
// whenever the process gets SIGUSR1: `kill -SIGUSR1 PID`, then the
// service's log.
func ReportOnSignal(logf func(string, ...any)) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR1)
	go func() {
		for range c {
			logf("memory: %v", Read())
		}
	}()
}
