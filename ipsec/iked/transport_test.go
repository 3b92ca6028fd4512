package iked

import (
	"net"
	"net/netip"
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

// The IKE port is read by more than one goroutine: while one datagram is
// being handled (an IKE_SA_INIT's Diffie-Hellman), the next is handled
// too, instead of waiting in the socket buffer until the kernel drops it.
func TestTransportHandlesDatagramsInParallel(t *testing.T) {
	tr, err := newTransport(freeUDPPort(t), freeUDPPort(t), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var now, peak atomic.Int32
	tr.run(func(pkt []byte, local, remote netip.AddrPort) {
		n := now.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
		now.Add(-1)
	})
	defer func() { close(release); tr.close() }()

	c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(tr.ikePort)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 2 {
		if _, err := c.Write([]byte("an IKE datagram")); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for peak.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := peak.Load(); got < 2 {
		t.Errorf("%d datagram(s) handled at once, want 2: one reader handles the IKE port", got)
	}
}
