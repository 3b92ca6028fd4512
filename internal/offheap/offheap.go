// Package offheap gives a goroutine's large, long-lived, pointer-free
// buffers (the batches a socket or TUN reader fills) memory outside the Go
// heap, mapped anonymously from the kernel.
//
// The collector lets the heap grow by GOGC percent of what is live before
// it collects. Megabytes of read buffers held for a process's life count
// as live, so they raised how much garbage could pile up before a
// collection, though they are never garbage themselves. Mapped apart, they
// cost only the pages the reads touch, as they did in the heap.
//
// A buffer must hold no Go pointers, must not be used after Free, and no
// slice of it may be kept beyond its owner's use: the owner frees it when
// it stops (typically deferred in the goroutine that reads into it).
package offheap

import "golang.org/x/sys/unix"

// Buffer is n bytes, off the Go heap when the kernel maps them, else on it.
type Buffer struct {
	B      []byte
	mapped bool
}

// New returns a zeroed buffer of n bytes (n > 0).
func New(n int) *Buffer {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return &Buffer{B: make([]byte, n)}
	}
	return &Buffer{B: b[:n:n], mapped: true}
}

// Free returns the buffer's memory; nothing may use B after it.
func (b *Buffer) Free() {
	if b.mapped {
		unix.Munmap(b.B[:cap(b.B)])
	}
	b.B, b.mapped = nil, false
}
