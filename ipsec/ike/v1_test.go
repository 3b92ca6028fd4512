package ike

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/ipsec/ike/iketest"
)

// IKEv1 between two engines on the in-memory network of network_test.go.

func v1Configs(ike, esp string) (*PeerConfig, *PeerConfig) {
	a, b := pairConfigs(ike, esp)
	a.Version, b.Version = 1, 1
	return a, b
}

var v1Suites = []struct{ ike, esp string }{
	{"aes128-sha1-modp2048", "aes128-sha1"},
	{"aes256-sha256-modp2048", "aes256-sha256"},
	{"3des-sha1-modp1024", "3des-sha1"},
	{"aes128-sha1-modp1024", "aes128-sha1"}, // what the isakmpd peers of the field negotiate
	{"aes128-md5-modp1536", "3des-md5-modp1536"},
}

func TestV1Establish(t *testing.T) {
	for _, s := range v1Suites {
		for _, aInitiates := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/%s/A-initiates=%v", s.ike, s.esp, aInitiates), func(t *testing.T) {
				ca, cb := v1Configs(s.ike, s.esp)
				n, a, b := twoPeers(t, ca, cb)
				init := a
				if !aInitiates {
					init = b
				}
				if _, err := init.ep.Initiate(init.cfg); err != nil {
					t.Fatal(err)
				}
				n.run()
				checkPairs(t, a, b, 1)
				for _, p := range []*peer{a, b} {
					sas := p.established()
					if len(sas) != 1 {
						t.Fatalf("%s: %d established ISAKMP SAs, want 1 (failures %v)", p.name, len(sas), p.failures)
					}
					st := sas[0].Status()
					if st.Proposal != s.ike || st.Initiator != (p == init) {
						t.Errorf("%s: proposal %q initiator %v, want %q", p.name, st.Proposal, st.Initiator, s.ike)
					}
					wantESP := MustParseProposals(ProtoESP, s.esp)[0]
					wantESP.DH = nil // PFS shows in the proposal of the child
					if got := p.ups[0].Proposal.String(); got != s.esp {
						t.Errorf("%s: ESP %q, want %q", p.name, got, s.esp)
					}
					tr, _ := wantESP.ESPTransform()
					if p.ups[0].In.Transform != tr {
						t.Errorf("%s: transform %+v, want %+v", p.name, p.ups[0].In.Transform, tr)
					}
				}
				if got := a.ups[0].In.LocalTS; len(got) != 1 || got[0] != netip.MustParsePrefix("10.10.1.0/24") {
					t.Errorf("A's local TS %v", got)
				}
				for _, p := range []*peer{a, b} {
					s := p.ep.Stats.Snapshot()
					if s.Malformed+s.BadICV+s.UnknownSPI != 0 {
						t.Errorf("%s dropped messages of a clean exchange: %+v", p.name, s)
					}
				}
			})
		}
	}
}

func TestV1TwoSubnetPairs(t *testing.T) {
	ca, cb := v1Configs("aes128-sha1-modp2048", "aes128-sha1-modp2048")
	ca.RemoteTS = pfx("10.10.2.0/24", "10.10.4.0/24")
	cb.LocalTS = pfx("10.10.2.0/24", "10.10.4.0/24")
	n, a, b := twoPeers(t, ca, cb)
	a.ep.Initiate(ca)
	n.run()
	checkPairs(t, a, b, 2)
	seen := map[string]bool{}
	for _, u := range a.ups {
		seen[u.In.RemoteTS[0].String()] = true
		if u.Proposal.String() != "aes128-sha1-modp2048" {
			t.Errorf("child %v: %s, want PFS with modp2048", u.In.RemoteTS, u.Proposal)
		}
	}
	if !seen["10.10.2.0/24"] || !seen["10.10.4.0/24"] {
		t.Errorf("children for %v, want both remote subnets", seen)
	}
	if len(a.established()[0].Status().Children) != 2 {
		t.Errorf("status shows %d children", len(a.established()[0].Status().Children))
	}
}

