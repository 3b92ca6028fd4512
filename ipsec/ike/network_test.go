package ike

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/ike/iketest"
)

// testNet is the in-memory network of package iketest, delivering to
// this package's test peers: datagrams to a peer's NAT-T port are
// separated the way iked's socket does it (ClassifyNATT), ESP and
// keepalives counted.
type testNet struct {
	*iketest.Network
	t     testing.TB
	clock *iketest.Clock

	mu              sync.Mutex
	eps             map[netip.Addr]*peer
	esp, keepalives int
}

func newTestNet(t testing.TB) *testNet {
	nw := iketest.NewNetwork()
	return &testNet{Network: nw, t: t, clock: nw.Clock, eps: map[netip.Addr]*peer{}}
}

func (n *testNet) send(pkt []byte, local, remote netip.AddrPort) error {
	return n.Send(pkt, local, remote)
}

// attach puts p on the network at addr.
func (n *testNet) attach(addr netip.Addr, p *peer) {
	n.mu.Lock()
	n.eps[addr] = p
	n.mu.Unlock()
	n.Attach(addr, func(pkt []byte, local, remote netip.AddrPort) {
		if local.Port() == p.ep.cfg.NATTPort {
			kind, ike := ClassifyNATT(pkt)
			switch kind {
			case NATTIKE:
				pkt = ike
			case NATTKeepalive:
				n.mu.Lock()
				n.keepalives++
				n.mu.Unlock()
				return
			default:
				n.mu.Lock()
				n.esp++
				n.mu.Unlock()
				return
			}
		}
		p.ep.HandleMessage(pkt, local, remote)
	})
}

// detach takes the peer at addr off the network.
func (n *testNet) detach(addr netip.Addr) {
	n.mu.Lock()
	delete(n.eps, addr)
	n.mu.Unlock()
	n.Detach(addr)
}

// run delivers queued datagrams until the network is quiet.
func (n *testNet) run() {
	if err := n.Run(); err != nil {
		n.t.Fatal(err)
	}
}

// step advances the clock in small steps, running timers and the network.
func (n *testNet) step(total, by time.Duration) {
	for el := time.Duration(0); el < total; el += by {
		n.clock.Advance(by)
		n.mu.Lock()
		peers := make([]*peer, 0, len(n.eps))
		for _, p := range n.eps {
			peers = append(peers, p)
		}
		n.mu.Unlock()
		for _, p := range peers {
			p.ep.Tick()
		}
		n.run()
	}
}

// peer is one IKE endpoint with a pretend data plane that records pairs.
type peer struct {
	name string
	ep   *Endpoint
	cfg  *PeerConfig

	mu        sync.Mutex
	pairs     map[uint32][2]*ipsec.ChildSA // by inbound SPI
	ups       []ChildUp
	downs     []error
	ikeUps    int
	ikeDowns  []error
	failures  []error
	childDown map[uint32]error
}

func (n *testNet) addPeer(name string, addr string, cfg *PeerConfig, tweak func(*EndpointConfig)) *peer {
	p := &peer{name: name, cfg: cfg, pairs: map[uint32][2]*ipsec.ChildSA{}, childDown: map[uint32]error{}}
	ec := EndpointConfig{
		Send: n.send, Now: n.clock.Now,
		PeerFor: func(local, remote netip.AddrPort) *PeerConfig { return p.cfg },
		Events: Events{
			ChildUp: func(u ChildUp) {
				p.mu.Lock()
				defer p.mu.Unlock()
				p.pairs[u.In.SPI] = [2]*ipsec.ChildSA{u.In, u.Out}
				p.ups = append(p.ups, u)
			},
			ChildDown: func(sa *IKESA, spi uint32, reason error) {
				p.mu.Lock()
				defer p.mu.Unlock()
				delete(p.pairs, spi)
				p.downs = append(p.downs, reason)
				p.childDown[spi] = reason
			},
			IKEUp: func(*IKESA) { p.mu.Lock(); p.ikeUps++; p.mu.Unlock() },
			IKEDown: func(sa *IKESA, reason error) {
				p.mu.Lock()
				p.ikeDowns = append(p.ikeDowns, reason)
				p.mu.Unlock()
			},
			Failure: func(_ *PeerConfig, reason error) { p.mu.Lock(); p.failures = append(p.failures, reason); p.mu.Unlock() },
		},
	}
	if tweak != nil {
		tweak(&ec)
	}
	ep, err := NewEndpoint(ec)
	if err != nil {
		n.t.Fatal(err)
	}
	p.ep = ep
	n.attach(netip.MustParseAddr(addr), p)
	return p
}

func (p *peer) pairList() [][2]*ipsec.ChildSA {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out [][2]*ipsec.ChildSA
	for _, v := range p.pairs {
		out = append(out, v)
	}
	return out
}

func (p *peer) established() []*IKESA {
	var out []*IKESA
	for _, sa := range p.ep.SAs() {
		if sa.State() == StateEstablished {
			out = append(out, sa)
		}
	}
	return out
}

// firstFailure returns the first Failure reported by any event.
func (p *peer) firstFailure() *Failure {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range append(append(append([]error(nil), p.failures...), p.ikeDowns...), p.downs...) {
		var f *Failure
		if errors.As(e, &f) {
			return f
		}
	}
	return nil
}

// lastFailure returns the last Failure reported by any event.
func (p *peer) lastFailure() *Failure {
	p.mu.Lock()
	defer p.mu.Unlock()
	all := append(append(append([]error(nil), p.failures...), p.ikeDowns...), p.downs...)
	for i := len(all) - 1; i >= 0; i-- {
		var f *Failure
		if errors.As(all[i], &f) {
			return f
		}
	}
	return nil
}

func pfx(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, x := range s {
		out = append(out, netip.MustParsePrefix(x))
	}
	return out
}

