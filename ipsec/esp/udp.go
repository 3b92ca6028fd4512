package esp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"github.com/flashgate/flashgate/internal/mmsg"
	"golang.org/x/sys/unix"
)

// udpSocket is one ESP-in-UDP socket (RFC 3948) bound to the NAT-T port,
// shared with IKE: a payload starting with four zero bytes (the non-ESP
// marker, where an SPI of 0 would be) is IKE, a single 0xff byte is a
// NAT keepalive, anything else is ESP. Several sockets may share the port
// (SO_REUSEPORT); the kernel spreads peers across them by address hash.
//
// Packets move in batches: recvmmsg with UDP_GRO (the kernel merges a
// peer's same-sized datagrams into one buffer) and sendmmsg with
// UDP_SEGMENT (one buffer of same-sized ESP packets, cut by the kernel).
type udpSocket struct {
	f      *os.File
	raw    syscall.RawConn
	gso    bool // UDP_SEGMENT works
	rawESP bool // an IP protocol 50 socket: datagrams start with the IPv4 header

	// receive side
	rmsgs    []unix.Mmsghdr
	riov     []unix.Iovec
	rbufs    [][]byte
	rbufSize int
	rnames   []unix.RawSockaddrInet4
	rctl     [][]byte
	rn       int
	rerr     error
	recvFn   func(fd uintptr) bool

	// send side
	smsgs  []unix.Mmsghdr
	siov   []unix.Iovec
	snames []unix.RawSockaddrInet4
	sctl   [][]byte
	sn     int // messages queued
	sdone  int
	serr   error
	sendFn func(fd uintptr) bool
}

const (
	udpBatch   = 16    // messages per recvmmsg / sendmmsg
	udpBufSize = 65536 // one GRO super-datagram
	rawBatch   = 64
	rawBufSize = 9216 // IPv4 header + a jumbo-frame ESP packet
	gsoMaxSegs = 64   // UDP_MAX_SEGMENTS on older kernels
)

var cmsgSpace = unix.CmsgSpace(4)

func listenUDP(addr netip.AddrPort) (*udpSocket, error) {
	if !addr.Addr().Is4() {
		return nil, fmt.Errorf("ESP-in-UDP on %v: only IPv4 outer addresses are implemented", addr)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, fmt.Errorf("UDP socket: %w", err)
	}
	fail := func(what string, err error) (*udpSocket, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("UDP %v: %s: %w", addr, what, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return fail("SO_REUSEPORT", err)
	}
	for _, opt := range []int{unix.SO_RCVBUFFORCE, unix.SO_SNDBUFFORCE} {
		// Root may exceed rmem_max; a TSO burst is 64 KiB per flow.
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, 8<<20)
	}
	s := &udpSocket{}
	s.gso = unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
	sa := &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	if err := s.init(fd, fmt.Sprintf("udp:%v", addr)); err != nil {
		return nil, err
	}
	return s, nil
}

// listenRawESP opens a raw IP protocol 50 socket for peers that send ESP
// without UDP encapsulation (no NAT on the path). Every raw socket gets its
// own copy of every ESP packet, so a Device opens one and gives the other
// workers duplicates of its descriptor (dupRaw) to send from.
func listenRawESP(addr netip.Addr) (*udpSocket, error) {
	if !addr.Is4() {
		return nil, fmt.Errorf("raw ESP on %v: only IPv4 outer addresses are implemented", addr)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_ESP)
	if err != nil {
		return nil, fmt.Errorf("raw ESP socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: addr.As4()}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("raw ESP %v: bind: %w", addr, err)
	}
	s := &udpSocket{rawESP: true}
	if err := s.init(fd, fmt.Sprintf("esp:%v", addr)); err != nil {
		return nil, err
	}
	return s, nil
}

// dupRaw returns another handle on the same raw socket with its own
// batch buffers, for a second worker to send from.
func (s *udpSocket) dupRaw() (*udpSocket, error) { return s.dup() }

// dup returns another handle on the same socket with its own batch
// buffers, for a worker that only sends (a route tunnel's TX workers share
// the NAT-T sockets' port without taking a share of what they receive).
func (s *udpSocket) dup() (*udpSocket, error) {
	var fd int
	var err error
	cerr := s.raw.Control(func(f uintptr) { fd, err = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) })
	if err = errors.Join(cerr, err); err != nil {
		return nil, fmt.Errorf("%s: dup: %w", s.f.Name(), err)
	}
	d := &udpSocket{rawESP: s.rawESP, gso: s.gso}
	if err := d.init(fd, s.f.Name()); err != nil {
		return nil, err
	}
	return d, nil
}

