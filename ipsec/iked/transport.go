package iked

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/flashgate/flashgate/ipsec/esp"
	"github.com/flashgate/flashgate/ipsec/ike"
	"github.com/flashgate/flashgate/ipsec/xfrm"
	"github.com/vishvananda/netlink"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// Transport carries the engine's IKE datagrams: the daemon's view of the
// network. On the appliance it is the UDP sockets of the IKE and NAT-T
// ports (OpenTransport); tests use ikedtest's in-memory one.
type Transport interface {
	// Run starts delivering what arrives to handle, a sender's datagrams
	// in the order they came; handle may be called on several
	// goroutines at once. local is our address and port the datagram
	// came to; it is invalid when the transport cannot tell (the
	// userspace data plane's NAT-T port), and the daemon works it out.
	// Datagrams to the NAT-T port are handed on without the non-ESP
	// marker; ESP and keepalives never reach handle.
	Run(handle func(pkt []byte, local, remote netip.AddrPort))
	// Send is the engine's Send hook (ike.EndpointConfig.Send).
	Send(pkt []byte, local, remote netip.AddrPort) error
	// SetPeers names the configured peers, whose IKE the transport may
	// keep apart from everyone else's (a flood does not drown it).
	SetPeers(peers []netip.AddrPort) error
	// SourceFor is our address towards dst, for tunnels without a
	// configured local address.
	SourceFor(dst netip.Addr) (netip.Addr, error)
	// Drops counts the datagrams the transport dropped, for the API's
	// stats: sends the kernel would not take at once (send buffer full),
	// received ones whose sender's worker was behind (a flood), and IKE
	// from the userspace data plane's NAT-T port whose workers were behind.
	Drops() (send, queue, natIKE uint64)
	Close() error
}

// maxIKEDatagram bounds what is read from the IKE sockets; larger datagrams
// are truncated by the kernel and then fail to decode (and are counted).
const maxIKEDatagram = 65535

// udpTransport owns the IKE sockets: UDP 500 always, and UDP 4500 either
// itself (kernel data plane: the socket carries the UDP_ENCAP option so the
// kernel takes ESP from it) or through the userspace ESP device, which owns
// 4500 for ESP and hands IKE up.
type udpTransport struct {
	ikePort, nattPort uint16
	udp500            *net.UDPConn
	udp4500           *net.UDPConn // nil when dev owns 4500
	dev               *esp.Device
	closers           []func() error
	wg                sync.WaitGroup
	sendDrops         atomic.Uint64 // datagrams the kernel would not take at once
	workers           *ikeWorkers   // set by run
	peerWorkers       *ikeWorkers   // the configured peers' sockets' (set by run)
	queueDrops        atomic.Uint64 // datagrams dropped because their worker was behind

	// Each configured peer's address has a socket of its own on the IKE
	// port, connected to it (see SetPeers), in peerSocks, whose one reader
	// Run starts.
	mu        sync.Mutex
	peers     map[netip.AddrPort]*net.UDPConn
	peerSocks *peerSockets
	closed    bool
	// netns is the network namespace the IKE port was opened in: the
	// peers' sockets must be opened there too, whichever thread asks.
	netns int

	routes      routes      // source addresses, in the namespace we were opened in
	natWorkers  *ikeWorkers // IKE from the userspace device's NAT-T port
	natIKEDrops atomic.Uint64
}

// socketBuffer is the receive buffer of the IKE sockets: a burst of
// IKE_SA_INIT (a flood, or many peers after a restart) waits there for the
// reader instead of being dropped by the kernel.
const socketBuffer = 1 << 20

// reuseAddr lets the IKE port's wildcard socket and the peers' connected
// sockets share the port (SO_REUSEADDR on each).
func reuseAddr(_, _ string, rc syscall.RawConn) error {
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1) }); err != nil {
		return err
	}
	return serr
}