func mustID(s string) Identity {
	id, err := ParseIdentity(s)
	if err != nil {
		panic(err)
	}
	return id
}

const (
	addrA = "10.10.0.1"
	addrB = "10.10.0.2"
)

// pairConfigs are matching configurations for gateways A and B as in
// interop.md: A protects 10.10.1.0/24, B 10.10.2.0/24.
func pairConfigs(ike, esp string) (*PeerConfig, *PeerConfig) {
	a := &PeerConfig{Name: "s2s", Local: netip.MustParseAddrPort(addrA + ":500"), Remote: netip.MustParseAddrPort(addrB + ":500"),
		LocalID: mustID("gwA"), RemoteID: mustID("gwB"), PSK: []byte("correct horse battery staple"),
		IKEProposals: MustParseProposals(ProtoIKE, ike), ESPProposals: MustParseProposals(ProtoESP, esp),
		LocalTS: pfx("10.10.1.0/24"), RemoteTS: pfx("10.10.2.0/24")}
	b := &PeerConfig{Name: "s2s", Local: netip.MustParseAddrPort(addrB + ":500"), Remote: netip.MustParseAddrPort(addrA + ":500"),
		LocalID: mustID("gwB"), RemoteID: mustID("gwA"), PSK: []byte("correct horse battery staple"),
		IKEProposals: MustParseProposals(ProtoIKE, ike), ESPProposals: MustParseProposals(ProtoESP, esp),
		LocalTS: pfx("10.10.2.0/24"), RemoteTS: pfx("10.10.1.0/24")}
	return a, b
}

func twoPeers(t testing.TB, ca, cb *PeerConfig) (*testNet, *peer, *peer) {
	n := newTestNet(t)
	return n, n.addPeer("A", addrA, ca, nil), n.addPeer("B", addrB, cb, nil)
}

// checkPairs verifies each side has want pairs and that every outbound SA
// of one side is the inbound SA of the other, with the same keys.
func checkPairs(t *testing.T, a, b *peer, want int) {
	t.Helper()
	pa, pb := a.pairList(), b.pairList()
	if len(pa) != want || len(pb) != want {
		t.Fatalf("CHILD_SA pairs: A has %d, B has %d, want %d each", len(pa), len(pb), want)
	}
	for _, x := range pa {
		in, out := x[0], x[1]
		y, ok := b.pairs[out.SPI]
		if !ok {
			t.Fatalf("A's outbound SPI %08x is not one of B's inbound SPIs", out.SPI)
		}
		if y[1].SPI != in.SPI {
			t.Errorf("A's pair %08x/%08x, B's %08x/%08x: not mirrored", in.SPI, out.SPI, y[0].SPI, y[1].SPI)
		}
		if !bytes.Equal(out.EncKey, y[0].EncKey) || !bytes.Equal(out.IntegKey, y[0].IntegKey) ||
			!bytes.Equal(in.EncKey, y[1].EncKey) || !bytes.Equal(in.IntegKey, y[1].IntegKey) {
			t.Errorf("pair %08x: keys differ between A and B", in.SPI)
		}
		if bytes.Equal(in.EncKey, out.EncKey) {
			t.Errorf("pair %08x: both directions use the same key", in.SPI)
		}
		if in.ReqID != out.ReqID || in.Transform != y[0].Transform {
			t.Errorf("pair %08x: reqid %d/%d, transforms %+v/%+v", in.SPI, in.ReqID, out.ReqID, in.Transform, y[0].Transform)
		}
	}
}

var fiveSuites = []struct{ ike, esp string }{
	{"aes128gcm16-prfsha256-ecp256", "aes128gcm16"},
	{"aes256gcm16-prfsha384-ecp384", "aes256gcm16"},
	{"aes256-sha256-modp2048", "aes256-sha256"},
	{"aes128-sha1-modp2048", "aes128-sha1"},
	{"chacha20poly1305-prfsha256-curve25519", "chacha20poly1305"},
}

func TestEstablish(t *testing.T) {
	for _, s := range fiveSuites {
		for _, aInitiates := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/A-initiates=%v", s.ike, aInitiates), func(t *testing.T) {
				ca, cb := pairConfigs(s.ike, s.esp)
				n, a, b := twoPeers(t, ca, cb)
				init, resp := a, b
				if !aInitiates {
					init, resp = b, a
				}
				if _, err := init.ep.Initiate(init.cfg); err != nil {
					t.Fatal(err)
				}
				n.run()
				checkPairs(t, a, b, 1)
				for _, p := range []*peer{a, b} {
					sas := p.established()
					if len(sas) != 1 {
						t.Fatalf("%s: %d established IKE SAs, want 1", p.name, len(sas))
					}
					st := sas[0].Status()
					if st.Proposal != s.ike {
						t.Errorf("%s: IKE proposal %q, want %q", p.name, st.Proposal, s.ike)
					}
					if p.ups[0].Proposal.String() != s.esp {
						t.Errorf("%s: ESP proposal %q, want %q", p.name, p.ups[0].Proposal, s.esp)
					}
					in := p.ups[0].In
					want, _ := MustParseProposals(ProtoESP, s.esp)[0].ESPTransform()
					if in.Transform != want {
						t.Errorf("%s: transform %+v, want %+v", p.name, in.Transform, want)
					}
					if in.EncapDstPort != 0 {
						t.Errorf("%s: ESP encapsulated without NAT", p.name)
					}
					if st.Initiator != (p == init) {
						t.Errorf("%s: initiator flag %v", p.name, st.Initiator)
					}
				}
				if got := a.ups[0].In.LocalTS; len(got) != 1 || got[0] != netip.MustParsePrefix("10.10.1.0/24") {
					t.Errorf("A's local TS %v, want 10.10.1.0/24", got)
				}
				if got := a.ups[0].In.Src; got != netip.MustParseAddr(addrB) {
					t.Errorf("A's inbound SA source %v, want B's address", got)
				}
				if init.ep.Stats.Malformed.Load()+resp.ep.Stats.Malformed.Load()+resp.ep.Stats.BadICV.Load() != 0 {
					t.Errorf("drops during a clean exchange")
				}
			})
		}
	}
}