func TestV1FailuresSayWhy(t *testing.T) {
	tests := []struct {
		name         string
		mutate       func(a, b *PeerConfig)
		reason       Reason
		aSays, bSays string
	}{
		{"psk mismatch", func(a, b *PeerConfig) { b.PSK = []byte("wrong") }, ReasonAuthenticationFailed,
			"pre-shared key", "pre-shared key mismatch"},
		{"id mismatch", func(a, b *PeerConfig) { b.RemoteID = mustID("someone-else") }, ReasonAuthenticationFailed,
			"INVALID-ID-INFORMATION", "peer calls itself gwA, we expect someone-else"},
		{"IKE proposal mismatch", func(a, b *PeerConfig) { b.IKEProposals = MustParseProposals(ProtoIKE, "aes256-sha256-modp2048") }, ReasonNoProposalChosen,
			"answered NO_PROPOSAL_CHOSEN to main mode message 1: we offered aes128-sha1-modp2048",
			"peer offered aes128-sha1-modp2048, we accept aes256-sha256-modp2048"},
		{"ESP proposal mismatch", func(a, b *PeerConfig) { b.ESPProposals = MustParseProposals(ProtoESP, "aes256-sha256") }, ReasonNoProposalChosen,
			"answered NO_PROPOSAL_CHOSEN to quick mode 10.10.1.0/24 to 10.10.2.0/24: we offered aes128-sha1",
			"peer offered aes128-sha1, we accept aes256-sha256"},
		{"subnet mismatch", func(a, b *PeerConfig) { b.RemoteTS = pfx("192.168.0.0/24") }, ReasonTSUnacceptable,
			"answered TS_UNACCEPTABLE to quick mode", "peer proposed its side 10.10.1.0/24"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ca, cb := v1Configs("aes128-sha1-modp2048", "aes128-sha1")
			tt.mutate(ca, cb)
			n, a, b := twoPeers(t, ca, cb)
			a.ep.Initiate(ca)
			n.run()
			n.step(20*time.Second, 100*time.Millisecond)
			fa, fb := a.firstFailure(), b.firstFailure()
			if fa == nil || fb == nil {
				t.Fatalf("failures: A %v, B %v; want both", fa, fb)
			}
			if fa.Reason != tt.reason || !strings.Contains(fa.Error(), tt.aSays) {
				t.Errorf("A (initiator) says %q (%v); want %v containing %q", fa, fa.Reason, tt.reason, tt.aSays)
			}
			if fb.Reason != tt.reason || fb.ByPeer || !strings.Contains(fb.Error(), tt.bSays) {
				t.Errorf("B (responder) says %q (%v, by peer %v); want %v containing %q", fb, fb.Reason, fb.ByPeer, tt.reason, tt.bSays)
			}
			if len(a.pairList())+len(b.pairList()) != 0 {
				t.Errorf("phase 2 SAs installed despite the failure")
			}
		})
	}
}

func TestV1RetransmitAndNoAnswer(t *testing.T) {
	ca, cb := v1Configs("aes128-sha1-modp2048", "aes128-sha1")
	n, a, b := twoPeers(t, ca, cb)
	// Lose the first copy of every message once.
	seen := map[string]bool{}
	n.SetDrop(func(d iketest.Datagram) bool {
		k := string(d.Pkt)
		if !seen[k] {
			seen[k] = true
			return true
		}
		return false
	})
	a.ep.Initiate(ca)
	n.step(20*time.Second, 100*time.Millisecond)
	checkPairs(t, a, b, 1)
	if len(b.ups) != 1 || len(a.ups) != 1 {
		t.Errorf("ups A %d B %d: a retransmission made a second SA", len(a.ups), len(b.ups))
	}
	if b.ep.Stats.RetransmitsAnswered.Load() == 0 || a.ep.Stats.Retransmits.Load() == 0 {
		t.Errorf("no retransmissions: %+v %+v", a.ep.Stats.Snapshot(), b.ep.Stats.Snapshot())
	}

	ca, cb = v1Configs("aes128-sha1-modp2048", "aes128-sha1")
	n, a, _ = twoPeers(t, ca, cb)
	n.SetDrop(func(iketest.Datagram) bool { return true })
	a.ep.Initiate(ca)
	n.step(20*time.Second, 100*time.Millisecond)
	f := a.lastFailure()
	if f == nil || f.Reason != ReasonPeerTimeout || f.Error() != "no answer from peer 10.10.0.2:500 to main mode message 1 after 5 tries in 15.5s" {
		t.Fatalf("got %v", f)
	}
}

