package ike

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// v1Seeds are the datagrams of a complete IKEv1 exchange: main mode, quick
// mode with PFS, DPD, and a delete.
func v1Seeds(f *testing.F) [][]byte {
	ca, cb := v1Configs("aes128-sha1-modp2048", "aes128-sha1-modp2048")
	ca.DPDDelay = time.Second
	n, a, _ := twoPeers(f, ca, cb)
	a.ep.Initiate(ca)
	n.step(3*time.Second, 500*time.Millisecond)
	for _, sa := range a.ep.SAs() {
		sa.Delete()
	}
	n.run()
	var out [][]byte
	for _, d := range n.Wire() {
		out = append(out, bytes.TrimPrefix(d.Pkt, nonESPMarker))
	}
	return out
}

// FuzzV1Decode: the ISAKMP codec never panics, bounds what it allocates,
// and what it decodes encodes back to the same bytes.
func FuzzV1Decode(f *testing.F) {
	for _, s := range v1Seeds(f) {
		f.Add(s)
	}
	f.Add(make([]byte, 28))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeV1Header(b)
		if err != nil {
			return
		}
		ps, err := decodeV1Payloads(h.NextPayload, b[HeaderLen:h.Length], h.Flags&v1FlagEncrypted != 0)
		if err != nil {
			return
		}
		if h.Flags&v1FlagEncrypted == 0 {
			enc := encodeV1Plain(h, ps)
			if !bytes.Equal(enc[HeaderLen:], b[HeaderLen:h.Length]) {
				t.Fatalf("payload chain does not encode back:\n%x\n%x", enc[HeaderLen:], b[HeaderLen:h.Length])
			}
		}
		for _, p := range ps {
			switch p.Type {
			case v1SA:
				if sa, err := decodeV1SA(p.Body); err == nil {
					again, err := decodeV1SA(sa.encode())
					if err != nil || len(again.Proposals) != len(sa.Proposals) {
						t.Fatalf("SA payload does not survive a round trip: %v", err)
					}
					for _, pr := range sa.Proposals {
						for _, tr := range pr.Transforms {
							v1Phase1Proposal(tr)
							v1ESPProposal(tr)
						}
					}
				}
			case v1ID:
				v1SelectorOf(p.Body)
			case v1Notify:
				decodeV1Notify(p.Body)
			case v1Delete:
				if d, err := decodeV1Delete(p.Body); err == nil && !bytes.Equal(d.encode(), p.Body) && len(d.SPIs) > 0 {
					t.Fatalf("delete does not encode back")
				}
			}
		}
	})
}

// FuzzV1HandleMessage feeds arbitrary ISAKMP datagrams to the responder of
// an established IKEv1 tunnel and to a fresh one: nothing panics and the
// established tunnel survives.
func FuzzV1HandleMessage(f *testing.F) {
	for _, s := range v1Seeds(f) {
		f.Add(s)
	}
	ca, cb := v1Configs("aes128-sha1-modp2048", "aes128-sha1")
	n := newTestNet(f)
	a := n.addPeer("A", addrA, ca, nil)
	b := n.addPeer("B", addrB, cb, nil)
	a.ep.Initiate(ca)
	n.run()
	if len(b.established()) != 1 || len(b.pairList()) != 1 {
		f.Fatal("fixture tunnel not established")
	}
	fresh := newTestNet(f)
	c := fresh.addPeer("C", addrB, cb, nil)
	var mu sync.Mutex
	f.Fuzz(func(t *testing.T, pkt []byte) {
		mu.Lock()
		defer mu.Unlock()
		b.ep.HandleMessage(pkt, cb.Local, ca.Local)
		c.ep.HandleMessage(pkt, cb.Local, ca.Local)
		n.Discard()
		fresh.Discard()
		forget(c.ep)
		if len(b.established()) != 1 || len(b.pairList()) != 1 {
			t.Fatalf("established tunnel disturbed by %x", pkt)
		}
	})
}
