package offheap

import (
	"runtime"
	"testing"
)

// TestBufferOffHeap: a buffer is zeroed, writable to its end, and not
// counted in the Go heap (which is the point); Free leaves it empty.
func TestBufferOffHeap(t *testing.T) {
	const n = 4<<20 + 123
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b := New(n)
	runtime.ReadMemStats(&after)
	if len(b.B) != n || cap(b.B) != n {
		t.Fatalf("buffer of %d bytes, cap %d, want %d", len(b.B), cap(b.B), n)
	}
	if !b.mapped {
		t.Fatal("the kernel did not map the buffer")
	}
	if grew := after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc); grew > 1<<20 {
		t.Errorf("the Go heap grew by %d bytes for a mapped buffer of %d", grew, n)
	}
	for i := range b.B {
		if b.B[i] != 0 {
			t.Fatalf("byte %d is %d, want a zeroed buffer", i, b.B[i])
		}
	}
	b.B[0], b.B[n-1] = 1, 2
	b.Free()
	if b.B != nil {
		t.Error("B is still set after Free")
	}
	b.Free() // twice is harmless
}
