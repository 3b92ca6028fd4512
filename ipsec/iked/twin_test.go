package iked

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/ike"
	"github.com/flashgate/flashgate/ipsec/ike/iketest"
	"github.com/flashgate/flashgate/ipsec/iked/ikedtest"
)

// The twins are what New takes.
var (
	_ DataPlane = (*ikedtest.Plane)(nil)
	_ Transport = (*ikedtest.Transport)(nil)
)

// The in-memory site-to-site setup of the tests that run under -short:
// gateway A (10.99.0.1, LAN 10.1.0.0/24) and gateway B (10.99.0.2, LAN
// 10.2.0.0/24), each a whole Daemon on ikedtest's memory plane, talking
// IKE over an iketest.Network whose clock only moves in step. Nothing
// needs root, a namespace or strongSwan; minutes of retries run in
// milliseconds.
var (
	memA, memB     = netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2")
	memLANA        = netip.MustParsePrefix("10.1.0.0/24")
	memLANB        = netip.MustParsePrefix("10.2.0.0/24")
	memHostB       = netip.MustParseAddr("10.2.0.7")
	memIKE, memESP = "aes128gcm16-prfsha256-curve25519", "aes128gcm16"
)

type memNet struct {
	t   *testing.T
	net *iketest.Network
	gws []*memGateway
}

type memGateway struct {
	*Daemon
	plane *ikedtest.Plane
	tr    *ikedtest.Transport
}

func newMemNet(t *testing.T) *memNet {
	return &memNet{t: t, net: iketest.NewNetwork()}
}

// gateway starts a daemon at addr with the tunnels; the test's clock
// drives its timers (Tick in step).
func (n *memNet) gateway(addr netip.Addr, tunnels ...config.Tunnel) *memGateway {
	n.t.Helper()
	g := &memGateway{plane: ikedtest.NewPlane(), tr: ikedtest.NewTransport(n.net, addr, 0)}
	d, err := New(Options{Now: n.net.Clock.Now, TickInterval: -1, Logf: n.t.Logf}, g.plane, g.tr)
	if err != nil {
		n.t.Fatal(err)
	}
	g.Daemon = d
	d.Run()
	n.t.Cleanup(func() { d.Close() })
	if err := d.Apply(&config.Config{Tunnels: tunnels}); err != nil {
		n.t.Fatalf("apply at %v: %v", addr, err)
	}
	n.gws = append(n.gws, g)
	return g
}

// run delivers what is on the wire.
func (n *memNet) run() {
	n.t.Helper()
	if err := n.net.Run(); err != nil {
		n.t.Fatal(err)
	}
}

// step moves the clock by total in steps of by, running every daemon's
// timers and the network after each.
func (n *memNet) step(total, by time.Duration) {
	n.t.Helper()
	for el := time.Duration(0); el < total; el += by {
		n.net.Clock.Advance(by)
		for _, g := range n.gws {
			g.Tick()
		}
		n.run()
	}
}

// sent waits (in real time) until the daemons' goroutines (acquires,
// expiries) put something on the wire, then delivers it.
func (n *memNet) sent() {
	n.t.Helper()
	if !waitFor(2*time.Second, func() bool { return n.net.Pending() > 0 }) {
		n.t.Fatal("nothing was sent")
	}
	n.run()
}

// initsFrom counts the IKE_SA_INIT requests addr sent.
func (n *memNet) initsFrom(addr netip.Addr) int {
	c := 0
	for _, d := range n.net.Wire() {
		if d.From.Addr() == addr && isInitRequest(d.Pkt) {
			c++
		}
	}
	return c
}

func isInitRequest(pkt []byte) bool {
	h, err := ike.DecodeHeader(pkt)
	return err == nil && h.Exchange == ike.IKE_SA_INIT && !h.IsResponse()
}

func memTunnel(local, remote netip.Addr, lan, far netip.Prefix, start string) config.Tunnel {
	lid, rid := "gwA", "gwB"
	if local == memB {
		lid, rid = rid, lid
	}
	return tunnelConfig(local, remote, lid, rid, lan, far, memIKE, memESP, start)
}

// st is the named tunnel's status.
func (g *memGateway) st(name string) ipsec.TunnelStatus { return tunnelStatus(g.Daemon, name) }

// hasEvent reports whether an event of the tunnel contains text.
func (g *memGateway) hasEvent(name, text string) bool {
	return countEvents(g.Daemon, name, text) > 0
}

