package iked

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

	"github.com/flashgate/flashgate/internal/mmsg"
	"github.com/flashgate/flashgate/internal/offheap"
	"golang.org/x/sys/unix"
)

// ikeBatch is how many datagrams a reader of the IKE port's and the NAT-T
// port's wildcard sockets takes from the kernel per system call
// (recvmmsg). A spoofed flood arrives at the attacker's full speed, and
// one datagram per call left most of it to be dropped by the kernel,
// legitimate datagrams with it.
const ikeBatch = 16

// pktinfoSpace is each message's control buffer: IP_PKTINFO, our address
// the datagram came to, with room to spare.
const pktinfoSpace = 64

// datagramBatch is the memory of one recvmmsg: per message a header, an
// iovec, the sender's address, a control buffer and a datagram buffer of
// bufSize bytes, all allocated once. recvmmsg fills the messages in the
// order the kernel queued them, so a sender's datagrams stay in order.
type datagramBatch struct {
	msgs    []unix.Mmsghdr
	iovs    []unix.Iovec
	names   []unix.RawSockaddrInet4
	ctl     []byte // pktinfoSpace per message
	bufs    []byte // bufSize per message
	bufSize int
	mem     *offheap.Buffer // bufs, when off the Go heap (newReaderBatch)
}

// newReaderBatch is the batch of a wildcard socket's reader, which holds
// it for its life: its datagram buffers (1 MB) are off the Go heap
// (internal/offheap), where as live heap they let as much again of
// garbage pile up before a collection. The reader frees it when it stops.
func newReaderBatch(n, bufSize int) *datagramBatch {
	b := newDatagramBatch(n, 0)
	b.mem = offheap.New(n * bufSize)
	b.bufs, b.bufSize = b.mem.B, bufSize
	return b
}

// free returns the memory of a batch from newReaderBatch; nothing may
// use it after.
func (b *datagramBatch) free() {
	if b.mem != nil {
		b.mem.Free()
		b.mem, b.bufs = nil, nil
	}
}

func newDatagramBatch(n, bufSize int) *datagramBatch {
	return &datagramBatch{
		msgs:    make([]unix.Mmsghdr, n),
		iovs:    make([]unix.Iovec, n),
		names:   make([]unix.RawSockaddrInet4, n),
		ctl:     make([]byte, n*pktinfoSpace),
		bufs:    make([]byte, n*bufSize),
		bufSize: bufSize,
	}
}

// recv takes what the socket has queued, up to the batch, without waiting:
// recvmmsg's count, or its error (EAGAIN: nothing queued).
func (b *datagramBatch) recv(fd uintptr) (int, unix.Errno) {
	// recvmmsg wrote the lengths of the last call's messages into their
	// headers: set each one up again.
	for i := range b.msgs {
		b.iovs[i].Base = &b.bufs[i*b.bufSize]
		b.iovs[i].SetLen(b.bufSize)
		h := &b.msgs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Namelen = unix.SizeofSockaddrInet4
		h.Iov = &b.iovs[i]
		h.Iovlen = 1
		h.Control = &b.ctl[i*pktinfoSpace]
		h.SetControllen(pktinfoSpace)
		h.Flags = 0
		b.msgs[i].Len = 0
	}
	return mmsg.Recv(fd, b.msgs, unix.MSG_DONTWAIT)
}

// datagram returns the i-th message of the last recv: its bytes (what fit
// the buffer when truncated, which then fails to decode and is counted as
// a bad message), the sender (invalid unless IPv4), and our address it
// came to, on port (invalid when the socket did not say).
func (b *datagramBatch) datagram(i int, port uint16) (pkt []byte, local, remote netip.AddrPort, truncated bool) {
	m := &b.msgs[i]
	pkt = b.bufs[i*b.bufSize : i*b.bufSize+min(int(m.Len), b.bufSize)]
	truncated = m.Hdr.Flags&unix.MSG_TRUNC != 0
	if n := &b.names[i]; m.Hdr.Namelen >= unix.SizeofSockaddrInet4 && n.Family == unix.AF_INET {
		p := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&n.Port))[:])
		remote = netip.AddrPortFrom(netip.AddrFrom4(n.Addr), p)
	}
	ctl := b.ctl[i*pktinfoSpace : i*pktinfoSpace+min(int(m.Hdr.Controllen), pktinfoSpace)]
	// struct in_pktinfo: ifindex, spec_dst, addr (the header's destination).
	if pi := mmsg.ControlData(ctl, unix.IPPROTO_IP, unix.IP_PKTINFO); len(pi) >= unix.SizeofInet4Pktinfo {
		local = netip.AddrPortFrom(netip.AddrFrom4([4]byte(pi[8:12])), port)
	}
	return pkt, local, remote, truncated
}
