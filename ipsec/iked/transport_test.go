package iked

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
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

// The configured peers' sockets are read by one goroutine, however many
// peers there are (a hub's thousand had a goroutine each, whose stacks
// the collector counted with the live heap), and each peer's datagrams
// still reach handle, in the order it sent them, with our address.
func TestPeersShareOneReader(t *testing.T) {
	tr, err := newTransport(freeUDPPort(t), freeUDPPort(t), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[netip.AddrPort][]string{}
	tr.Run(func(pkt []byte, local, remote netip.AddrPort) {
		mu.Lock()
		defer mu.Unlock()
		if local.Addr() != netip.MustParseAddr("127.0.0.1") || local.Port() != tr.ikePort {
			t.Errorf("datagram from %v came to %v, want 127.0.0.1:%d", remote, local, tr.ikePort)
		}
		got[remote] = append(got[remote], string(pkt))
	})
	defer tr.Close()
	// 100 peers' three datagrams each fit the workers' queues (2 x
	// ikeQueue) even if no worker runs before the reader is done: what
	// does not fit is dropped, by design.
	const peers = 100
	var conns []*net.UDPConn
	var addrs []netip.AddrPort
	for range peers {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
		addrs = append(addrs, c.LocalAddr().(*net.UDPAddr).AddrPort())
	}
	goroutines := runtime.NumGoroutine()
	if err := tr.SetPeers(addrs); err != nil {
		t.Fatal(err)
	}
	if n := runtime.NumGoroutine(); n > goroutines+2 {
		t.Errorf("%d peers' sockets took %d goroutines more, want one reader for all", peers, n-goroutines)
	}
	ikePort := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(tr.ikePort)}
	for _, m := range []string{"1", "2", "3"} {
		for _, c := range conns {
			if _, err := c.WriteToUDP([]byte(m), ikePort); err != nil {
				t.Fatal(err)
			}
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := 0
		for _, ms := range got {
			n += len(ms)
		}
		mu.Unlock()
		if n == 3*peers {
			break
		}
		if time.Now().After(deadline) {
			_, drops, _ := tr.Drops()
			t.Fatalf("%d of %d datagrams handled in a minute (%d dropped at the workers' queues)", n, 3*peers, drops)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range addrs {
		if strings.Join(got[a], ",") != "1,2,3" {
			t.Errorf("peer %v: handled %q, want 1,2,3 in order", a, got[a])
		}
	}
	if tr.peerSocks.byFD == nil || len(tr.peerSocks.byFD) != peers {
		t.Errorf("the reader has %d sockets, want %d", len(tr.peerSocks.byFD), peers)
	}
}

// A peer that floods its own socket takes a batch at a time, as every
// other ready peer does: another peer's datagram is not left behind the
// whole flood.
func TestPeerFloodDoesNotStarveAnotherPeer(t *testing.T) {
	flooder, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer flooder.Close()
	other, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ps, err := newPeerSockets()
	if err != nil {
		t.Fatal(err)
	}
	var socks []*net.UDPConn
	for range 2 {
		c, err := listenUDP(netip.MustParseAddrPort("127.0.0.1:0"), false)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := ps.add(c); err != nil {
			t.Fatal(err)
		}
		socks = append(socks, c)
	}
	// The flood is queued first, then the other peer's one datagram.
	const flood = 10 * ikeBatch
	for i := range flood {
		if _, err := flooder.WriteToUDP([]byte(fmt.Sprintf("flood %d", i)), socks[0].LocalAddr().(*net.UDPAddr)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.WriteToUDP([]byte("other"), socks[1].LocalAddr().(*net.UDPAddr)); err != nil {
		t.Fatal(err)
	}
	var col collector
	done := make(chan struct{})
	go func() {
		defer close(done)
		ps.run(500, col.handle)
	}()
	defer func() {
		ps.close()
		<-done
	}()
	col.wait(t, flood+1)
	col.mu.Lock()
	defer col.mu.Unlock()
	at := slices.Index(col.got, "other")
	if at < 0 || at > 2*ikeBatch {
		t.Errorf("the other peer's datagram was handled %dth of %d, want within the first %d (a batch of the flood at most before it)", at+1, len(col.got), 2*ikeBatch)
	}
	for i, m := range slices.DeleteFunc(slices.Clone(col.got), func(s string) bool { return s == "other" }) {
		if want := fmt.Sprintf("flood %d", i); m != want {
			t.Fatalf("flood datagram %d is %q, want %q: out of order", i, m, want)
		}
	}
}

// A peer no longer configured has its socket closed and taken out of the
// reader, which goes on reading the others.
func TestPeerRemovedReaderGoesOn(t *testing.T) {
	tr, err := newTransport(freeUDPPort(t), freeUDPPort(t), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan netip.AddrPort, 16)
	tr.Run(func(pkt []byte, local, remote netip.AddrPort) { handled <- remote })
	defer tr.Close()
	var addrs []netip.AddrPort
	var conns []*net.UDPConn
	for range 2 {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
		addrs = append(addrs, c.LocalAddr().(*net.UDPAddr).AddrPort())
	}
	if err := tr.SetPeers(addrs); err != nil {
		t.Fatal(err)
	}
	if err := tr.SetPeers(addrs[1:]); err != nil {
		t.Fatal(err)
	}
	tr.mu.Lock()
	_, kept := tr.peers[addrs[0]]
	tr.mu.Unlock()
	tr.peerSocks.mu.Lock()
	n := len(tr.peerSocks.byFD)
	tr.peerSocks.mu.Unlock()
	if kept || n != 1 {
		t.Fatalf("after the peer's removal: its socket kept %v, the reader reads %d sockets, want 1", kept, n)
	}
	ikePort := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(tr.ikePort)}
	if _, err := conns[1].WriteToUDP([]byte("still here"), ikePort); err != nil {
		t.Fatal(err)
	}
	select {
	case from := <-handled:
		if from != addrs[1] {
			t.Errorf("handled a datagram from %v, want %v", from, addrs[1])
		}
	case <-time.After(time.Minute):
		t.Fatal("the remaining peer's datagram was not handled")
	}
}