func (g *memGateway) want(t *testing.T, name string, state ipsec.TunnelState, reasonPrefix string) ipsec.TunnelStatus {
	t.Helper()
	st := g.st(name)
	if st.State != state || !strings.HasPrefix(st.Reason, reasonPrefix) {
		t.Fatalf("tunnel %s: %s %q, want %s %q...; events:\n%s", name, st.State, st.Reason, state, reasonPrefix, eventLines(st))
	}
	return st
}

func eventLines(st ipsec.TunnelStatus) string {
	var b strings.Builder
	for _, e := range st.Events {
		b.WriteString("  " + e.Time.Format("15:04:05.000") + " " + e.Message + "\n")
	}
	return b.String()
}

// TestMemUpAndDown: a tunnel to initiate comes up against a peer that
// responds, both data planes get one mirrored pair, and the traffic B's
// LAN is for goes into it; a down at A deletes the SAs at both ends and
// the initiating side comes back by itself.
func TestMemUpAndDown(t *testing.T) {
	n := newMemNet(t)
	b := n.gateway(memB, memTunnel(memB, memA, memLANB, memLANA, config.StartRespond))
	a := n.gateway(memA, memTunnel(memA, memB, memLANA, memLANB, config.StartInitiate))
	n.run()
	up := a.want(t, "s2s", ipsec.StateUp, "")
	b.want(t, "s2s", ipsec.StateUp, "")
	if up.IKE == nil || !up.IKE.Initiator || len(up.Children) != 1 || up.DataPlane != "memory" {
		t.Fatalf("A's status: %+v", up)
	}
	pa, pb := a.plane.Pairs(), b.plane.Pairs()
	if len(pa) != 1 || len(pb) != 1 || pa[0][1].SPI != pb[0][0].SPI || pa[0][0].SPI != pb[0][1].SPI {
		t.Fatalf("pairs A %v, B %v: want one each, mirrored", pa, pb)
	}
	if !a.plane.Send(memHostB, 100) {
		t.Fatal("A's plane has no SA for B's LAN")
	}
	if st := a.st("s2s"); st.Children[0].BytesOut != 100 || st.Children[0].PacketsOut != 1 {
		t.Errorf("A's counters after one packet: %+v", st.Children[0])
	}
	if n.initsFrom(memA) != 1 || n.initsFrom(memB) != 0 {
		t.Errorf("IKE_SA_INIT from A %d, from B %d; want 1, 0", n.initsFrom(memA), n.initsFrom(memB))
	}

	if err := a.Down("s2s"); err != nil {
		t.Fatal(err)
	}
	n.run()
	if len(a.plane.Pairs()) != 0 || len(b.plane.Pairs()) != 0 {
		t.Fatalf("after down: A holds %d pairs, B %d", len(a.plane.Pairs()), len(b.plane.Pairs()))
	}
	b.want(t, "s2s", ipsec.StateFailed, "peer 10.99.0.1:500 deleted the IKE SA")
	n.step(2*time.Second, 100*time.Millisecond)
	a.want(t, "s2s", ipsec.StateUp, "")
	b.want(t, "s2s", ipsec.StateUp, "")
	if got := n.initsFrom(memA); got != 2 {
		t.Errorf("IKE_SA_INIT from A after the down: %d in all, want 2", got)
	}
}

// TestMemRespondTunnelUpOnce: a respond tunnel sends nothing by itself;
// an up initiates it once, and when that fails (the peer accepts none of
// our proposals) it waits for the peer again without the retries of
// start action initiate; an up against a peer that accepts brings it up
// with one IKE_SA_INIT however often it is asked; a down leaves it down.
func TestMemRespondTunnelUpOnce(t *testing.T) {
	n := newMemNet(t)
	refusing := memTunnel(memB, memA, memLANB, memLANA, config.StartRespond)
	refusing.IKEProposals = []string{"aes256-sha256-modp2048"}
	b := n.gateway(memB, refusing)
	a := n.gateway(memA, memTunnel(memA, memB, memLANA, memLANB, config.StartRespond))
	n.step(10*time.Second, 100*time.Millisecond)
	if w := n.net.WireLen(); w != 0 {
		t.Fatalf("respond tunnels sent %d datagrams before anyone asked", w)
	}
	a.want(t, "s2s", ipsec.StateDown, waitingForPeer)

	if err := a.Up("s2s"); err != nil {
		t.Fatal(err)
	}
	n.run()
	a.want(t, "s2s", ipsec.StateDown, waitingForPeer+"; up failed: ")
	n.step(10*time.Second, 100*time.Millisecond) // past the 1, 2 and 4 s retries of initiate
	if got := n.initsFrom(memA); got != 1 {
		t.Fatalf("IKE_SA_INIT for one failed up: %d, want 1", got)
	}

	if err := b.Apply(&config.Config{Tunnels: []config.Tunnel{memTunnel(memB, memA, memLANB, memLANA, config.StartRespond)}}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := a.Up("s2s"); err != nil {
			t.Fatal(err)
		}
	}
	n.run()
	a.want(t, "s2s", ipsec.StateUp, "")
	if got := n.initsFrom(memA); got != 2 {
		t.Fatalf("IKE_SA_INIT after three ups: %d in all, want 2", got)
	}
	if err := a.Down("s2s"); err != nil {
		t.Fatal(err)
	}
	n.step(10*time.Second, 100*time.Millisecond)
	a.want(t, "s2s", ipsec.StateDown, waitingForPeer)
	b.want(t, "s2s", ipsec.StateFailed, "peer 10.99.0.1:500 deleted the IKE SA")
	if got := n.initsFrom(memA) + n.initsFrom(memB); got != 2 {
		t.Errorf("IKE_SA_INIT after the down: %d in all, want still 2", got)
	}
}