func listenUDP(addr netip.AddrPort, shared bool) (*net.UDPConn, error) {
	lc := net.ListenConfig{}
	if shared {
		lc.Control = reuseAddr
	}
	pconn, err := lc.ListenPacket(context.Background(), "udp4", net.UDPAddrFromAddrPort(addr).String())
	if err != nil {
		return nil, fmt.Errorf("listen on UDP %v: %w", addr, err)
	}
	c := pconn.(*net.UDPConn)
	// Best effort: the kernel caps it at net.core.rmem_max.
	c.SetReadBuffer(socketBuffer)
	pc := ipv4.NewPacketConn(c)
	// The destination address of each datagram is our local address for the
	// IKE SA: we may have several, and the socket is bound to all.
	if err := pc.SetControlMessage(ipv4.FlagDst, true); err != nil {
		c.Close()
		return nil, fmt.Errorf("UDP %v: IP_PKTINFO: %w", addr, err)
	}
	return c, nil
}

// OpenTransport opens the IKE sockets in the caller's network namespace:
// UDP ikePort, and UDP nattPort unless dp is the userspace ESP device,
// which owns that port (its IKE is handed up through the device). With
// the kernel data plane the NAT-T socket takes the kernel's ESP-in-UDP
// option.
func OpenTransport(ikePort, nattPort uint16, dp DataPlane) (Transport, error) {
	var dev *esp.Device
	if u, ok := dp.(*userspacePlane); ok {
		dev = u.Device
	}
	_, kernel := dp.(*kernelPlane)
	return newTransport(ikePort, nattPort, dev, kernel)
}

func newTransport(ikePort, nattPort uint16, dev *esp.Device, encapSocket bool) (*udpTransport, error) {
	t := &udpTransport{ikePort: ikePort, nattPort: nattPort, dev: dev, peers: map[netip.AddrPort]*net.UDPConn{}, netns: -1}
	nl, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	t.routes = routes{nl}
	t.closers = append(t.closers, func() error { nl.Close(); return nil })
	ps, err := newPeerSockets()
	if err != nil {
		t.Close()
		return nil, err
	}
	t.peerSocks = ps
	t.closers = append(t.closers, ps.close)
	// The caller's thread is in the namespace the sockets open in.
	runtime.LockOSThread()
	ns, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	runtime.UnlockOSThread()
	if err == nil {
		t.netns = ns
		t.closers = append(t.closers, func() error { return unix.Close(ns) })
	}
	c, err := listenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), ikePort), true)
	if err != nil {
		t.Close()
		return nil, err
	}
	t.udp500 = c
	t.closers = append(t.closers, c.Close)
	if dev == nil {
		c, err := listenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), nattPort), false)
		if err != nil {
			t.Close()
			return nil, err
		}
		if encapSocket {
			if err := xfrm.SetESPInUDP(c); err != nil {
				c.Close()
				t.Close()
				return nil, err
			}
		}
		t.udp4500 = c
		t.closers = append(t.closers, c.Close)
	}
	return t, nil
}

