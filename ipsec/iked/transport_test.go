package iked

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// freeUDPPort returns a UDP port of 127.0.0.1 that was free a moment ago.
func freeUDPPort(t *testing.T) uint16 {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port)
}

// Datagrams of different senders are handled at once (while one waits on
// an IKE_SA_INIT's Diffie-Hellman, the next is handled instead of waiting
// in the socket buffer until the kernel drops it); one sender's are
// handled one after the other, in the order they came, so that a peer's
// request and its answer to ours, sent back to back in a simultaneous
// rekey, are seen in that order.
func TestTransportHandlesDatagramsInParallel(t *testing.T) {
	tr, err := newTransport(freeUDPPort(t), freeUDPPort(t), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var now, peak atomic.Int32
	var mu sync.Mutex
	var order []string
	tr.Run(func(pkt []byte, local, remote netip.AddrPort) {
		n := now.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		mu.Lock()
		order = append(order, string(pkt))
		mu.Unlock()
		<-release
		now.Add(-1)
	})
	released := false
	defer func() {
		if !released {
			close(release)
		}
		tr.Close()
	}()

	// Two senders that land on different workers.
	dial := func() *net.UDPConn {
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(tr.ikePort)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	addr := func(c *net.UDPConn) netip.AddrPort { return c.LocalAddr().(*net.UDPAddr).AddrPort() }
	first := dial()
	var second *net.UDPConn
	for range 64 {
		if c := dial(); tr.workers.index(addr(c)) != tr.workers.index(addr(first)) {
			second = c
			break
		}
	}
	if second == nil {
		t.Fatal("64 senders all map to one worker")
	}
	for _, m := range []string{"first 1", "first 2", "first 3"} {
		if _, err := first.Write([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := second.Write([]byte("second")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for peak.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := peak.Load(); got != 2 {
		t.Errorf("%d datagram(s) handled at once, want 2 (one per sender)", got)
	}
	close(release)
	released = true
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(order)
		mu.Unlock()
		if n == 4 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var firsts []string
	for _, m := range order {
		if m != "second" {
			firsts = append(firsts, m)
		}
	}
	if len(order) != 4 || strings.Join(firsts, ",") != "first 1,first 2,first 3" {
		t.Errorf("handled %q, want the first sender's three in order and the second's", order)
	}
}

// A configured peer's datagrams are handled while every worker of the
// wildcard socket is stuck (a flood read in batches keeps their queues
// full): the peers' connected sockets have workers of their own.
func TestConfiguredPeerHasWorkersOfItsOwn(t *testing.T) {
	tr, err := newTransport(freeUDPPort(t), freeUDPPort(t), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	peerAddr := peer.LocalAddr().(*net.UDPAddr).AddrPort()
	stuck := make(chan struct{})
	var stuckWorkers atomic.Int32
	handled := make(chan string, 16)
	tr.Run(func(pkt []byte, local, remote netip.AddrPort) {
		if remote != peerAddr {
			stuckWorkers.Add(1)
			<-stuck
			return
		}
		handled <- string(pkt)
	})
	defer func() {
		close(stuck)
		tr.Close()
	}()
	if err := tr.SetPeers([]netip.AddrPort{peerAddr}); err != nil {
		t.Fatal(err)
	}
	// A sender on each of the wildcard socket's workers, each worker stuck
	// in handle.
	ikePort := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(tr.ikePort)}
	busy := map[int]bool{}
	for range 256 {
		if len(busy) == len(tr.workers.queues) {
			break
		}
		c, err := net.DialUDP("udp4", nil, ikePort)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i := tr.workers.index(c.LocalAddr().(*net.UDPAddr).AddrPort()); !busy[i] {
			busy[i] = true
			if _, err := c.Write([]byte("flood")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(busy) != len(tr.workers.queues) {
		t.Fatalf("256 senders landed on %d of %d workers", len(busy), len(tr.workers.queues))
	}
	for deadline := time.Now().Add(time.Minute); stuckWorkers.Load() < int32(len(busy)); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d workers took their datagram in a minute", stuckWorkers.Load(), len(busy))
		}
	}
	if _, err := peer.WriteToUDP([]byte("peer"), ikePort); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-handled:
		if m != "peer" {
			t.Errorf("handled %q, want the peer's datagram", m)
		}
	case <-time.After(time.Minute):
		t.Fatal("the configured peer's datagram was not handled while the wildcard socket's workers were stuck")
	}
}
