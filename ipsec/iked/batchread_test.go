package iked

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// batchSocket is a socket on 127.0.0.1 as the transport opens it (with
// IP_PKTINFO), and a sender to it.
func batchSocket(t *testing.T) (*net.UDPConn, netip.AddrPort) {
	t.Helper()
	c, err := listenUDP(netip.MustParseAddrPort("127.0.0.1:0"), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, c.LocalAddr().(*net.UDPAddr).AddrPort()
}

func dialUDP(t *testing.T, to netip.AddrPort) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(to))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// collector is a reader's handle that keeps what it is given.
type collector struct {
	mu   sync.Mutex
	got  []string
	from []netip.AddrPort
	to   []netip.AddrPort
}

func (c *collector) handle(pkt []byte, local, remote netip.AddrPort) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, string(pkt))
	c.from = append(c.from, remote)
	c.to = append(c.to, local)
}

// wait waits until n datagrams were handled (a failure after a minute: the
// machine may be loaded, but not that much).
func (c *collector) wait(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		have := len(c.got)
		c.mu.Unlock()
		if have >= n {
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Fatalf("%d datagrams handled, want %d: %q", len(c.got), n, c.got)
}

// startReader runs the transport's reader on c until the test ends.
func startReader(t *testing.T, c *net.UDPConn, port uint16, natt bool, batch *datagramBatch, handle func(pkt []byte, local, remote netip.AddrPort)) {
	tr := &udpTransport{}
	tr.wg.Add(1)
	go tr.read(c, port, natt, batch, handle)
	t.Cleanup(func() {
		c.Close()
		tr.wg.Wait()
	})
}

// startPeerReader runs the configured peers' one reader on c, a peer's
// socket, until the test ends.
func startPeerReader(t *testing.T, c *net.UDPConn, port uint16, handle func(pkt []byte, local, remote netip.AddrPort)) *peerSockets {
	t.Helper()
	ps, err := newPeerSockets()
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.add(c); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ps.run(port, handle)
	}()
	t.Cleanup(func() {
		ps.close()
		<-done
	})
	return ps
}

// One recvmmsg takes as many queued datagrams as the batch holds, each
// with its sender and our address, in the order they were queued.
func TestDatagramBatchTakesManyPerCall(t *testing.T) {
	c, addr := batchSocket(t)
	senders := []*net.UDPConn{dialUDP(t, addr), dialUDP(t, addr), dialUDP(t, addr)}
	var sent []string
	var from []netip.AddrPort
	for i := range 40 {
		s := senders[i%3]
		m := fmt.Sprintf("datagram %d", i)
		if _, err := s.Write([]byte(m)); err != nil {
			t.Fatal(err)
		}
		sent, from = append(sent, m), append(from, s.LocalAddr().(*net.UDPAddr).AddrPort())
	}
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	b := newDatagramBatch(16, maxIKEDatagram)
	var got []string
	for len(got) < len(sent) {
		var n int
		var rerr unix.Errno
		if err := rc.Read(func(fd uintptr) bool {
			n, rerr = b.recv(fd)
			return rerr != unix.EAGAIN
		}); err != nil {
			t.Fatal(err)
		}
		if rerr != 0 {
			t.Fatalf("recvmmsg: %v", rerr)
		}
		// Loopback queues a datagram before its send returns: all 40
		// are there, so every call but the last fills the batch.
		if want := min(16, len(sent)-len(got)); n != want {
			t.Fatalf("recvmmsg took %d datagrams, want %d", n, want)
		}
		for i := range n {
			pkt, local, remote, truncated := b.datagram(i, 500)
			k := len(got)
			if string(pkt) != sent[k] || remote != from[k] || truncated {
				t.Errorf("datagram %d: %q from %v (truncated %v), want %q from %v", k, pkt, remote, truncated, sent[k], from[k])
			}
			if want := netip.MustParseAddrPort("127.0.0.1:500"); local != want {
				t.Errorf("datagram %d came to %v, want %v (IP_PKTINFO and the given port)", k, local, want)
			}
			got = append(got, string(pkt))
		}
	}
}