// deliverTwice makes every datagram from the address from arrive twice,
// the copy after what the receiver sent in answer to the first: as when
// the peer answers both our message and our retransmission of it, or its
// own timer sends its last message again (libreswan's responder does for
// main mode messages 2 and 4).
func deliverTwice(n *testNet, from netip.Addr) (release func()) {
	var held []iketest.Datagram
	replaying := false
	n.SetDrop(func(d iketest.Datagram) bool {
		if d.From.Addr() != from || replaying {
			return false
		}
		held = append(held, d)
		return true
	})
	return func() {
		for i := 0; i < 100; i++ {
			n.run()
			if len(held) == 0 {
				return
			}
			hs := held
			held = nil
			replaying = true
			for _, d := range hs {
				n.Send(d.Pkt, d.From, d.To)
				n.Send(d.Pkt, d.From, d.To)
			}
			replaying = false
		}
	}
}

// TestV1InitiatorIgnoresRepeatedAnswers: a responder's message that
// arrives twice must not be taken for its next one. It was: a second main
// mode message 2 after our message 3 was read as message 4 ("lacks KE or
// nonce") and ended the SA, and the real message 4 then went to no SA.
// libreswan in a loaded VM did this to our phase 1 rekey: it answered our
// retransmitted message 1, then sent message 4 seven times to nobody.
func TestV1InitiatorIgnoresRepeatedAnswers(t *testing.T) {
	t.Run("main mode", func(t *testing.T) {
		ca, cb := v1Configs("aes128-sha1-modp2048", "aes128-sha1")
		n, a, b := twoPeers(t, ca, cb)
		release := deliverTwice(n, netip.MustParseAddr(addrB))
		if _, err := a.ep.Initiate(ca); err != nil {
			t.Fatal(err)
		}
		release()
		if f := a.firstFailure(); f != nil {
			t.Fatalf("the initiator failed on a repeated answer: %v", f)
		}
		checkPairs(t, a, b, 1)
		if got := a.ep.Stats.OutOfWindow.Load(); got == 0 {
			t.Errorf("no repeated answer counted (OutOfWindow 0): did the test repeat any?")
		}
	})
	t.Run("phase 1 rekey", func(t *testing.T) {
		n, a, b, oldA, _ := establishedV1Pair(t)
		release := deliverTwice(n, netip.MustParseAddr(addrB))
		if err := oldA.RekeyIKE(); err != nil {
			t.Fatal(err)
		}
		release()
		if f := a.firstFailure(); f != nil {
			t.Fatalf("the phase 1 rekey failed on a repeated answer: %v", f)
		}
		newA := a.established()
		if len(newA) != 1 || newA[0] == oldA || oldA.State() != StateRekeyed {
			t.Fatalf("after the phase 1 rekey A has %d established ISAKMP SAs (the old one %v), want the new one", len(newA), oldA.State())
		}
		checkPhaseOneRekeyKeptChildren(t, a, b)
	})
}