func TestNarrowing(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	ca.LocalTS, ca.RemoteTS = pfx("10.10.0.0/16"), pfx("10.0.0.0/8")
	cb.LocalTS, cb.RemoteTS = pfx("10.10.2.0/24"), pfx("10.10.1.0/24")
	n, a, b := twoPeers(t, ca, cb)
	a.ep.Initiate(ca)
	n.run()
	checkPairs(t, a, b, 1)
	in := a.ups[0].In
	if len(in.LocalTS) != 1 || in.LocalTS[0] != netip.MustParsePrefix("10.10.1.0/24") ||
		len(in.RemoteTS) != 1 || in.RemoteTS[0] != netip.MustParsePrefix("10.10.2.0/24") {
		t.Errorf("A after narrowing: local %v remote %v, want 10.10.1.0/24 and 10.10.2.0/24", in.LocalTS, in.RemoteTS)
	}
}

func TestFailuresSayWhy(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(a, b *PeerConfig)
		reason Reason
		aSays  string // substring of the initiator's message
		bSays  string // substring of the responder's message
	}{
		{"psk mismatch", func(a, b *PeerConfig) { b.PSK = []byte("wrong") }, ReasonAuthenticationFailed,
			"answered AUTHENTICATION_FAILED", "pre-shared key mismatch"},
		{"id mismatch", func(a, b *PeerConfig) { b.RemoteID = mustID("someone-else") }, ReasonAuthenticationFailed,
			"answered AUTHENTICATION_FAILED", "peer calls itself gwA, we expect someone-else"},
		{"IKE proposal mismatch", func(a, b *PeerConfig) { b.IKEProposals = MustParseProposals(ProtoIKE, "aes256-sha256-modp2048") }, ReasonNoProposalChosen,
			"answered NO_PROPOSAL_CHOSEN to IKE_SA_INIT: we offered aes128gcm16-prfsha256-ecp256",
			"peer offered aes128gcm16-prfsha256-ecp256, we accept aes256-sha256-modp2048"},
		{"ESP proposal mismatch", func(a, b *PeerConfig) { b.ESPProposals = MustParseProposals(ProtoESP, "aes256-sha256") }, ReasonNoProposalChosen,
			"answered NO_PROPOSAL_CHOSEN to IKE_AUTH: we offered aes128gcm16",
			"peer offered aes128gcm16, we accept aes256-sha256"},
		{"TS mismatch", func(a, b *PeerConfig) { b.RemoteTS = pfx("192.168.0.0/24") }, ReasonTSUnacceptable,
			"answered TS_UNACCEPTABLE to IKE_AUTH: we proposed local 10.10.1.0/24, remote 10.10.2.0/24",
			"peer proposed its side 10.10.1.0/24 and ours 10.10.2.0/24; we are configured with local 10.10.2.0/24, remote 192.168.0.0/24"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
			tt.mutate(ca, cb)
			n, a, b := twoPeers(t, ca, cb)
			a.ep.Initiate(ca)
			n.run()
			n.step(time.Second, 100*time.Millisecond)
			fa, fb := a.firstFailure(), b.firstFailure()
			if fa == nil || fb == nil {
				t.Fatalf("failures: A %v, B %v; want both", fa, fb)
			}
			if fa.Reason != tt.reason || !fa.ByPeer || !bytes.Contains([]byte(fa.Error()), []byte(tt.aSays)) {
				t.Errorf("A (initiator) says %q (reason %v, by peer %v); want %v reported by the peer, containing %q", fa, fa.Reason, fa.ByPeer, tt.reason, tt.aSays)
			}
			if fb.Reason != tt.reason || fb.ByPeer || !bytes.Contains([]byte(fb.Error()), []byte(tt.bSays)) {
				t.Errorf("B (responder) says %q (reason %v, by peer %v); want %v decided locally, containing %q", fb, fb.Reason, fb.ByPeer, tt.reason, tt.bSays)
			}
			if len(a.pairList())+len(b.pairList()) != 0 {
				t.Errorf("CHILD_SAs installed despite the failure")
			}
			if got := len(a.ep.SAs()); got != 0 {
				t.Errorf("A keeps %d IKE SAs after a failed setup", got)
			}
			// A closes an IKE SA whose first CHILD_SA failed; B follows.
			if len(b.ep.SAs()) != 0 {
				t.Errorf("B keeps %d IKE SAs after a failed setup", len(b.ep.SAs()))
			}
		})
	}
}

func TestLostPacketsRetransmitted(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	n, a, b := twoPeers(t, ca, cb)
	// Lose A's first IKE_SA_INIT and B's first IKE_AUTH response.
	lost := map[string]bool{}
	n.SetDrop(func(d iketest.Datagram) bool {
		h, err := DecodeHeader(bytes.TrimPrefix(d.Pkt, nonESPMarker))
		if err != nil {
			return false
		}
		key := fmt.Sprintf("%v/%v", h.Exchange, h.IsResponse())
		if (key == "IKE_SA_INIT/false" || key == "IKE_AUTH/true") && !lost[key] {
			lost[key] = true
			return true
		}
		return false
	})
	a.ep.Initiate(ca)
	n.run()
	n.step(3*time.Second, 100*time.Millisecond)
	checkPairs(t, a, b, 1)
	if got := a.ep.Stats.Retransmits.Load(); got != 2 {
		t.Errorf("A retransmitted %d times, want 2 (IKE_SA_INIT and IKE_AUTH)", got)
	}
	if got := b.ep.Stats.RetransmitsAnswered.Load(); got != 1 {
		t.Errorf("B answered %d retransmissions from its cache, want 1", got)
	}
	if len(b.ups) != 1 {
		t.Errorf("B installed %d CHILD_SAs; a retransmitted IKE_AUTH must not make a second", len(b.ups))
	}
}