// Run delivers received IKE messages to handle until the sockets close.
func (t *udpTransport) Run(handle func(pkt []byte, local, remote netip.AddrPort)) {
	// One reader per socket hands each datagram to a worker chosen by the
	// sender's address, and the workers call handle: handle does the
	// Diffie-Hellman of an IKE_SA_INIT, and with the reader doing it a
	// flood kept one core busy while the kernel dropped the rest,
	// legitimate datagrams with it. One sender's datagrams stay in the
	// order they came: when both ends start an exchange at once (a
	// simultaneous rekey), the peer's request and its answer to ours
	// arrive back to back, and handling the answer first hides the
	// collision (RFC 7296 2.8.1), leaving a redundant SA at both ends.
	w := newIKEWorkers(ikeReaders(), handle, &t.queueDrops)
	t.mu.Lock()
	t.workers = w
	t.mu.Unlock()
	t.wg.Add(1)
	go t.read(t.udp500, t.ikePort, false, newReaderBatch(ikeBatch, maxIKEDatagram), w.deliver)
	if t.udp4500 != nil {
		t.wg.Add(1)
		go t.read(t.udp4500, t.nattPort, true, newReaderBatch(ikeBatch, maxIKEDatagram), w.deliver)
	}
	// The configured peers' sockets have workers of their own: the
	// wildcard sockets' readers take a flood in batches, faster than the
	// workers answer it, so those workers' queues are full and drop
	// while it lasts; a configured peer's datagrams must not wait there.
	pw := newIKEWorkers(ikeReaders(), handle, &t.queueDrops)
	t.mu.Lock()
	t.peerWorkers = pw
	t.mu.Unlock()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.peerSocks.run(t.ikePort, pw.deliver)
	}()
	if t.dev != nil {
		// IKE on the NAT-T port arrives on an ESP packet worker, which
		// must not block: the workers take it (a sender's messages in
		// order, as above), dropping and counting what does not fit, so
		// a flood of IKE_SA_INIT on 4500 costs the data plane a copy at
		// most, never a DH computation. The device does not know our
		// address: handle gets none, and the daemon finds it.
		nw := newIKEWorkers(ikeReaders(), handle, &t.natIKEDrops)
		t.mu.Lock()
		t.natWorkers = nw
		t.mu.Unlock()
		t.dev.SetIKEHandler(func(pkt []byte, from netip.AddrPort) { nw.deliver(pkt, netip.AddrPort{}, from) })
	}
}

// SourceFor implements Transport.
func (t *udpTransport) SourceFor(dst netip.Addr) (netip.Addr, error) { return t.routes.sourceFor(dst) }

// Drops implements Transport.
func (t *udpTransport) Drops() (send, queue, natIKE uint64) {
	return t.sendDrops.Load(), t.queueDrops.Load(), t.natIKEDrops.Load()
}

// ikeWorkers run handle for received datagrams, each sender's on one
// worker (so in arrival order), senders spread over the workers. The
// transport's readers and the userspace data plane's NAT-T port both
// deliver to them.
type ikeWorkers struct {
	queues []chan ikeDatagram
	drops  *atomic.Uint64
	done   chan struct{}
	wg     sync.WaitGroup
}

type ikeDatagram struct {
	pkt           []byte
	local, remote netip.AddrPort
}

// ikeQueue is each worker's backlog: beyond it a flood's datagrams are
// dropped here (bounded memory) instead of in the kernel.
const ikeQueue = 256

func newIKEWorkers(n int, handle func(pkt []byte, local, remote netip.AddrPort), drops *atomic.Uint64) *ikeWorkers {
	w := &ikeWorkers{drops: drops, done: make(chan struct{})}
	for range n {
		q := make(chan ikeDatagram, ikeQueue)
		w.queues = append(w.queues, q)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for {
				select {
				case <-w.done:
					return
				case d := <-q:
					handle(d.pkt, d.local, d.remote)
				}
			}
		}()
	}
	return w
}

// deliver queues a copy of one datagram on its sender's worker, or drops
// it (counted, and without copying) when that worker is behind. It never
// blocks, so a data plane worker may call it; after stop it queues into
// the void.
func (w *ikeWorkers) deliver(pkt []byte, local, remote netip.AddrPort) {
	q := w.queues[w.index(remote)]
	if len(q) == cap(q) {
		w.drops.Add(1)
		return
	}
	select {
	case q <- ikeDatagram{append([]byte(nil), pkt...), local, remote}:
	default:
		w.drops.Add(1)
	}
}

// stop ends the workers.
func (w *ikeWorkers) stop() {
	close(w.done)
	w.wg.Wait()
}

// index is the worker of a sender: FNV-1a of its address and port, so
// one sender always lands on the same worker.
func (w *ikeWorkers) index(remote netip.AddrPort) int {
	a := remote.Addr().As16()
	h := uint32(2166136261)
	for _, b := range a {
		h = (h ^ uint32(b)) * 16777619
	}
	h = (h ^ uint32(remote.Port()&0xff)) * 16777619
	h = (h ^ uint32(remote.Port()>>8)) * 16777619
	return int(h % uint32(len(w.queues)))
}