func TestV1DPDAndDeletes(t *testing.T) {
	ca, cb := v1Configs("aes128-sha1-modp2048", "aes128-sha1")
	ca.DPDDelay = 10 * time.Second
	n, a, b := twoPeers(t, ca, cb)
	a.ep.Initiate(ca)
	n.run()
	n.step(35*time.Second, 500*time.Millisecond)
	if f := a.lastFailure(); f != nil || len(a.established()) != 1 {
		t.Fatalf("DPD with a live peer: %v", f)
	}
	// B deletes the phase 2 SA, then A makes it again, then B closes all.
	bs := b.established()[0]
	bs.mu.Lock()
	bs.v1DeleteChild(bs.children[0], nil)
	ev := bs.takeEvents()
	bs.mu.Unlock()
	runEvents(ev)
	n.run()
	if len(a.pairList()) != 0 {
		t.Fatalf("A keeps the phase 2 SA B deleted")
	}
	if f := a.lastFailure(); f == nil || f.Reason != ReasonPeerDeleted {
		t.Errorf("A says %v, want the peer deleted it", f)
	}
	bs.Delete()
	n.run()
	if len(a.ep.SAs()) != 0 || len(b.ep.SAs()) != 0 {
		t.Fatalf("SAs left after delete: A %d B %d", len(a.ep.SAs()), len(b.ep.SAs()))
	}

	// A dead peer.
	ca, cb = v1Configs("aes128-sha1-modp2048", "aes128-sha1")
	ca.DPDDelay = 10 * time.Second
	n, a, _ = twoPeers(t, ca, cb)
	a.ep.Initiate(ca)
	n.run()
	n.detach(netip.MustParseAddr(addrB))
	n.step(40*time.Second, 500*time.Millisecond)
	f := a.lastFailure()
	if f == nil || f.Reason != ReasonPeerTimeout || !strings.Contains(f.Error(), "DPD R-U-THERE") {
		t.Fatalf("got %v, want no answer to DPD", f)
	}
	if len(a.pairList()) != 0 || len(a.ep.SAs()) != 0 {
		t.Errorf("dead peer's SAs still installed")
	}
}

func TestV1Rekeys(t *testing.T) {
	for _, pfs := range []string{"aes128-sha1", "aes128-sha1-modp2048"} {
		t.Run(pfs, func(t *testing.T) {
			ca, cb := v1Configs("aes128-sha1-modp2048", pfs)
			ca.ChildLifetime, cb.ChildLifetime = 20*time.Second, 60*time.Second
			ca.IKELifetime, cb.IKELifetime = 50*time.Second, 200*time.Second
			n, a, b := twoPeers(t, ca, cb)
			a.ep.Initiate(ca)
			n.run()
			first := a.ups[0].In.SPI
			n.step(30*time.Second, 250*time.Millisecond)
			checkPairs(t, a, b, 1)
			if len(a.ups) < 2 || a.ups[1].Replaces != first {
				t.Fatalf("no phase 2 rekey in 30 s with a 20 s lifetime: %d ups", len(a.ups))
			}
			n.step(40*time.Second, 250*time.Millisecond)
			checkPairs(t, a, b, 1)
			if len(a.ep.SAs()) != 1 || len(b.ep.SAs()) != 1 || a.ikeUps < 2 {
				t.Fatalf("after a phase 1 rekey: A %d SAs (%d up events), B %d", len(a.ep.SAs()), a.ikeUps, len(b.ep.SAs()))
			}
			for _, p := range []*peer{a, b} {
				if f := p.lastFailure(); f != nil {
					t.Errorf("%s: %v", p.name, f)
				}
			}
			// B's answer carried RESPONDER-LIFETIME? Not here: A asked less.
			// A child made on the new ISAKMP SA works (SKEYID_d of the new one).
			n.step(30*time.Second, 250*time.Millisecond)
			checkPairs(t, a, b, 1)
		})
	}
}

// TestV1PhaseOneRekeyKeepsOldSA: after our phase 1 rekey the old ISAKMP SA
// is REKEYED and deleted only v1RetireDelay later. strongSwan moves the
// phase 2 SAs to the new ISAKMP SA in a job of its own after main mode
// and ends those still under an ISAKMP SA deleted before that job ran;
// our DELETE right after message 6 overtook that job on a busy machine
// and left a TCP stream through the tunnel going nowhere
// (TestIKEv1StrongSwan under make test).
// establishedV1Pair: A and B with one ISAKMP SA and one phase 2 SA pair
// between them, one second old, and their ISAKMP SAs.
func establishedV1Pair(t *testing.T) (n *testNet, a, b *peer, saA, saB *IKESA) {
	t.Helper()
	ca, cb := v1Configs("aes128-sha1-modp2048", "aes128-sha1")
	n, a, b = twoPeers(t, ca, cb)
	a.ep.Initiate(ca)
	n.run()
	n.step(time.Second, 250*time.Millisecond)
	return n, a, b, a.established()[0], b.established()[0]
}