func TestNoAnswer(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	n, a, _ := twoPeers(t, ca, cb)
	n.SetDrop(func(iketest.Datagram) bool { return true })
	a.ep.Initiate(ca)
	n.step(20*time.Second, 100*time.Millisecond)
	f := a.lastFailure()
	if f == nil || f.Reason != ReasonPeerTimeout || f.Tries != 5 {
		t.Fatalf("got %v, want a timeout after 5 tries", f)
	}
	// 0.5 + 1 + 2 + 4 + 8 s of backoff.
	if f.After < 15*time.Second || f.After > 16*time.Second {
		t.Errorf("gave up after %v, want about 15.5 s", f.After)
	}
	want := "no answer from peer 10.10.0.2:500 to IKE_SA_INIT after 5 tries in 15.5s"
	if f.Error() != want {
		t.Errorf("message %q, want %q", f.Error(), want)
	}
	if n.WireLen() != 5 {
		t.Errorf("%d datagrams sent, want 5", n.WireLen())
	}
}

func establish(t *testing.T, ca, cb *PeerConfig) (*testNet, *peer, *peer) {
	t.Helper()
	n, a, b := twoPeers(t, ca, cb)
	if _, err := a.ep.Initiate(ca); err != nil {
		t.Fatal(err)
	}
	n.run()
	checkPairs(t, a, b, 1)
	return n, a, b
}

func TestChildRekey(t *testing.T) {
	for _, esp := range []string{"aes128gcm16", "aes256-sha256-modp2048"} {
		t.Run(esp, func(t *testing.T) {
			ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", esp)
			ca.ChildLifetime = 20 * time.Second
			n, a, b := establish(t, ca, cb)
			old := a.pairList()[0][0].SPI
			n.step(25*time.Second, 250*time.Millisecond)
			checkPairs(t, a, b, 1)
			if a.pairList()[0][0].SPI == old {
				t.Fatal("CHILD_SA not rekeyed after its lifetime")
			}
			if err, ok := a.childDown[old]; !ok || err != nil {
				t.Errorf("old pair: ChildDown %v (seen %v), want a nil reason", err, ok)
			}
			if a.ups[1].Replaces != old || a.ups[1].ReqID != a.ups[0].ReqID {
				t.Errorf("new pair replaces %08x with reqid %d, want %08x and %d", a.ups[1].Replaces, a.ups[1].ReqID, old, a.ups[0].ReqID)
			}
			if esp == "aes256-sha256-modp2048" && a.ups[1].Proposal.String() != esp {
				t.Errorf("rekeyed with %v, want PFS %s", a.ups[1].Proposal, esp)
			}
		})
	}
}

func TestSimultaneousChildRekey(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	n, a, b := establish(t, ca, cb)
	sa, sb := a.established()[0], b.established()[0]
	// Both start before either request is delivered.
	if err := sa.RekeyChild(a.pairList()[0][0].SPI); err != nil {
		t.Fatal(err)
	}
	if err := sb.RekeyChild(b.pairList()[0][0].SPI); err != nil {
		t.Fatal(err)
	}
	n.run()
	n.step(time.Second, 100*time.Millisecond)
	checkPairs(t, a, b, 1)
	// A collision makes two replacements; the loser's own is never
	// installed: 2 initial + 2 made as responder + the winner's own.
	if got := len(a.ups) + len(b.ups); got != 5 {
		t.Errorf("%d ChildUp events in all, want 5 (was there a collision?)", got)
	}
	for _, p := range []*peer{a, b} {
		for _, r := range p.downs {
			if r != nil {
				t.Errorf("%s: a pair went down with reason %v during a collision", p.name, r)
			}
		}
	}
}

func TestIKERekey(t *testing.T) {
	ca, cb := pairConfigs("aes256-sha256-modp2048", "aes128gcm16")
	ca.IKELifetime = 60 * time.Second
	ca.DPDDelay = 30 * time.Second
	n, a, b := establish(t, ca, cb)
	oldA := a.established()[0].Status()
	n.step(70*time.Second, 500*time.Millisecond)
	for _, p := range []*peer{a, b} {
		sas := p.ep.SAs()
		if len(sas) != 1 || sas[0].State() != StateEstablished {
			t.Fatalf("%s: %d IKE SAs after rekey, want exactly one established", p.name, len(sas))
		}
		st := sas[0].Status()
		if st.SPIi == oldA.SPIi || st.SPIr == oldA.SPIr {
			t.Errorf("%s: SPIs %x/%x unchanged", p.name, st.SPIi, st.SPIr)
		}
		if len(st.Children) != 1 {
			t.Errorf("%s: %d children moved to the new IKE SA, want 1", p.name, len(st.Children))
		}
		for _, r := range p.ikeDowns {
			if r != nil {
				t.Errorf("%s: IKE SA went down with %v", p.name, r)
			}
		}
	}
	checkPairs(t, a, b, 1)
	// The new SA works: DPD over it and a child rekey.
	n.step(40*time.Second, time.Second)
	if len(a.established()) != 1 || a.lastFailure() != nil {
		t.Errorf("after DPD on the new SA: %d established, failure %v", len(a.established()), a.lastFailure())
	}
}

