package ike

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// FuzzHandleMessage feeds arbitrary datagrams to the responder of an
// established tunnel and to a fresh responder: nothing may panic, and the
// established tunnel must survive (its keys are unknown to the fuzzer, so
// nothing it sends can authenticate).
func FuzzHandleMessage(f *testing.F) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	ca.DPDDelay = time.Second
	n := newTestNet(f)
	a := n.addPeer("A", addrA, ca, nil)
	b := n.addPeer("B", addrB, cb, nil)
	a.ep.Initiate(ca)
	n.run()
	n.step(3*time.Second, time.Second)
	for _, d := range n.Wire() {
		f.Add(bytes.TrimPrefix(d.Pkt, nonESPMarker))
	}
	if len(b.established()) != 1 {
		f.Fatal("fixture tunnel not established")
	}
	fresh := newTestNet(f)
	c := fresh.addPeer("C", addrB, cb, nil)
	var mu sync.Mutex
	f.Fuzz(func(t *testing.T, pkt []byte) {
		mu.Lock()
		defer mu.Unlock()
		from, to := ca.Local, cb.Local
		b.ep.HandleMessage(pkt, to, from)
		c.ep.HandleMessage(pkt, to, from)
		n.Discard() // answers to the fuzzer go nowhere
		fresh.Discard()
		forget(c.ep)
		if len(b.established()) != 1 || len(b.pairList()) != 1 {
			t.Fatalf("established tunnel disturbed by %x", pkt)
		}
	})
}