func TestV1PhaseOneRekeyKeepsOldSA(t *testing.T) {
	n, a, b, oldA, oldB := establishedV1Pair(t)
	if err := oldA.RekeyIKE(); err != nil {
		t.Fatal(err)
	}
	n.run()
	checkPairs(t, a, b, 1)
	newA, newB := a.established(), b.established()
	if len(newA) != 1 || newA[0] == oldA || len(newB) != 1 || newB[0] == oldB {
		t.Fatalf("after the phase 1 rekey: A has %d established ISAKMP SAs, B %d, want the new one each", len(newA), len(newB))
	}
	for _, x := range []struct {
		name     string
		old, new *IKESA
	}{{"A", oldA, newA[0]}, {"B", oldB, newB[0]}} {
		if st := x.old.State(); st != StateRekeyed {
			t.Errorf("%s's old ISAKMP SA is %v right after the rekey, want REKEYED (not deleted yet)", x.name, st)
		}
		if len(x.new.Status().Children) != 1 || len(x.old.Status().Children) != 0 {
			t.Errorf("%s: the new ISAKMP SA holds %d phase 2 SAs, the old one %d, want 1 and 0", x.name, len(x.new.Status().Children), len(x.old.Status().Children))
		}
	}
	if !oldA.Replaced(newA[0]) {
		t.Errorf("A's old ISAKMP SA does not name the new one as its successor")
	}
	n.step(v1RetireDelay-time.Second, 250*time.Millisecond)
	if st := oldB.State(); st == StateDead {
		t.Fatalf("B's old ISAKMP SA was deleted within %v of the phase 1 rekey", v1RetireDelay-time.Second)
	}
	n.step(2*time.Second, 250*time.Millisecond)
	if len(a.ep.SAs()) != 1 || len(b.ep.SAs()) != 1 {
		t.Fatalf("%v after the phase 1 rekey: A has %d ISAKMP SAs, B %d, want 1 each", v1RetireDelay+time.Second, len(a.ep.SAs()), len(b.ep.SAs()))
	}
	checkPhaseOneRekeyKeptChildren(t, a, b)
}

// checkPhaseOneRekeyKeptChildren: after a phase 1 rekey both peers have
// their pair of phase 2 SAs, held by the new ISAKMP SA, with no failure
// and no phase 2 SA gone down on the way.
func checkPhaseOneRekeyKeptChildren(t *testing.T, a, b *peer) {
	t.Helper()
	checkPairs(t, a, b, 1)
	for _, p := range []*peer{a, b} {
		if sas := p.established(); len(sas) != 1 || len(sas[0].Status().Children) != 1 {
			t.Errorf("%s: the new ISAKMP SA does not hold the phase 2 SA", p.name)
		}
		if f := p.lastFailure(); f != nil {
			t.Errorf("%s: %v", p.name, f)
		}
		if len(p.downs) != 0 {
			t.Errorf("%s: phase 2 SAs went down across the phase 1 rekey: %v", p.name, p.downs)
		}
	}
}

// TestV1PhaseOneRekeyOldSABusy: the responder's old ISAKMP SA is busy
// (another goroutine holds it: a timer, a status query) while the new one
// finishes main mode, so the new one cannot take the phase 2 SAs over at
// once. They must still end up under the new one, and live on when the
// old one is deleted, instead of going down with it at our end only.
func TestV1PhaseOneRekeyOldSABusy(t *testing.T) {
	n, a, b, oldA, oldB := establishedV1Pair(t)
	// B's old SA is held from before message 5 until A sends anything
	// after message 6 (or the exchange is over).
	var release sync.Once
	unlock := func() { release.Do(oldB.mu.Unlock) }
	defer unlock()
	sawMM6 := false
	n.SetDrop(func(d iketest.Datagram) bool {
		p := d.Pkt
		if len(p) >= 4 && p[0]|p[1]|p[2]|p[3] == 0 {
			p = p[4:]
		}
		fromB := d.From.Addr() == netip.MustParseAddr(addrB)
		if fromB && len(p) >= HeaderLen && v1Exchange(p[18]) == v1MainMode && p[19]&v1FlagEncrypted != 0 {
			sawMM6 = true
		} else if sawMM6 && !fromB {
			unlock()
		}
		return false
	})
	oldB.mu.Lock()
	if err := oldA.RekeyIKE(); err != nil {
		t.Fatal(err)
	}
	n.run()
	unlock()
	n.SetDrop(nil)
	if !sawMM6 {
		t.Fatal("main mode did not finish")
	}
	n.step(v1RetireDelay+2*time.Second, 250*time.Millisecond)
	if len(a.ep.SAs()) != 1 || len(b.ep.SAs()) != 1 {
		t.Fatalf("A has %d ISAKMP SAs, B %d, want the new one each", len(a.ep.SAs()), len(b.ep.SAs()))
	}
	checkPhaseOneRekeyKeptChildren(t, a, b)
}