// TestMemUpAPIRefusals: the API's up is a 404 for a name that is no
// tunnel and a 409 for a respond tunnel without a remote address, which
// nothing can initiate; neither starts an IKE SA.
func TestMemUpAPIRefusals(t *testing.T) {
	n := newMemNet(t)
	anyPeer := memTunnel(memA, memB, memLANA, memLANB, config.StartRespond)
	anyPeer.Name, anyPeer.RemoteAddress, anyPeer.RemoteID = "roadwarrior", config.Addr{}, ""
	a := n.gateway(memA, anyPeer)
	for name, want := range map[string]string{"roadwarrior": "no remote address", "nosuch": `no tunnel named "nosuch"`} {
		if err := a.Up(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("up %s: %v, want %q", name, err, want)
		}
	}
	n.run()
	if len(a.ep.SAs()) != 0 || n.net.WireLen() != 0 {
		t.Errorf("a refused up started something")
	}
	a.want(t, "roadwarrior", ipsec.StateDown, waitingForPeer)
}

// TestMemBackoff: a peer that refuses every attempt at once is tried
// again after 1 s, doubling to a minute; an up retries at once and starts
// the doubling over.
func TestMemBackoff(t *testing.T) {
	n := newMemNet(t)
	var at []time.Duration
	start := n.net.Clock.Now()
	n.net.SetDrop(func(d iketest.Datagram) bool {
		if d.From.Addr() == memA && isInitRequest(d.Pkt) {
			at = append(at, n.net.Clock.Now().Sub(start))
		}
		return false
	})
	refusing := memTunnel(memB, memA, memLANB, memLANA, config.StartRespond)
	refusing.IKEProposals = []string{"aes256-sha256-modp2048"}
	n.gateway(memB, refusing)
	a := n.gateway(memA, memTunnel(memA, memB, memLANA, memLANB, config.StartInitiate))
	n.run()
	a.want(t, "s2s", ipsec.StateFailed, "peer 10.99.0.2:500 answered NO_PROPOSAL_CHOSEN")
	n.step(4*time.Minute, 100*time.Millisecond)
	var gaps []string
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, (at[i] - at[i-1]).Round(time.Second).String())
	}
	want := "1s 2s 4s 8s 16s 32s 1m0s 1m0s"
	if got := strings.Join(gaps, " "); !strings.HasPrefix(got, want) {
		t.Fatalf("gaps between attempts %s, want %s...", got, want)
	}
	tries := len(at)
	if err := a.Up("s2s"); err != nil {
		t.Fatal(err)
	}
	n.run()
	n.step(1100*time.Millisecond, 100*time.Millisecond)
	if len(at) != tries+2 {
		t.Errorf("an up and 1 s later: %d attempts, want 2 (at once, then after 1 s again)", len(at)-tries)
	}
	a.want(t, "s2s", ipsec.StateFailed, "peer 10.99.0.2:500 answered NO_PROPOSAL_CHOSEN")
}

