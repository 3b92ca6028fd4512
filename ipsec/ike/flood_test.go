package ike

import (
	"bytes"
	"fmt"
	"github.com/flashgate/flashgate/ipsec/ike/iketest"
	"net/netip"
	"testing"
)

// exchangeOf is the exchange type of an IKE datagram as it goes on the
// wire (after the non-ESP marker on the NAT-T port), or 0.
func exchangeOf(pkt []byte) ExchangeType {
	pkt = bytes.TrimPrefix(pkt, nonESPMarker)
	if len(pkt) < 28 {
		return 0
	}
	return ExchangeType(pkt[18])
}

// addAttacker adds an endpoint at addr that speaks IKE with B's settings
// but never gets past IKE_SA_INIT: its IKE_AUTH requests are lost. It does
// answer COOKIEs, as a real attacker with its own address does.
func addAttacker(n *testNet, ca *PeerConfig, addr string) (*peer, *PeerConfig) {
	fc := *ca
	fc.Local = netip.AddrPortFrom(netip.MustParseAddr(addr), 500)
	return n.addPeer("attacker "+addr, addr, &fc, nil), &fc
}

func dropAuthFrom(n *testNet, from ...string) {
	set := map[netip.Addr]bool{}
	for _, a := range from {
		set[netip.MustParseAddr(a)] = true
	}
	n.SetDrop(func(d iketest.Datagram) bool { return set[d.From.Addr()] && exchangeOf(d.Pkt) == IKE_AUTH })
}

// One source that answers COOKIEs gets at most MaxHalfOpenPerSource
// half-open SAs, and when sources together fill MaxHalfOpen, the peer we
// are configured for (its address is the tunnel's remote address) still
// gets its tunnel up. Both used to fail: one address held all 4096, and
// the configured peer was dropped with everyone else.
func TestHalfOpenFloodLeavesTheConfiguredPeerIn(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	n := newTestNet(t)
	a := n.addPeer("A", addrA, ca, nil)
	b := n.addPeer("B", addrB, cb, func(c *EndpointConfig) { c.CookieThreshold = 2; c.MaxHalfOpen = 8 })
	var sources []string
	for i := 1; i <= 4; i++ {
		sources = append(sources, fmt.Sprintf("192.0.2.%d", i))
	}
	dropAuthFrom(n, sources...)
	for _, src := range sources {
		att, fc := addAttacker(n, ca, src)
		for range 10 {
			att.ep.Initiate(fc)
		}
	}
	n.run()
	if got := b.ep.HalfOpen(); got > 8 {
		t.Errorf("B holds %d half-open SAs, over MaxHalfOpen 8", got)
	}
	b.ep.mu.Lock()
	for a, k := range b.ep.halfOpenBy {
		if k > 5 {
			t.Errorf("%v holds %d half-open SAs, over the per-source limit of 5", a, k)
		}
	}
	b.ep.mu.Unlock()
	if b.ep.Stats.SourceLimited.Load() == 0 {
		t.Error("no IKE_SA_INIT was refused by the per-source limit")
	}
	if b.ep.HalfOpen() < 8 {
		t.Fatalf("the flood filled only %d of 8 half-open places: the test proves nothing", b.ep.HalfOpen())
	}
	a.ep.Initiate(ca)
	n.run()
	checkPairs(t, a, b, 1)
}