func TestSimultaneousIKERekey(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	n, a, b := establish(t, ca, cb)
	sa, sb := a.established()[0], b.established()[0]
	if err := sa.RekeyIKE(); err != nil {
		t.Fatal(err)
	}
	if err := sb.RekeyIKE(); err != nil {
		t.Fatal(err)
	}
	n.run()
	n.step(2*time.Second, 100*time.Millisecond)
	for _, p := range []*peer{a, b} {
		checkOneIKESA(t, p, 1, "a collision")
	}
	if a.ep.SAs()[0].Status().SPIi != b.ep.SAs()[0].Status().SPIi {
		t.Errorf("A and B kept different IKE SAs")
	}
	checkPairs(t, a, b, 1)
}

// TestIKERekeyCollisionSeenByOneSide: both sides rekey the IKE SA, but
// A's request is lost, so only A sees a collision. B completes its rekey
// and deletes the old SA before A's own rekey is answered (strongSwan does
// this when it drops a request it cannot route yet). The old SA's DELETE
// must find the children moved to B's new SA, not take them down.
func TestIKERekeyCollisionSeenByOneSide(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	n, a, b := establish(t, ca, cb)
	sa, sb := a.established()[0], b.established()[0]
	dropped := false
	n.SetDrop(func(d iketest.Datagram) bool {
		h, err := DecodeHeader(d.Pkt)
		if dropped || err != nil || d.From.Addr() != netip.MustParseAddr(addrA) || h.Exchange != CREATE_CHILD_SA || h.IsResponse() {
			return false
		}
		dropped = true
		return true
	})
	if err := sa.RekeyIKE(); err != nil {
		t.Fatal(err)
	}
	if err := sb.RekeyIKE(); err != nil {
		t.Fatal(err)
	}
	n.run()
	if !dropped {
		t.Fatal("A's IKE rekey request was not on the wire")
	}
	n.step(2*time.Second, 100*time.Millisecond)
	for _, p := range []*peer{a, b} {
		checkOneIKESA(t, p, 1, "a one-sided collision")
		for _, r := range p.downs {
			if r != nil {
				t.Errorf("%s: a CHILD_SA went down with %v; want it moved to the new IKE SA", p.name, r)
			}
		}
		for _, r := range p.ikeDowns {
			if r != nil {
				t.Errorf("%s: an IKE SA went down with %v; want replaced", p.name, r)
			}
		}
	}
	if len(a.ep.SAs()) == 1 && len(b.ep.SAs()) == 1 && a.ep.SAs()[0].Status().SPIi != b.ep.SAs()[0].Status().SPIi {
		t.Errorf("A and B kept different IKE SAs")
	}
	checkPairs(t, a, b, 1)
}

// TestAnswerToIKEDeleteLost: B deletes the IKE SA and A's answer is
// lost. A forgot the SA when it answered, but must answer B's
// retransmission of the DELETE all the same: otherwise B keeps the SA until
// its retransmissions run out (strongSwan keeps it as DELETING for minutes
// by default). strongSwan loses our answer this way when it deletes the
// redundant SA of a rekey collision: it sends the DELETE before the SA is
// in its table, and drops an answer that comes back before it is.
func TestAnswerToIKEDeleteLost(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	n, a, b := establish(t, ca, cb)
	var request []byte
	lost := false
	n.SetDrop(func(d iketest.Datagram) bool {
		h, err := DecodeHeader(d.Pkt)
		if err != nil || h.Exchange != INFORMATIONAL {
			return false
		}
		if d.From.Addr() == netip.MustParseAddr(addrB) && !h.IsResponse() && request == nil {
			request = d.Pkt
		}
		if lost || d.From.Addr() != netip.MustParseAddr(addrA) || !h.IsResponse() {
			return false
		}
		lost = true
		return true
	})
	b.established()[0].Delete()
	n.run()
	if !lost || request == nil {
		t.Fatal("B's DELETE and A's answer were not on the wire")
	}
	if len(a.ep.SAs()) != 0 || len(b.ep.SAs()) != 1 {
		t.Fatalf("after the lost answer: A has %d IKE SAs, B %d; want 0 and 1 (waiting for the answer)", len(a.ep.SAs()), len(b.ep.SAs()))
	}

	// Anything but the very request is not answered from what A kept.
	forged := bytes.Clone(request)
	forged[len(forged)-1] ^= 1
	unknown := a.ep.Stats.UnknownSPI.Load()
	a.ep.HandleMessage(forged, netip.MustParseAddrPort(addrA+":500"), netip.MustParseAddrPort(addrB+":500"))
	n.run()
	if got := a.ep.Stats.RetransmitsAnswered.Load(); got != 0 {
		t.Errorf("A answered %d altered copies of the DELETE, want 0", got)
	}
	if got := a.ep.Stats.UnknownSPI.Load(); got != unknown+1 {
		t.Errorf("A counted %d messages for unknown SPIs, want %d", got, unknown+1)
	}

	// B retransmits after 0.5 s and gets the answer again.
	n.step(time.Second, 100*time.Millisecond)
	if got := len(b.ep.SAs()); got != 0 {
		t.Fatalf("B still has %d IKE SAs 1 s after A's answer was lost; want its retransmission answered", got)
	}
	if got := a.ep.Stats.RetransmitsAnswered.Load(); got != 1 {
		t.Errorf("A answered %d retransmissions, want 1", got)
	}
	for _, r := range b.ikeDowns {
		if r != nil {
			t.Errorf("B's IKE SA went down with %v, want closed by B", r)
		}
	}

	// The answer is kept for the peer's retransmissions, not for ever.
	n.step(endedKeep+time.Minute, 10*time.Second)
	a.ep.mu.Lock()
	kept := len(a.ep.ended)
	a.ep.mu.Unlock()
	if kept != 0 {
		t.Errorf("A still keeps %d answers %v after the IKE SA ended, want none", kept, endedKeep+time.Minute)
	}
}