func (s *udpSocket) init(fd int, name string) error {
	s.f = os.NewFile(uintptr(fd), name)
	var err error
	if s.raw, err = s.f.SyscallConn(); err != nil {
		s.f.Close()
		return err
	}
	// Raw ESP has no GSO or GRO: one packet per message, so more
	// messages per system call and smaller buffers (jumbo frames fit).
	batch, bufSize := udpBatch, udpBufSize
	if s.rawESP {
		batch, bufSize = rawBatch, rawBufSize
	}
	s.rmsgs = make([]unix.Mmsghdr, batch)
	s.riov = make([]unix.Iovec, batch)
	s.rnames = make([]unix.RawSockaddrInet4, batch)
	s.smsgs = make([]unix.Mmsghdr, batch)
	s.siov = make([]unix.Iovec, batch)
	s.snames = make([]unix.RawSockaddrInet4, batch)
	s.rbufSize = bufSize
	for i := 0; i < batch; i++ {
		s.rctl = append(s.rctl, make([]byte, cmsgSpace))
		s.sctl = append(s.sctl, make([]byte, cmsgSpace))
	}
	s.recvFn = s.recvmmsg
	s.sendFn = s.sendmmsg
	return nil
}

// recv fills the receive buffers and returns how many messages arrived.
// Use datagram(i) to walk them.
func (s *udpSocket) recv() (int, error) {
	if s.rbufs == nil {
		// Allocated on first use: handles that only send (the raw ESP
		// duplicates) never need the megabyte.
		for range s.rmsgs {
			s.rbufs = append(s.rbufs, make([]byte, s.rbufSize))
		}
	}
	for i := range s.rmsgs {
		s.riov[i].Base = &s.rbufs[i][0]
		s.riov[i].SetLen(len(s.rbufs[i]))
		h := &s.rmsgs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&s.rnames[i]))
		h.Namelen = unix.SizeofSockaddrInet4
		h.Iov = &s.riov[i]
		h.Iovlen = 1
		h.Control = &s.rctl[i][0]
		h.SetControllen(cmsgSpace)
		h.Flags = 0
	}
	s.rn, s.rerr = 0, nil
	if err := s.raw.Read(s.recvFn); err != nil {
		return 0, err
	}
	return s.rn, s.rerr
}

func (s *udpSocket) recvmmsg(fd uintptr) bool {
	n, e := mmsg.Recv(fd, s.rmsgs, unix.MSG_DONTWAIT)
	if e == unix.EAGAIN {
		return false
	}
	if e != 0 {
		s.rerr = fmt.Errorf("recvmmsg: %w", e)
		return true
	}
	s.rn = n
	return true
}