func TestV1ResponderLifetime(t *testing.T) {
	ca, cb := v1Configs("aes128-sha1-modp2048", "aes128-sha1")
	ca.ChildLifetime, cb.ChildLifetime = time.Hour, 100*time.Second
	n, a, b := twoPeers(t, ca, cb)
	a.ep.Initiate(ca)
	n.run()
	checkPairs(t, a, b, 1)
	c := a.established()[0].Status().Children[0]
	// B allows 110 s (its hard lifetime); A rekeys before that.
	if d := c.RekeyAt.Sub(c.Established); d > 110*time.Second || d < 80*time.Second {
		t.Errorf("A rekeys after %v, want within B's responder lifetime of 110 s", d)
	}
}

func TestV1NAT(t *testing.T) {
	ca, cb := v1Configs("aes128-sha1-modp2048", "aes128-sha1")
	cb.Remote = netip.MustParseAddrPort("198.51.100.1:500")
	n := newTestNet(t)
	n.SetNAT(&iketest.NAT{Private: netip.MustParseAddr(addrA), Public: netip.MustParseAddr("198.51.100.1")})
	a := n.addPeer("A", addrA, ca, nil)
	b := n.addPeer("B", addrB, cb, nil)
	a.ep.Initiate(ca)
	n.run()
	checkPairs(t, a, b, 1)
	sa, sb := a.established()[0].Status(), b.established()[0].Status()
	if !sa.NATLocal || sa.NATRemote || sb.NATLocal || !sb.NATRemote {
		t.Errorf("NAT detection: A %v/%v, B %v/%v", sa.NATLocal, sa.NATRemote, sb.NATLocal, sb.NATRemote)
	}
	if sa.Local.Port() != 4500 || sb.Local.Port() != 4500 {
		t.Errorf("not floated to 4500: A %v B %v", sa.Local, sb.Local)
	}
	if got := b.ups[0].Out.EncapDstPort; got != 44500 {
		t.Errorf("B sends ESP to port %d, want A's NAT mapping 44500", got)
	}
	n.step(30*time.Second, time.Second)
	if n.keepalives == 0 {
		t.Errorf("no NAT keepalives from the side behind the NAT")
	}
}

// A tunnel set to the other IKE version says so instead of staying silent.
func TestV1VersionMismatchSaysSo(t *testing.T) {
	ca, cb := v1Configs("aes128-sha1-modp2048", "aes128-sha1")
	cb.Version = 2
	n, a, b := twoPeers(t, ca, cb)
	a.ep.Initiate(ca)
	n.run()
	if f := b.firstFailure(); f == nil || f.Reason != ReasonWrongVersion || !strings.Contains(f.Error(), "the peer speaks IKEv1 main mode; set ike_version 1") {
		t.Errorf("IKEv2 tunnel receiving IKEv1 says %v", f)
	}
	ca, cb = pairConfigs("aes128-sha1-modp2048", "aes128-sha1")
	cb.Version = 1
	n, a, b = twoPeers(t, ca, cb)
	a.ep.Initiate(ca)
	n.run()
	if f := b.firstFailure(); f == nil || f.Reason != ReasonWrongVersion || !strings.Contains(f.Error(), "the peer speaks IKEv2; set ike_version 2") {
		t.Errorf("IKEv1 tunnel receiving IKEv2 says %v", f)
	}
}