// TestMemOnTraffic: an on-traffic tunnel installs its trap and sends
// nothing; the first packet for B's LAN brings it up, the next goes
// through; when the peer closes the IKE SA it waits for traffic again
// without initiating, the trap still in place; an up starts it as traffic
// would.
func TestMemOnTraffic(t *testing.T) {
	n := newMemNet(t)
	b := n.gateway(memB, memTunnel(memB, memA, memLANB, memLANA, config.StartRespond))
	a := n.gateway(memA, memTunnel(memA, memB, memLANA, memLANB, config.StartOnTraffic))
	n.step(3*time.Second, 100*time.Millisecond)
	if n.net.WireLen() != 0 {
		t.Fatalf("an on-traffic tunnel sent %d datagrams without traffic", n.net.WireLen())
	}
	traps := a.plane.Traps()
	if len(traps) != 1 || traps[0].ReqID <= trapReqIDBase || len(traps[0].RemoteTS) != 1 || traps[0].RemoteTS[0] != memLANB ||
		traps[0].Local != memA || traps[0].Remote != memB {
		t.Fatalf("A's traps: %+v", traps)
	}
	a.want(t, "s2s", ipsec.StateDown, ipsec.WaitingForTraffic)

	if a.plane.Send(memHostB, 64) {
		t.Fatal("the first packet went out before any SA existed")
	}
	n.sent()
	a.want(t, "s2s", ipsec.StateUp, "")
	if !a.hasEvent("s2s", "traffic for 10.2.0.0/24 (kernel acquire, reqid") {
		t.Errorf("no event says traffic started it:\n%s", eventLines(a.st("s2s")))
	}
	if !a.plane.Send(memHostB, 64) {
		t.Fatal("the next packet found no SA")
	}

	if err := b.Down("s2s"); err != nil {
		t.Fatal(err)
	}
	n.run()
	n.step(10*time.Second, 100*time.Millisecond)
	a.want(t, "s2s", ipsec.StateDown, ipsec.WaitingForTraffic)
	if got := n.initsFrom(memA); got != 1 {
		t.Errorf("IKE_SA_INIT from A after the peer closed: %d in all, want still 1", got)
	}
	if len(a.plane.Traps()) != 1 {
		t.Errorf("the trap went with the SA")
	}
	if err := a.Up("s2s"); err != nil {
		t.Fatal(err)
	}
	n.run()
	a.want(t, "s2s", ipsec.StateUp, "")
	if !a.hasEvent("s2s", "asked to come up: starting the tunnel") {
		t.Errorf("no event says the up started it:\n%s", eventLines(a.st("s2s")))
	}
}

// TestMemRekeys: CHILD_SAs rekey on the data plane's soft expiry and on
// the API's rekey, the IKE SA on the API's rekey; each side reports what
// happened in words, and the planes end with one pair each, the new one.
func TestMemRekeys(t *testing.T) {
	n := newMemNet(t)
	b := n.gateway(memB, memTunnel(memB, memA, memLANB, memLANA, config.StartRespond))
	a := n.gateway(memA, memTunnel(memA, memB, memLANA, memLANB, config.StartInitiate))
	n.run()
	first := a.plane.Pairs()[0][0].SPI
	a.plane.Expire(first, false)
	n.sent()
	if p := a.plane.Pairs(); len(p) != 1 || p[0][0].SPI == first {
		t.Fatalf("after the soft expiry of %08x A holds %v", first, p)
	}
	for _, g := range []*memGateway{a, b} {
		if countEvents(g.Daemon, "s2s", "CHILD_SA rekeyed") != 1 {
			t.Errorf("%s: no CHILD_SA rekeyed event:\n%s", g.st("s2s").LocalAddr, eventLines(g.st("s2s")))
		}
	}
	if err := a.Rekey("s2s", false); err != nil {
		t.Fatal(err)
	}
	n.run()
	ikeBefore := a.st("s2s").IKE.InitiatorSPI
	if err := a.Rekey("s2s", true); err != nil {
		t.Fatal(err)
	}
	n.run()
	sa := a.st("s2s")
	if sa.State != ipsec.StateUp || sa.IKE == nil || sa.IKE.InitiatorSPI == ikeBefore || len(sa.Children) != 1 {
		t.Fatalf("after the IKE rekey: %+v", sa)
	}
	// Issue 19: the side that rekeyed its IKE SA said "IKE_SA up" (the
	// old SA was already Deleting when the new one was announced).
	for _, g := range []*memGateway{a, b} {
		if ups, rekeys := countEvents(g.Daemon, "s2s", "IKE_SA up"), countEvents(g.Daemon, "s2s", "IKE_SA rekeyed"); ups != 1 || rekeys != 1 {
			t.Errorf("%s: %d IKE_SA up and %d IKE_SA rekeyed events, want 1 each:\n%s", g.st("s2s").LocalAddr, ups, rekeys, eventLines(g.st("s2s")))
		}
	}
	if len(a.plane.Pairs()) != 1 || len(b.plane.Pairs()) != 1 {
		t.Errorf("pairs after the rekeys: A %d, B %d; want 1 each", len(a.plane.Pairs()), len(b.plane.Pairs()))
	}
	a.plane.Expire(a.plane.Pairs()[0][0].SPI, true)
	if !waitFor(2*time.Second, func() bool { return len(a.plane.Pairs()) == 0 || n.net.Pending() > 0 }) {
		t.Fatal("the hard expiry did nothing")
	}
	n.run()
	n.step(2*time.Second, 100*time.Millisecond)
	a.want(t, "s2s", ipsec.StateUp, "")
	if len(a.plane.Pairs()) != 1 || len(b.plane.Pairs()) != 1 {
		t.Errorf("pairs after the hard expiry: A %d, B %d; want a new one each", len(a.plane.Pairs()), len(b.plane.Pairs()))
	}
}