// read delivers what one of the wildcard sockets, c, receives to handle
// until c closes, in the order it came, up to a batch (ikeBatch datagrams)
// per system call, so that the reader keeps up with a flood. The batch is
// the reader's own, and it frees it when it stops. The configured peers'
// sockets have one reader for all (peerSockets.run). handle copies what it
// keeps.
func (t *udpTransport) read(c *net.UDPConn, port uint16, natt bool, batch *datagramBatch, handle func(pkt []byte, local, remote netip.AddrPort)) {
	defer t.wg.Done()
	defer batch.free() // after the last datagram's handling: deliver copies what it keeps
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	b := batch
	for {
		var (
			n    int
			rerr unix.Errno
		)
		err := rc.Read(func(fd uintptr) bool {
			n, rerr = b.recv(fd)
			return rerr != unix.EAGAIN // nothing yet: wait for the poller
		})
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		// An error (a connected peer's socket reports an ICMP error that
		// way) is taken by the call that returns it: the next one reads on.
		for i := 0; rerr == 0 && i < n; i++ {
			pkt, local, remote, _ := b.datagram(i, port)
			if !remote.IsValid() {
				continue
			}
			if natt {
				kind, msg := ike.ClassifyNATT(pkt)
				if kind != ike.NATTIKE {
					continue // keepalives; ESP is taken by the kernel before us
				}
				pkt = msg
			}
			handle(pkt, local, remote) // deliver copies what it keeps
		}
	}
}