// An IKE_SA_INIT over MaxInitSize is dropped before any work or state: a
// responder keeps the request until IKE_AUTH, and 60 KB of Vendor ID in
// each let one source pin hundreds of MB.
func TestOversizedInitIsDropped(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	n := newTestNet(t)
	n.addPeer("A", addrA, ca, nil)
	b := n.addPeer("B", addrB, cb, nil)
	att, fc := addAttacker(n, ca, "192.0.2.9")
	// Catch the attacker's IKE_SA_INIT and pad it with a Vendor ID.
	var init []byte
	n.SetDrop(func(d iketest.Datagram) bool {
		if d.From.Addr() == fc.Local.Addr() && exchangeOf(d.Pkt) == IKE_SA_INIT && init == nil {
			init = d.Pkt
			return true
		}
		return false
	})
	att.ep.Initiate(fc)
	n.run()
	if init == nil {
		t.Fatal("no IKE_SA_INIT seen")
	}
	m, err := DecodeMessage(init)
	if err != nil {
		t.Fatal(err)
	}
	m.Payloads = append(m.Payloads, &Vendor{Data: make([]byte, 60000)})
	big := m.Encode()
	sent := n.WireLen()
	b.ep.HandleMessage(big, cb.Local, fc.Local)
	if b.ep.HalfOpen() != 0 || n.WireLen() != sent {
		t.Errorf("a %d-byte IKE_SA_INIT was answered (%d half-open)", len(big), b.ep.HalfOpen())
	}
	if b.ep.Stats.InitTooLarge.Load() != 1 {
		t.Errorf("InitTooLarge %d, want 1", b.ep.Stats.InitTooLarge.Load())
	}
	// The same request at its own size is answered.
	b.ep.HandleMessage(init, cb.Local, fc.Local)
	if b.ep.HalfOpen() != 1 {
		t.Errorf("the %d-byte IKE_SA_INIT left %d half-open SAs, want 1", len(init), b.ep.HalfOpen())
	}
}

// Before IKE_AUTH the initiator is nobody: a protected INFORMATIONAL on a
// half-open SA is neither answered nor remembered. It used to be answered,
// and a padded DELETE kept whole for three minutes.
func TestNoInformationalBeforeAuth(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	n := newTestNet(t)
	n.addPeer("A", addrA, ca, nil)
	b := n.addPeer("B", addrB, cb, nil)
	att, fc := addAttacker(n, ca, "192.0.2.10")
	dropAuthFrom(n, "192.0.2.10")
	att.ep.Initiate(fc)
	n.run()
	if b.ep.HalfOpen() != 1 {
		t.Fatalf("B has %d half-open SAs, want the attacker's 1", b.ep.HalfOpen())
	}
	sa := att.ep.SAs()[0]
	sa.mu.Lock()
	pkt, err := sa.keys.out.seal(sa.header(INFORMATIONAL, 1, false), []Payload{&Delete{Protocol: ProtoIKE}, &Vendor{Data: make([]byte, 30000)}}, sa.ep.rand)
	sa.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	sent := n.WireLen()
	b.ep.HandleMessage(pkt, cb.Local, fc.Local)
	if n.WireLen() != sent {
		t.Error("B answered an INFORMATIONAL on a half-open SA")
	}
	if b.ep.HalfOpen() != 1 || b.ep.Stats.EarlyRequests.Load() != 1 {
		t.Errorf("after the INFORMATIONAL: %d half-open, %d early requests counted; want 1 and 1", b.ep.HalfOpen(), b.ep.Stats.EarlyRequests.Load())
	}
	b.ep.mu.Lock()
	kept := len(b.ep.ended)
	b.ep.mu.Unlock()
	if kept != 0 {
		t.Errorf("B keeps %d ended-SA answers for an unauthenticated peer", kept)
	}
}

// The ended-SA cache holds the request's hash, not the request: a
// retransmission is still recognised.
func TestEndedCacheKeepsHashes(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	_, _, b := establish(t, ca, cb)
	request := bytes.Repeat([]byte{7}, 60000)
	b.ep.rememberEnd(42, request, []byte("answer"))
	b.ep.mu.Lock()
	e := b.ep.ended[42]
	b.ep.mu.Unlock()
	if size := len(e.answer) + len(e.request); size > 1024 {
		t.Errorf("an ended SA keeps %d bytes for a 60 KB request", size)
	}
	if !b.ep.answerEnded(42, request, cb.Local, ca.Local) {
		t.Error("a retransmission of the ending request is not recognised")
	}
	if b.ep.answerEnded(42, append(request[:len(request)-1:len(request)-1], 8), cb.Local, ca.Local) {
		t.Error("a different request is answered from the cache")
	}
}