func TestV1AggressiveModeRefused(t *testing.T) {
	ca, cb := v1Configs("aes128-sha1-modp2048", "aes128-sha1")
	n, a, b := twoPeers(t, ca, cb)
	_ = a
	sa := (&v1SAPayload{Proposals: []v1Prop{{Number: 1, Protocol: v1ProtoISAKMP,
		Transforms: v1Phase1Transforms(ca.ikeProposals(), time.Hour)}}}).encode()
	pkt := encodeV1Plain(v1Header{CkyI: 0x1122334455667788, Exchange: v1Aggressive}, []v1Payload{{v1SA, sa}})
	n.send(pkt, ca.Local, cb.Local)
	n.run()
	f := b.firstFailure()
	if f == nil || !strings.Contains(f.Error(), "aggressive mode") || !strings.Contains(f.Error(), "offline") {
		t.Fatalf("aggressive mode: %v", f)
	}
	if len(b.ep.SAs()) != 0 {
		t.Errorf("aggressive mode made state")
	}
	// The refusal went back, unprotected.
	var refusal bool
	for _, d := range n.Wire() {
		if d.From.Addr() == cb.Local.Addr() && bytes.Contains(d.Pkt, []byte{0, byte(v1InvalidExchangeType)}) {
			refusal = true
		}
	}
	if !refusal {
		t.Errorf("no INVALID-EXCHANGE-TYPE sent back")
	}
}

// TestV1InitialContact: a peer that restarts sends INITIAL-CONTACT in main
// mode message 5 of its first ISAKMP SA, and the responder drops what it
// still held with that peer (the old ISAKMP SA and its phase 2 SAs are gone
// at the peer's end) instead of taking them over as in a phase 1 rekey. A
// second ISAKMP SA from a peer that did not restart carries no
// INITIAL-CONTACT: it takes the first one's phase 2 SAs over instead.
func TestV1InitialContact(t *testing.T) {
	t.Run("peer restarts", func(t *testing.T) {
		ca, cb := v1Configs("aes128-sha1-modp2048", "aes128-sha1")
		n, a, _ := twoPeers(t, ca, cb)
		a.ep.Initiate(ca)
		n.run()
		old := a.established()
		if len(old) != 1 {
			t.Fatalf("A has %d ISAKMP SAs before the restart, want 1", len(old))
		}
		// B restarts: a fresh engine with the same config initiates.
		b2 := n.addPeer("B2", addrB, cb, nil)
		if _, err := b2.ep.Initiate(cb); err != nil {
			t.Fatal(err)
		}
		n.run()
		if got := a.established(); len(got) != 1 || got[0] == old[0] {
			t.Fatalf("A has %d established ISAKMP SAs after the peer restarted (the old one kept: %v), want only the new one", len(got), len(got) > 0 && got[0] == old[0])
		}
		if f := a.lastFailure(); f == nil || f.Reason != ReasonPeerRestarted {
			t.Errorf("A reports %v, want the peer restarted", f)
		}
		if st := old[0].State(); st != StateDead && st != StateDeleting {
			t.Errorf("A's old ISAKMP SA is %v, want it gone", st)
		}
		checkPairs(t, a, b2, 1)
	})
	t.Run("second SA without restart", func(t *testing.T) {
		ca, cb := v1Configs("aes128-sha1-modp2048", "aes128-sha1")
		n, a, b := twoPeers(t, ca, cb)
		a.ep.Initiate(ca)
		n.run()
		first := b.established()
		b.ep.Initiate(cb)
		n.run()
		if len(first) != 1 || first[0].State() == StateDead {
			t.Fatalf("B's first ISAKMP SA is gone after B's own second one: INITIAL-CONTACT sent when it was not the first contact")
		}
		if f := a.lastFailure(); f != nil && f.Reason == ReasonPeerRestarted {
			t.Errorf("A took B's second ISAKMP SA for a restart: %v", f)
		}
		// Without INITIAL-CONTACT a new ISAKMP SA is a phase 1 rekey: it
		// takes over the phase 2 SAs and the first becomes REKEYED.
		if st := first[0].State(); st != StateRekeyed {
			t.Errorf("B's first ISAKMP SA is %v after B's second, want REKEYED (taken over, not dropped)", st)
		}
		checkPairs(t, a, b, 1)
	})
}