// TestIKERekeyQueuedBehindChildRekey: the IKE SA rekey is asked for while
// our CHILD_SA rekey is on the wire. The old child's DELETE, which ends
// the child rekey, must go before the IKE SA rekey: queued behind it, it
// was dropped with the old IKE SA's queue while the old child moved to the
// new IKE SA, and both sides kept the old child for good.
func TestIKERekeyQueuedBehindChildRekey(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	n, a, b := establish(t, ca, cb)
	sa := a.established()[0]
	old := a.pairList()[0][0].SPI
	if err := sa.RekeyChild(old); err != nil {
		t.Fatal(err)
	}
	if err := sa.RekeyIKE(); err != nil {
		t.Fatal(err)
	}
	n.run()
	n.step(2*time.Second, 100*time.Millisecond)
	for _, p := range []*peer{a, b} {
		checkOneIKESA(t, p, 1, "a child rekey and an IKE SA rekey")
	}
	checkPairs(t, a, b, 1)
	if err, ok := a.childDown[old]; !ok || err != nil {
		t.Errorf("A's old pair %08x: ChildDown %v (seen %v), want removed with a nil reason", old, err, ok)
	}
}

// TestChildDeleteCrossesPeerIKERekey: A deletes its CHILD_SA while B
// rekeys the IKE SA, so A's DELETE is on the wire on the old IKE SA when
// B's rekey moves the child to the new one. The answer, on the old SA, no
// longer finds the child: A must delete it again on the new SA rather than
// keep it, deleting, for good.
func TestChildDeleteCrossesPeerIKERekey(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	n, a, b := establish(t, ca, cb)
	sa, sb := a.established()[0], b.established()[0]
	if err := sa.DeleteChild(a.pairList()[0][0].SPI); err != nil {
		t.Fatal(err)
	}
	if err := sb.RekeyIKE(); err != nil {
		t.Fatal(err)
	}
	n.run()
	n.step(2*time.Second, 100*time.Millisecond)
	for _, p := range []*peer{a, b} {
		checkOneIKESA(t, p, 0, "the crossing")
	}
	checkPairs(t, a, b, 0)
}

func TestDPDDetectsDeadPeer(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	ca.DPDDelay = 10 * time.Second
	n, a, _ := establish(t, ca, cb)
	n.step(15*time.Second, 500*time.Millisecond)
	if f := a.lastFailure(); f != nil {
		t.Fatalf("DPD with a live peer failed: %v", f)
	}
	n.detach(netip.MustParseAddr(addrB)) // B dies
	n.step(40*time.Second, 500*time.Millisecond)
	f := a.lastFailure()
	if f == nil || f.Reason != ReasonPeerTimeout || f.Exchange != INFORMATIONAL {
		t.Fatalf("got %v, want no answer to INFORMATIONAL", f)
	}
	if len(a.pairList()) != 0 || len(a.ep.SAs()) != 0 {
		t.Errorf("dead peer's SAs still installed")
	}
}

func TestDeleteCleansBoth(t *testing.T) {
	for _, who := range []string{"initiator", "responder"} {
		t.Run(who, func(t *testing.T) {
			ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
			n, a, b := establish(t, ca, cb)
			closer, other := a, b
			if who == "responder" {
				closer, other = b, a
			}
			closer.established()[0].Delete()
			n.run()
			for _, p := range []*peer{a, b} {
				if len(p.pairList()) != 0 || len(p.ep.SAs()) != 0 {
					t.Errorf("%s: %d pairs, %d IKE SAs left", p.name, len(p.pairList()), len(p.ep.SAs()))
				}
			}
			f := other.lastFailure()
			if f == nil || f.Reason != ReasonPeerDeleted {
				t.Errorf("%s says %v, want peer deleted", other.name, f)
			}
			if closer.lastFailure() != nil {
				t.Errorf("%s, which closed, reports %v", closer.name, closer.lastFailure())
			}
		})
	}
	t.Run("child only", func(t *testing.T) {
		ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
		n, a, b := establish(t, ca, cb)
		if err := a.established()[0].DeleteChild(a.pairList()[0][0].SPI); err != nil {
			t.Fatal(err)
		}
		n.run()
		if len(a.pairList())+len(b.pairList()) != 0 || len(a.established()) != 1 || len(b.established()) != 1 {
			t.Errorf("after deleting the child: pairs %d/%d, IKE SAs %d/%d; want 0/0, 1/1",
				len(a.pairList()), len(b.pairList()), len(a.established()), len(b.established()))
		}
		// And a new one can be made on the same IKE SA.
		a.established()[0].CreateChild()
		n.run()
		checkPairs(t, a, b, 1)
	})
}

func TestBadInputDroppedAndCounted(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	ca.DPDDelay = 5 * time.Second
	n, a, b := establish(t, ca, cb)
	// Capture a protected request (DPD) from A.
	n.step(6*time.Second, time.Second)
	var dpd iketest.Datagram
	for _, d := range n.Wire() {
		if h, err := DecodeHeader(d.Pkt); err == nil && h.Exchange == INFORMATIONAL && !h.IsResponse() {
			dpd = d
		}
	}
	if dpd.Pkt == nil {
		t.Fatal("no DPD request seen")
	}
	from, to := dpd.From, dpd.To
	before := b.ep.Stats.Snapshot()
	deliver := func(pkt []byte) { b.ep.HandleMessage(pkt, to, from); n.run() }

	deliver(dpd.Pkt) // replayed: answered from cache, not processed again
	deliver(dpd.Pkt[:len(dpd.Pkt)-5])
	flipped := append([]byte(nil), dpd.Pkt...)
	flipped[len(flipped)-3] ^= 1
	deliver(flipped)
	deliver([]byte("garbage"))
	future := append([]byte(nil), dpd.Pkt...)
	future[23] += 7 // message ID far ahead
	deliver(future)
	unknown := append([]byte(nil), dpd.Pkt...)
	unknown[10] ^= 0xff
	deliver(unknown)

	s := &b.ep.Stats
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"RetransmitsAnswered", s.RetransmitsAnswered.Load() - before.RetransmitsAnswered, 1},
		{"Malformed (truncated, garbage)", s.Malformed.Load() - before.Malformed, 2},
		{"BadICV", s.BadICV.Load() - before.BadICV, 1},
		{"OutOfWindow", s.OutOfWindow.Load() - before.OutOfWindow, 1},
		{"UnknownSPI", s.UnknownSPI.Load() - before.UnknownSPI, 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: counted %d, want %d", c.name, c.got, c.want)
		}
	}
	checkPairs(t, a, b, 1)
	n.step(20*time.Second, time.Second)
	if a.lastFailure() != nil || b.lastFailure() != nil {
		t.Errorf("tunnel hurt by bad input: %v / %v", a.lastFailure(), b.lastFailure())
	}
}