// The reader hands each sender's datagrams on in the order they came,
// across batches (the simultaneous-rekey handling depends on it).
func TestBatchReaderKeepsEachSendersOrder(t *testing.T) {
	c, addr := batchSocket(t)
	senders := []*net.UDPConn{dialUDP(t, addr), dialUDP(t, addr), dialUDP(t, addr)}
	// Queued before the reader starts, so that it reads them in full
	// batches; then more while it runs.
	const perSender = 60
	send := func(from, to int) {
		for i := from; i < to; i++ {
			for k, s := range senders {
				if (i+k)%4 == 0 {
					continue // not a strict rotation
				}
				if _, err := s.Write(fmt.Appendf(nil, "%d:%d", k, i)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	send(0, perSender/2)
	var col collector
	startReader(t, c, 500, false, newDatagramBatch(ikeBatch, maxIKEDatagram), col.handle)
	send(perSender/2, perSender)
	want := 0
	for i := range perSender {
		for k := range senders {
			if (i+k)%4 != 0 {
				want++
			}
		}
	}
	col.wait(t, want)
	col.mu.Lock()
	defer col.mu.Unlock()
	last := map[int]int{0: -1, 1: -1, 2: -1}
	for j, m := range col.got {
		var k, i int
		if _, err := fmt.Sscanf(m, "%d:%d", &k, &i); err != nil {
			t.Fatalf("datagram %q: %v", m, err)
		}
		if col.from[j] != senders[k].LocalAddr().(*net.UDPAddr).AddrPort() {
			t.Errorf("datagram %q from %v, want sender %d's address", m, col.from[j], k)
		}
		if i <= last[k] {
			t.Errorf("sender %d: datagram %d handed on after %d", k, i, last[k])
		}
		last[k] = i
	}
}

// A datagram larger than its buffer comes back cut to the buffer (the
// decoder then refuses it, counted) and marked truncated; the datagrams
// after it in the same batch are whole.
func TestBatchReaderTruncatedDatagram(t *testing.T) {
	c, addr := batchSocket(t)
	s := dialUDP(t, addr)
	long := bytes.Repeat([]byte("L"), 100)
	exact := bytes.Repeat([]byte("E"), 64)
	for _, m := range [][]byte{long, []byte("short"), exact} {
		if _, err := s.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	b := newDatagramBatch(4, 64)
	var n int
	var rerr unix.Errno
	if err := rc.Read(func(fd uintptr) bool { n, rerr = b.recv(fd); return rerr != unix.EAGAIN }); err != nil || rerr != 0 {
		t.Fatalf("recvmmsg: %v %v", err, rerr)
	}
	if n != 3 {
		t.Fatalf("recvmmsg took %d datagrams, want 3", n)
	}
	want := []struct {
		pkt       []byte
		truncated bool
	}{{long[:64], true}, {[]byte("short"), false}, {exact, false}}
	for i, w := range want {
		pkt, _, remote, truncated := b.datagram(i, 500)
		if !bytes.Equal(pkt, w.pkt) || truncated != w.truncated || !remote.IsValid() {
			t.Errorf("datagram %d: %q (truncated %v) from %v, want %q (truncated %v)", i, pkt, truncated, remote, w.pkt, w.truncated)
		}
	}

	// The reader hands the cut datagram on as it is, and goes on.
	for _, m := range [][]byte{long, []byte("short")} {
		if _, err := s.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	var col collector
	startReader(t, c, 500, false, newDatagramBatch(4, 64), col.handle)
	col.wait(t, 2)
	if got := strings.Join(col.got, ","); got != string(long[:64])+",short" {
		t.Errorf("handled %q, want the long datagram's first 64 bytes and \"short\"", col.got)
	}
}

// An error on the socket (here ECONNREFUSED, as a configured peer's
// connected socket reports an ICMP port unreachable) ends neither a
// peer's reader nor a wildcard one: the call that returns it takes it,
// and what arrives next is handed on.
func TestBatchReaderGoesOnAfterAnError(t *testing.T) {
	for _, wildcard := range []bool{false, true} {
		t.Run(fmt.Sprintf("wildcard=%v", wildcard), func(t *testing.T) {
			peer, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			peerAddr := peer.LocalAddr().(*net.UDPAddr)
			c, err := net.DialUDP("udp4", nil, peerAddr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			// Nobody at the peer's port: our datagram to it brings back
			// an ICMP port unreachable, kept as the socket's error.
			peer.Close()
			if _, err := c.Write([]byte("to nobody")); err != nil {
				t.Fatal(err)
			}
			waitSocketError(t, c)

			var col collector
			if wildcard {
				startReader(t, c, 500, false, newDatagramBatch(ikeBatch, maxIKEDatagram), col.handle)
			} else {
				startPeerReader(t, c, 500, col.handle)
			}
			// The reader took the error; the peer comes back and sends.
			peer, err = net.ListenUDP("udp4", peerAddr)
			if err != nil {
				t.Fatalf("the peer's port again: %v", err)
			}
			defer peer.Close()
			if _, err := peer.WriteToUDP([]byte("after the error"), c.LocalAddr().(*net.UDPAddr)); err != nil {
				t.Fatal(err)
			}
			col.wait(t, 1)
			if col.got[0] != "after the error" || col.from[0] != peerAddr.AddrPort() {
				t.Errorf("handled %q from %v, want \"after the error\" from %v", col.got[0], col.from[0], peerAddr)
			}
		})
	}
}

// waitSocketError waits until c has an error pending (poll says POLLERR;
// it does not take the error).
func waitSocketError(t *testing.T, c *net.UDPConn) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var revents int16
		var perr error
		if err := rc.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			_, perr = unix.Poll(fds, 0)
			revents = fds[0].Revents
		}); err != nil {
			t.Fatal(err)
		}
		if perr != nil && !errors.Is(perr, unix.EINTR) {
			t.Fatal(perr)
		}
		if revents&unix.POLLERR != 0 {
			return
		}
	}
	t.Fatal("no ICMP error on the socket after a minute")
}

// On the NAT-T port the reader hands on IKE without the non-ESP marker,
// and drops keepalives and anything else (ESP is the kernel's there).
func TestBatchReaderNATT(t *testing.T) {
	c, addr := batchSocket(t)
	s := dialUDP(t, addr)
	for _, m := range [][]byte{{0xff}, []byte("\x00\x00\x00\x00ike 1"), []byte("\x12\x34\x56\x78esp"), []byte("\x00\x00\x00\x00ike 2")} {
		if _, err := s.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	var col collector
	startReader(t, c, 4500, true, newDatagramBatch(ikeBatch, maxIKEDatagram), col.handle)
	col.wait(t, 2)
	col.mu.Lock()
	defer col.mu.Unlock()
	if got := strings.Join(col.got, ","); got != "ike 1,ike 2" {
		t.Errorf("handled %q, want the two IKE messages without their marker", col.got)
	}
	if want := netip.AddrPortFrom(addr.Addr(), 4500); col.to[0] != want {
		t.Errorf("IKE came to %v, want %v", col.to[0], want)
	}
}