// isV1MainMode reports whether pkt is an IKEv1 main mode message (on port
// 500, or on 4500 behind the non-ESP marker).
func isV1MainMode(pkt []byte) bool {
	if len(pkt) >= 4 && pkt[0]|pkt[1]|pkt[2]|pkt[3] == 0 {
		pkt = pkt[4:]
	}
	return len(pkt) >= 28 && pkt[17] == 0x10 && pkt[18] == 2
}

// TestMemPhaseOneRekeyFailureSaysWhy: our IKEv1 phase 1 rekey is a main
// mode of its own beside the ISAKMP SA it replaces. When it fails (here
// the peer stops answering main mode) the tunnel stays up on the current
// ISAKMP SA, and its events and status say why the rekey failed: they
// said nothing, as the daemon dropped the end of an SA that never was
// the tunnel's. The next IKE SA that comes up clears the status.
func TestMemPhaseOneRekeyFailureSaysWhy(t *testing.T) {
	v1 := func(local, remote netip.Addr, lan, far netip.Prefix, start string) config.Tunnel {
		c := memTunnel(local, remote, lan, far, start)
		c.IKEVersion = config.IKEv1
		c.IKEProposals, c.ESPProposals = []string{"aes128-sha1-modp2048"}, []string{"aes128-sha1"}
		// Main mode gives up after 4 sends in 7.5 s (iked spreads the
		// retransmissions over the DPD timeout).
		c.DPDInterval, c.DPDTimeout = config.Seconds(5), config.Seconds(10)
		return c
	}
	n := newMemNet(t)
	n.gateway(memB, v1(memB, memA, memLANB, memLANA, config.StartRespond))
	a := n.gateway(memA, v1(memA, memB, memLANA, memLANB, config.StartInitiate))
	n.run()
	before := a.want(t, "s2s", ipsec.StateUp, "")
	n.net.SetDrop(func(d iketest.Datagram) bool { return d.From.Addr() == memB && isV1MainMode(d.Pkt) })
	if err := a.Rekey("s2s", true); err != nil {
		t.Fatal(err)
	}
	n.run()
	n.step(20*time.Second, 250*time.Millisecond)
	const why = "IKE_SA rekey failed: no answer from peer 10.99.0.2:500 to main mode message 1 after 4 tries in 7.5s"
	st := a.want(t, "s2s", ipsec.StateUp, why)
	if !strings.Contains(st.Reason, "the current IKE_SA stays in use") {
		t.Errorf("the status does not say the tunnel goes on: %q", st.Reason)
	}
	if !a.hasEvent("s2s", why) {
		t.Errorf("no event says why the rekey failed:\n%s", eventLines(st))
	}
	if st.IKE == nil || st.IKE.InitiatorSPI != before.IKE.InitiatorSPI || len(st.Children) != 1 {
		t.Errorf("the tunnel left its ISAKMP SA after a failed rekey: %+v, before %+v", st.IKE, before.IKE)
	}

	n.net.SetDrop(nil)
	if err := a.Rekey("s2s", true); err != nil {
		t.Fatal(err)
	}
	n.run()
	n.step(time.Second, 250*time.Millisecond)
	if st := a.st("s2s"); st.State != ipsec.StateUp || st.Reason != "" || st.IKE == nil || st.IKE.InitiatorSPI == before.IKE.InitiatorSPI {
		t.Errorf("after a phase 1 rekey that worked: %s %q, IKE %+v; want up with no reason on a new ISAKMP SA", st.State, st.Reason, st.IKE)
	}
}