func TestCookieUnderLoad(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	n := newTestNet(t)
	a := n.addPeer("A", addrA, ca, nil)
	b := n.addPeer("B", addrB, cb, func(c *EndpointConfig) { c.CookieThreshold = 2; c.MaxHalfOpen = 10 })
	// A flood of IKE_SA_INIT from addresses that never continue.
	for i := 0; i < 30; i++ {
		fc := *ca
		fc.Local = netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}), 500)
		fake := n.addPeer(fmt.Sprintf("flood%d", i), fc.Local.Addr().String(), &fc, nil)
		fake.ep.Initiate(&fc)
		n.detach(fc.Local.Addr()) // nobody answers the cookie
	}
	n.run()
	if got := b.ep.HalfOpen(); got != 2 {
		t.Errorf("B holds %d half-open SAs, want 2 (the threshold)", got)
	}
	if b.ep.Stats.CookiesSent.Load() != 28 {
		t.Errorf("B sent %d cookies, want 28", b.ep.Stats.CookiesSent.Load())
	}
	a.ep.Initiate(ca)
	n.run()
	checkPairs(t, a, b, 1)
	n.step(40*time.Second, time.Second)
	if got := b.ep.HalfOpen(); got != 0 {
		t.Errorf("%d half-open SAs after the timeout, want 0", got)
	}
	if b.ep.Stats.HalfOpenExpired.Load() != 2 {
		t.Errorf("expired %d half-open SAs, want 2", b.ep.Stats.HalfOpenExpired.Load())
	}
}

func TestInvalidKERetry(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256-curve25519", "aes128gcm16")
	cb.IKEProposals = MustParseProposals(ProtoIKE, "aes128gcm16-prfsha256-curve25519")
	n, a, b := establish(t, ca, cb)
	_ = n
	if got := a.established()[0].Status().Proposal; got != "aes128gcm16-prfsha256-curve25519" {
		t.Errorf("negotiated %s, want the group B asked for", got)
	}
	_ = b
}

func TestForcedEncapFloatsTo4500(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	ca.ForceEncap = true
	ca.KeepaliveInterval = 5 * time.Second
	n, a, b := establish(t, ca, cb)
	for _, p := range []*peer{a, b} {
		in := p.ups[0].In
		if in.EncapSrcPort != 4500 || in.EncapDstPort != 4500 {
			t.Errorf("%s: ESP encap ports %d->%d, want 4500->4500", p.name, in.EncapSrcPort, in.EncapDstPort)
		}
	}
	var on500, on4500 int
	for _, d := range n.Wire() {
		switch {
		case d.To.Port() == 4500 && bytes.HasPrefix(d.Pkt, nonESPMarker):
			on4500++
		case d.To.Port() == 500:
			on500++
		default:
			t.Errorf("datagram to %v without the non-ESP marker", d.To)
		}
	}
	if on500 != 2 || on4500 != 2 {
		t.Errorf("%d datagrams on 500 and %d on 4500, want IKE_SA_INIT on 500 and IKE_AUTH on 4500", on500, on4500)
	}
	n.step(12*time.Second, time.Second)
	if n.keepalives < 2 {
		t.Errorf("%d NAT keepalives in 12 s, want at least 2", n.keepalives)
	}
}

func TestRealNAT(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	cb.Remote = netip.MustParseAddrPort("198.51.100.1:500") // B only knows A's public side
	n := newTestNet(t)
	n.SetNAT(&iketest.NAT{Private: netip.MustParseAddr(addrA), Public: netip.MustParseAddr("198.51.100.1")})
	a := n.addPeer("A", addrA, ca, nil)
	b := n.addPeer("B", addrB, cb, nil)
	a.ep.Initiate(ca)
	n.run()
	checkPairs(t, a, b, 1)
	sa, sb := a.established()[0].Status(), b.established()[0].Status()
	if !sa.NATLocal || sa.NATRemote || sb.NATLocal || !sb.NATRemote {
		t.Errorf("NAT detection: A local/remote %v/%v, B %v/%v; want A behind NAT", sa.NATLocal, sa.NATRemote, sb.NATLocal, sb.NATRemote)
	}
	if got := b.ups[0].Out.EncapDstPort; got != 4500+40000 {
		t.Errorf("B sends ESP to port %d, want A's NAT mapping 44500", got)
	}
}

func TestInitialContactOnlyFirst(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	n, a, b := establish(t, ca, cb)
	// A second IKE SA to the same peer must not make it drop the first.
	a.ep.Initiate(ca)
	n.run()
	if len(a.established()) != 2 || len(b.established()) != 2 {
		t.Fatalf("established: A %d, B %d; want 2 each", len(a.established()), len(b.established()))
	}
	checkPairs(t, a, b, 2)
}

