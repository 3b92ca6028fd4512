package iked

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerSockets are the configured peers' connected sockets on the IKE port
// (udpTransport.SetPeers), all read by one goroutine (run).
//
// Each peer keeps a socket of its own, so that the kernel queues its
// datagrams apart from a flood's on the wildcard socket; that is the flood
// defence. Reading them did not need a goroutine each: a hub had a reader
// per configured peer, 1000 goroutines whose stacks (2.5 MiB) the
// collector counts with the live heap when it sets how much garbage may
// pile up before the next collection, and which grew while the peers'
// setups ran. Here an epoll instance holds every peer's socket, and the
// one reader waits on it through Go's poller (an epoll descriptor is
// readable while one of its sockets is), then takes what each ready socket
// holds.
type peerSockets struct {
	ep *os.File // the epoll instance, non-blocking, in Go's poller

	mu   sync.Mutex
	byFD map[int32]syscall.RawConn // the sockets in ep, by descriptor
}

func newPeerSockets() (*peerSockets, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll for the peers' IKE sockets: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("epoll for the peers' IKE sockets: %w", err)
	}
	return &peerSockets{ep: os.NewFile(uintptr(fd), "peers-epoll"), byFD: map[int32]syscall.RawConn{}}, nil
}

// add has the reader read c.
func (p *peerSockets) add(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	epc, err := p.ep.SyscallConn()
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cerr = epc.Control(func(ep uintptr) {
			// Level-triggered: a socket that still holds datagrams after
			// one read is reported again, after the other ready ones.
			ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
			if err := unix.EpollCtl(int(ep), unix.EPOLL_CTL_ADD, int(fd), &ev); err != nil {
				cerr = fmt.Errorf("epoll add: %w", err)
				return
			}
			p.byFD[int32(fd)] = rc
		})
	}); err != nil {
		return err
	}
	return cerr
}

// remove stops reading c, before the caller closes it (its descriptor may
// be a new socket's next).
func (p *peerSockets) remove(c *net.UDPConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	epc, err := p.ep.SyscallConn()
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rc.Control(func(fd uintptr) {
		epc.Control(func(ep uintptr) { unix.EpollCtl(int(ep), unix.EPOLL_CTL_DEL, int(fd), nil) })
		delete(p.byFD, int32(fd))
	})
}

// close ends run.
func (p *peerSockets) close() error { return p.ep.Close() }

// peerEvents is how many ready sockets one wait reports.
const peerEvents = 64

// peerReader is run's state: its wait and read functions are bound once,
// so that the loop allocates nothing per datagram but the copy deliver
// makes.
type peerReader struct {
	events []unix.EpollEvent
	ready  int
	batch  *datagramBatch
	n      int
	rerr   unix.Errno
}

// wait takes the ready sockets from the epoll instance without blocking;
// false (none) has Go's poller wait until it is readable again.
func (r *peerReader) wait(ep uintptr) bool {
	n, err := unix.EpollWait(int(ep), r.events, 0)
	if err == unix.EINTR {
		r.ready = 0
		return true // look again
	}
	r.ready = max(n, 0)
	return n > 0
}

// recv takes what one socket holds, up to the batch, without blocking.
func (r *peerReader) recv(fd uintptr) bool {
	r.n, r.rerr = r.batch.recv(fd)
	return true // never wait on the socket itself: epoll says when
}

// run delivers what the sockets receive to handle until close, each
// socket's datagrams in the order they came (one reader takes them). A
// socket whose peer floods it is read a batch at a time, as the other
// ready ones are: epoll reports a level-triggered socket again after the
// others ready then. handle copies what it keeps.
func (p *peerSockets) run(port uint16, handle func(pkt []byte, local, remote netip.AddrPort)) {
	r := &peerReader{events: make([]unix.EpollEvent, peerEvents), batch: newReaderBatch(ikeBatch, maxIKEDatagram)}
	defer r.batch.free() // after the last datagram's handling
	epc, err := p.ep.SyscallConn()
	if err != nil {
		return
	}
	wait, recv := r.wait, r.recv
	for {
		if err := epc.Read(wait); err != nil {
			return // closed
		}
		for _, ev := range r.events[:r.ready] {
			p.mu.Lock()
			rc := p.byFD[ev.Fd]
			p.mu.Unlock()
			if rc == nil {
				continue // removed since
			}
			r.n, r.rerr = 0, 0
			if err := rc.Read(recv); err != nil {
				continue // closed since
			}
			// An error (a connected socket reports an ICMP error that
			// way) is taken by the call that returns it: the next one
			// reads on.
			for i := 0; r.rerr == 0 && i < r.n; i++ {
				pkt, local, remote, _ := r.batch.datagram(i, port)
				if remote.IsValid() {
					handle(pkt, local, remote)
				}
			}
		}
	}
}