// SetPeers gives each configured peer's address a socket of its own on
// the IKE port, connected to that address. The kernel delivers a
// datagram to the connected socket that matches its source before the
// wildcard one, so the configured peers' IKE_SA_INIT wait in a queue of
// their own: a flood that overflows the wildcard socket's queue (the
// kernel then drops datagrams, whoever sent them) no longer drops theirs.
// Sockets of addresses no longer configured are closed.
func (t *udpTransport) SetPeers(addrs []netip.AddrPort) error {
	want := map[netip.AddrPort]bool{}
	for _, a := range addrs {
		if a.Addr().Is4() || a.Addr().Is4In6() {
			want[netip.AddrPortFrom(a.Addr().Unmap(), a.Port())] = true
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	for a, c := range t.peers {
		if !want[a] {
			t.peerSocks.remove(c)
			c.Close()
			delete(t.peers, a)
		}
	}
	var errs []error
	for a := range want {
		if t.peers[a] != nil {
			continue
		}
		var conn net.Conn
		err := t.inNetns(func() error {
			d := net.Dialer{LocalAddr: &net.UDPAddr{Port: int(t.ikePort)}, Control: reuseAddr}
			var err error
			conn, err = d.Dial("udp4", a.String())
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("socket for peer %v: %w", a, err))
			continue
		}
		c := conn.(*net.UDPConn)
		c.SetReadBuffer(socketBuffer)
		pc := ipv4.NewPacketConn(c)
		if err := pc.SetControlMessage(ipv4.FlagDst, true); err != nil {
			c.Close()
			errs = append(errs, fmt.Errorf("socket for peer %v: IP_PKTINFO: %w", a, err))
			continue
		}
		if err := t.peerSocks.add(c); err != nil {
			c.Close()
			errs = append(errs, fmt.Errorf("socket for peer %v: %w", a, err))
			continue
		}
		t.peers[a] = c
	}
	return errors.Join(errs...)
}

// inNetns runs fn on a thread in the transport's network namespace (the
// caller may be anywhere: tests apply configurations from outside the
// gateway's namespace).
func (t *udpTransport) inNetns(fn func() error) error {
	if t.netns < 0 {
		return fn()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var here, there unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &here); err != nil {
		return fmt.Errorf("network namespace of this thread: %w", err)
	}
	if err := unix.Fstat(t.netns, &there); err != nil {
		return fmt.Errorf("network namespace of the IKE port: %w", err)
	}
	if here.Ino == there.Ino && here.Dev == there.Dev {
		return fn()
	}
	back, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("network namespace of this thread: %w", err)
	}
	defer unix.Close(back)
	if err := unix.Setns(t.netns, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter the IKE port's network namespace: %w", err)
	}
	ferr := fn()
	if err := unix.Setns(back, unix.CLONE_NEWNET); err != nil {
		// This thread is in the wrong namespace now: do not give it
		// back to the runtime (a locked thread that is not unlocked
		// exits with its goroutine).
		panic("iked: cannot return to the network namespace: " + err.Error())
	}
	return ferr
}

// ikeReaders is how many goroutines read each IKE socket: one per CPU,
// at least two.
func ikeReaders() int { return max(2, runtime.NumCPU()) }

// Send is the engine's Send hook. Datagrams from the NAT-T port already
// carry the non-ESP marker (or are a one-byte keepalive).
func (t *udpTransport) Send(pkt []byte, local, remote netip.AddrPort) error {
	if local.Port() == t.nattPort {
		if t.udp4500 != nil {
			return t.sendNow(t.udp4500, pkt, local.Addr(), remote)
		}
		// The ESP device owns 4500: hand it the message without the
		// marker (it adds it back).
		if len(pkt) == 1 && pkt[0] == 0xff {
			return t.dev.SendKeepalive(remote)
		}
		if len(pkt) < 4 {
			return fmt.Errorf("send to %v: %d-byte datagram on the NAT-T port is neither IKE nor a keepalive", remote, len(pkt))
		}
		return t.dev.SendIKE(pkt[4:], remote)
	}
	t.mu.Lock()
	c := t.peers[remote]
	t.mu.Unlock()
	if c == nil {
		c = t.udp500
	}
	// A configured peer's answers leave by its own socket: the wildcard
	// one's send buffer may be full of answers to a flood.
	return t.sendNow(c, pkt, local.Addr(), remote)
}

// sendNow sends one datagram from src (when given) without waiting: if the
// socket's send buffer is full the datagram is dropped and counted, and
// IKE's retransmissions recover it. Waiting would stall the reader that
// called us, and the send buffer does fill when many answers go to
// addresses whose link-layer address never resolves (a flood from spoofed
// on-link sources: each queued answer holds buffer space until the
// neighbour entry fails, seconds later).
func (t *udpTransport) sendNow(c *net.UDPConn, pkt []byte, src netip.Addr, dst netip.AddrPort) error {
	to := dst.Addr().Unmap()
	if !to.Is4() {
		return fmt.Errorf("send to %v: the IKE sockets are IPv4 only", dst)
	}
	var oob []byte
	if src.IsValid() && !src.IsUnspecified() {
		oob = (&ipv4.ControlMessage{Src: src.AsSlice()}).Marshal()
	}
	sa := &unix.SockaddrInet4{Port: int(dst.Port()), Addr: to.As4()}
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("send to %v: %w", dst, err)
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), pkt, oob, sa, unix.MSG_DONTWAIT)
		return true // never wait for the socket to become writable
	}); err != nil {
		return fmt.Errorf("send to %v: %w", dst, err)
	}
	if errors.Is(serr, unix.EAGAIN) || errors.Is(serr, unix.ENOBUFS) {
		t.sendDrops.Add(1)
	}
	if serr != nil {
		return fmt.Errorf("send to %v: %w", dst, serr)
	}
	return nil
}

// Close closes the sockets and stops the workers.
func (t *udpTransport) Close() error {
	t.mu.Lock()
	t.closed = true
	for a, c := range t.peers {
		c.Close()
		delete(t.peers, a)
	}
	t.mu.Unlock()
	for _, c := range t.closers {
		c()
	}
	t.wg.Wait()
	t.mu.Lock()
	w := t.workers
	t.mu.Unlock()
	if w != nil {
		w.stop()
	}
	t.mu.Lock()
	nw, pw := t.natWorkers, t.peerWorkers
	t.mu.Unlock()
	if nw != nil {
		nw.stop()
	}
	if pw != nil {
		pw.stop()
	}
	return nil
}