func TestPeerRestartComesBack(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	n, a, _ := establish(t, ca, cb)
	// B restarts: a fresh engine with the same config initiates.
	b2 := n.addPeer("B2", addrB, cb, nil)
	b2.ep.Initiate(cb)
	n.run()
	if got := len(a.established()); got != 1 {
		t.Errorf("A has %d established IKE SAs after the peer restarted, want 1 (INITIAL_CONTACT drops the old)", got)
	}
	if f := a.lastFailure(); f == nil || f.Reason != ReasonPeerRestarted {
		t.Errorf("A reports %v, want the peer restarted", f)
	}
	checkPairs(t, a, b2, 1)
}

// TestShortLifetimesSoak runs both ends with 20 s IKE and CHILD lifetimes
// and DPD for ten minutes of fake time: every kind of rekey, including
// collisions between them, must leave exactly one working IKE SA and one
// CHILD_SA pair, and no failure.
func TestShortLifetimesSoak(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16-ecp256")
	for _, c := range []*PeerConfig{ca, cb} {
		c.IKELifetime, c.ChildLifetime, c.DPDDelay = 20*time.Second, 20*time.Second, 5*time.Second
	}
	n, a, b := establish(t, ca, cb)
	n.step(10*time.Minute, 250*time.Millisecond)
	for _, p := range []*peer{a, b} {
		if f := p.lastFailure(); f != nil {
			t.Errorf("%s: failure %v", p.name, f)
		}
		var states []string
		for _, sa := range p.ep.SAs() {
			states = append(states, sa.State().String())
		}
		if len(p.established()) != 1 {
			t.Errorf("%s: IKE SAs %v, want one established", p.name, states)
		}
		t.Logf("%s: %d CHILD_SAs, %d IKE SAs up, stats %+v", p.name, len(p.ups), p.ikeUps, p.ep.Stats.Snapshot())
		if len(p.ups) < 30 {
			t.Errorf("%s: only %d CHILD_SAs in ten minutes of 20 s lifetimes", p.name, len(p.ups))
		}
	}
	checkPairs(t, a, b, 1)
	if sa, sb := a.established(), b.established(); len(sa) == 1 && len(sb) == 1 && sa[0].Status().SPIi != sb[0].Status().SPIi {
		t.Errorf("A and B ended on different IKE SAs")
	}
}

func TestEstablishIPv6(t *testing.T) {
	ca, cb := pairConfigs("aes256gcm16-prfsha384-ecp384", "aes256gcm16")
	ca.Local, ca.Remote = netip.MustParseAddrPort("[fd00::1]:500"), netip.MustParseAddrPort("[fd00::2]:500")
	cb.Local, cb.Remote = ca.Remote, ca.Local
	ca.LocalTS, ca.RemoteTS = pfx("fd01::/64"), pfx("fd02::/64")
	cb.LocalTS, cb.RemoteTS = ca.RemoteTS, ca.LocalTS
	ca.ForceEncap = true
	n := newTestNet(t)
	a := n.addPeer("A", "fd00::1", ca, nil)
	b := n.addPeer("B", "fd00::2", cb, nil)
	a.ep.Initiate(ca)
	n.run()
	checkPairs(t, a, b, 1)
	if got := a.ups[0].In.RemoteTS; len(got) != 1 || got[0] != netip.MustParsePrefix("fd02::/64") {
		t.Errorf("remote TS %v, want fd02::/64", got)
	}
}

func TestRefusedRekeysRetryThenExpire(t *testing.T) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	ca.ChildLifetime, ca.IKELifetime = 20*time.Second, 40*time.Second
	n, a, b := establish(t, ca, cb)
	// B's configuration changes under the running SAs: it no longer
	// accepts what the SAs use, so every rekey is refused.
	cb.ESPProposals = MustParseProposals(ProtoESP, "aes256-sha256")
	cb.IKEProposals = MustParseProposals(ProtoIKE, "aes256-sha256-modp2048")
	n.step(25*time.Second, 250*time.Millisecond)
	a.mu.Lock()
	refusals := len(a.failures)
	a.mu.Unlock()
	if refusals < 2 {
		t.Errorf("%d refused child rekeys reported in 25 s, want retries (at least 2)", refusals)
	}
	if len(a.pairList()) != 0 || len(b.pairList()) != 0 {
		t.Errorf("child still installed after its hard lifetime: %d/%d", len(a.pairList()), len(b.pairList()))
	}
	n.step(25*time.Second, 250*time.Millisecond)
	if len(a.ep.SAs()) != 0 || len(b.ep.SAs()) != 0 {
		t.Fatalf("IKE SAs left after the hard lifetime: %d/%d", len(a.ep.SAs()), len(b.ep.SAs()))
	}
	a.mu.Lock()
	last := a.ikeDowns[len(a.ikeDowns)-1]
	a.mu.Unlock()
	if last == nil || !bytes.Contains([]byte(last.Error()), []byte("hard lifetime")) {
		t.Errorf("IKE SA went down with %v, want the hard lifetime explained", last)
	}
}

// checkOneIKESA fails unless p has exactly one IKE SA, established, with
// children CHILD_SAs; after names what the test did, for the message.
func checkOneIKESA(t *testing.T, p *peer, children int, after string) {
	t.Helper()
	sas := p.ep.SAs()
	if len(sas) == 1 && sas[0].State() == StateEstablished && len(sas[0].Status().Children) == children {
		return
	}
	var st []string
	for _, s := range sas {
		x := s.Status()
		st = append(st, fmt.Sprintf("%v %x/%x children %d", x.State, x.SPIi, x.SPIr, len(x.Children)))
	}
	t.Errorf("%s: IKE SAs after %s: %v; want one established with %d children", p.name, after, st, children)
}