// message returns the i-th received message: its bytes, the size of each
// datagram in it (UDP GRO), and the sender. A message the kernel had to
// cut because it did not fit the buffer comes back empty: it could only
// fail authentication.
func (s *udpSocket) message(i int) (data []byte, segSize int, from netip.AddrPort, truncated bool) {
	m := &s.rmsgs[i]
	if m.Hdr.Flags&unix.MSG_TRUNC != 0 {
		return nil, 1, netip.AddrPort{}, true
	}
	data = s.rbufs[i][:m.Len]
	segSize = len(data)
	// The kernel reports the segment size as an int.
	if gro := mmsg.ControlData(s.rctl[i][:m.Hdr.Controllen], unix.IPPROTO_UDP, unix.UDP_GRO); len(gro) >= 4 {
		if v := int(*(*int32)(unsafe.Pointer(&gro[0]))); v > 0 {
			segSize = v
		}
	}
	n := &s.rnames[i]
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&n.Port))[:])
	if s.rawESP {
		// IPv4 raw sockets deliver the IP header; options included.
		hl := 0
		if len(data) > 0 {
			hl = int(data[0]&0xf) * 4
		}
		if hl < 20 || hl > len(data) {
			hl = len(data)
		}
		data = data[hl:]
		segSize, port = max(len(data), 1), 0
	}
	return data, segSize, netip.AddrPortFrom(netip.AddrFrom4(n.Addr), port), false
}

// queue adds one message to the send batch: data holds one packet, or
// several of segSize bytes each (the last may be shorter) for UDP GSO.
// It reports false when the batch is full and must be flushed first.
func (s *udpSocket) queue(data []byte, segSize int, to netip.AddrPort) bool {
	if s.sn == len(s.smsgs) {
		return false
	}
	i := s.sn
	s.sn++
	n := &s.snames[i]
	n.Family = unix.AF_INET
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&n.Port))[:], to.Port())
	n.Addr = to.Addr().As4()
	s.siov[i].Base = &data[0]
	s.siov[i].SetLen(len(data))
	h := &s.smsgs[i].Hdr
	h.Name = (*byte)(unsafe.Pointer(n))
	h.Namelen = unix.SizeofSockaddrInet4
	h.Iov = &s.siov[i]
	h.Iovlen = 1
	h.Control, h.Controllen = nil, 0
	if segSize < len(data) {
		ctl := s.sctl[i]
		c := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
		c.Level, c.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
		c.SetLen(unix.CmsgLen(2))
		*(*uint16)(unsafe.Pointer(&ctl[unix.CmsgLen(0)])) = uint16(segSize)
		h.Control = &ctl[0]
		h.SetControllen(unix.CmsgSpace(2))
	}
	return true
}

// flush sends the queued messages.
func (s *udpSocket) flush() error {
	defer func() { s.sn = 0 }()
	s.sdone = 0
	for s.sdone < s.sn {
		s.serr = nil
		if err := s.raw.Write(s.sendFn); err != nil {
			return err
		}
		if s.serr != nil {
			// One bad message (an unreachable peer) must not stall the
			// rest of the batch: skip it and go on.
			err := s.serr
			s.sdone++
			if s.sdone >= s.sn {
				return err
			}
		}
	}
	return nil
}

func (s *udpSocket) sendmmsg(fd uintptr) bool {
	msgs := s.smsgs[s.sdone:s.sn]
	n, e := mmsg.Send(fd, msgs, unix.MSG_DONTWAIT)
	if e == unix.EAGAIN {
		return false
	}
	if e != 0 {
		if e == unix.EIO && msgs[0].Hdr.Controllen != 0 {
			// The route's device cannot segment UDP (no checksum
			// offload): send one packet per message from now on.
			s.gso = false
		}
		s.serr = fmt.Errorf("sendmmsg: %w", e)
		return true
	}
	s.sdone += n
	return true
}

// sendTo sends one datagram, for IKE and other slow-path traffic.
func (s *udpSocket) sendTo(b []byte, to netip.AddrPort) error {
	var err error
	cerr := s.raw.Write(func(fd uintptr) bool {
		err = unix.Sendto(int(fd), b, unix.MSG_DONTWAIT, &unix.SockaddrInet4{Port: int(to.Port()), Addr: to.Addr().As4()})
		return !errors.Is(err, unix.EAGAIN)
	})
	if cerr != nil {
		return cerr
	}
	return err
}

func (s *udpSocket) close() error { return s.f.Close() }
