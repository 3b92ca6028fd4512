package iked

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec"
)

// TestMemDeadPeer: when the peer goes silent, dead peer detection takes
// the tunnel down saying so, the initiating side keeps trying, and it
// comes back up when the peer answers again.
func TestMemDeadPeer(t *testing.T) {
	n := newMemNet(t)
	ta, tb := memTunnel(memA, memB, memLANA, memLANB, config.StartInitiate), memTunnel(memB, memA, memLANB, memLANA, config.StartRespond)
	for _, c := range []*config.Tunnel{&ta, &tb} {
		c.DPDInterval, c.DPDTimeout = config.Seconds(5), config.Seconds(5)
	}
	b := n.gateway(memB, tb)
	a := n.gateway(memA, ta)
	n.run()
	a.want(t, "s2s", ipsec.StateUp, "")
	n.net.Detach(memB) // B's box loses power
	n.step(30*time.Second, 100*time.Millisecond)
	if !a.hasEvent("s2s", "IKE_SA down: the peer is dead (dead peer detection)") {
		t.Fatalf("no event says the peer is dead:\n%s", eventLines(a.st("s2s")))
	}
	if st := a.st("s2s"); st.State == ipsec.StateUp || st.IKE != nil || len(a.plane.Pairs()) != 0 {
		t.Fatalf("30 s after the peer went silent: %s %q, IKE %+v, %d pairs", st.State, st.Reason, st.IKE, len(a.plane.Pairs()))
	}
	b.tr.SetAddr(memB) // back
	n.step(2*time.Minute, 100*time.Millisecond)
	a.want(t, "s2s", ipsec.StateUp, "")
	b.want(t, "s2s", ipsec.StateUp, "")
	if len(b.plane.Pairs()) != 1 {
		t.Errorf("B holds %d pairs after the peer came back, want 1 (INITIAL_CONTACT clears the old)", len(b.plane.Pairs()))
	}
}

// TestMemSimultaneousRekeys: both ends rekey the CHILD_SA at once, then
// the IKE SA at once; the collisions resolve (RFC 7296 2.8.1) to one IKE
// SA with one CHILD_SA at each end, the tunnel up throughout.
func TestMemSimultaneousRekeys(t *testing.T) {
	n := newMemNet(t)
	b := n.gateway(memB, memTunnel(memB, memA, memLANB, memLANA, config.StartRespond))
	a := n.gateway(memA, memTunnel(memA, memB, memLANA, memLANB, config.StartInitiate))
	n.run()
	for _, ikeSA := range []bool{false, true} {
		for _, g := range []*memGateway{a, b} {
			if err := g.Rekey("s2s", ikeSA); err != nil {
				t.Fatalf("rekey (IKE SA %v): %v", ikeSA, err)
			}
		}
		n.run()
		n.step(5*time.Second, 100*time.Millisecond)
		for _, g := range []*memGateway{a, b} {
			st := g.want(t, "s2s", ipsec.StateUp, "")
			if len(g.plane.Pairs()) != 1 || len(st.Children) != 1 || len(g.established()) != 1 {
				t.Fatalf("%s after simultaneous rekeys (IKE SA %v): %d pairs, %d CHILD_SAs, %d established IKE SAs; want 1 each:\n%s",
					st.LocalAddr, ikeSA, len(g.plane.Pairs()), len(st.Children), len(g.established()), eventLines(st))
			}
		}
	}
	if pa, pb := a.plane.Pairs(), b.plane.Pairs(); pa[0][1].SPI != pb[0][0].SPI {
		t.Errorf("the surviving pairs do not match: A %08x/%08x, B %08x/%08x", pa[0][0].SPI, pa[0][1].SPI, pb[0][0].SPI, pb[0][1].SPI)
	}
}

func (g *memGateway) established() []string {
	var out []string
	for _, sa := range g.ep.SAs() {
		if sa.State().String() == "ESTABLISHED" {
			out = append(out, sa.Name())
		}
	}
	return out
}

// TestMemLocalAddressFollowsWAN: a tunnel without a configured local
// address waits for a route to its peer (the WAN is not up: it says so
// and retries), comes up when there is one, and after the WAN's address
// changes it negotiates anew from the new address.
func TestMemLocalAddressFollowsWAN(t *testing.T) {
	n := newMemNet(t)
	anyPeer := memTunnel(memB, memA, memLANB, memLANA, config.StartRespond)
	anyPeer.RemoteAddress = config.Addr{}
	ta, tb := memTunnel(memA, memB, memLANA, memLANB, config.StartInitiate), anyPeer
	ta.LocalAddress = config.Addr{}
	for _, c := range []*config.Tunnel{&ta, &tb} {
		c.DPDInterval, c.DPDTimeout = config.Seconds(5), config.Seconds(5)
	}
	b := n.gateway(memB, tb)
	a := n.gateway(memA)
	a.tr.SetAddr(netip.Addr{}) // no WAN yet
	if err := a.Apply(&config.Config{Tunnels: []config.Tunnel{ta}}); err == nil {
		t.Fatal("applying a tunnel with no route to its peer said nothing")
	}
	a.want(t, "s2s", ipsec.StateFailed, "tunnel s2s: no local address given and no route to the peer 10.99.0.2")
	n.step(3*time.Second, 100*time.Millisecond)
	a.want(t, "s2s", ipsec.StateFailed, "tunnel s2s: no local address given and no route to the peer 10.99.0.2")

	a.tr.SetAddr(memA) // the WAN's lease
	n.step(5*time.Second, 100*time.Millisecond)
	if st := a.want(t, "s2s", ipsec.StateUp, ""); st.LocalAddr != memA.String() {
		t.Fatalf("up from %s, want %s", st.LocalAddr, memA)
	}

	moved := netip.MustParseAddr("10.99.0.3")
	a.tr.SetAddr(moved) // a new lease, another address
	n.step(90*time.Second, 100*time.Millisecond)
	st := a.want(t, "s2s", ipsec.StateUp, "")
	if st.LocalAddr != moved.String() || !a.hasEvent("s2s", "local address is now 10.99.0.3 (was 10.99.0.1)") {
		t.Fatalf("after the WAN moved: up from %s, events:\n%s", st.LocalAddr, eventLines(st))
	}
	b.want(t, "s2s", ipsec.StateUp, "")
}

// TestMemPlaneRefusesPair: a CHILD_SA the data plane will not install
// fails the tunnel with the plane's reason and is deleted at both ends;
// once the plane takes pairs again, a new CHILD_SA brings the tunnel up
// on the same IKE SA.
func TestMemPlaneRefusesPair(t *testing.T) {
	n := newMemNet(t)
	b := n.gateway(memB, memTunnel(memB, memA, memLANB, memLANA, config.StartRespond))
	a := n.gateway(memA)
	a.plane.FailAdd(errors.New("no room for another SA"))
	if err := a.Apply(&config.Config{Tunnels: []config.Tunnel{memTunnel(memA, memB, memLANA, memLANB, config.StartInitiate)}}); err != nil {
		t.Fatal(err)
	}
	n.run()
	a.want(t, "s2s", ipsec.StateFailed, "the negotiated CHILD_SA could not be installed in the memory data plane: no room for another SA")
	n.sent() // the DELETE of the refused CHILD_SA
	if len(b.plane.Pairs()) != 0 {
		t.Fatalf("B kept the CHILD_SA A could not install")
	}
	spi := a.st("s2s").IKE.InitiatorSPI
	a.plane.FailAdd(nil)
	n.step(2*time.Second, 100*time.Millisecond)
	st := a.want(t, "s2s", ipsec.StateUp, "")
	if st.IKE.InitiatorSPI != spi || len(a.plane.Pairs()) != 1 || len(b.plane.Pairs()) != 1 {
		t.Errorf("after the plane took pairs again: IKE SA %s (was %s), pairs A %d, B %d", st.IKE.InitiatorSPI, spi, len(a.plane.Pairs()), len(b.plane.Pairs()))
	}
}

// TestMemApplyTouchesOnlyChanges: a commit that changes one tunnel
// restarts that one and leaves the other's SAs alone; a removed tunnel's
// SAs are deleted at both ends.
func TestMemApplyTouchesOnlyChanges(t *testing.T) {
	n := newMemNet(t)
	memC := netip.MustParseAddr("10.99.0.4")
	lanC := netip.MustParsePrefix("10.3.0.0/24")
	toC := memTunnel(memA, memC, memLANA, lanC, config.StartInitiate)
	toC.Name, toC.RemoteID = "c", "gwC"
	fromA := memTunnel(memC, memA, lanC, memLANA, config.StartRespond)
	fromA.Name, fromA.LocalID, fromA.RemoteID = "c", "gwC", "gwA"
	b := n.gateway(memB, memTunnel(memB, memA, memLANB, memLANA, config.StartRespond))
	c := n.gateway(memC, fromA)
	s2s := memTunnel(memA, memB, memLANA, memLANB, config.StartInitiate)
	a := n.gateway(memA, s2s, toC)
	n.run()
	before := a.st("s2s").IKE.InitiatorSPI
	cBefore := a.st("c").IKE.InitiatorSPI
	toC.ChildLifetime = config.Seconds(1800)
	if err := a.Apply(&config.Config{Tunnels: []config.Tunnel{s2s, toC}}); err != nil {
		t.Fatal(err)
	}
	n.run()
	if st := a.want(t, "s2s", ipsec.StateUp, ""); st.IKE.InitiatorSPI != before {
		t.Errorf("the unchanged tunnel got a new IKE SA (%s, was %s)", st.IKE.InitiatorSPI, before)
	}
	if st := a.want(t, "c", ipsec.StateUp, ""); st.IKE.InitiatorSPI == cBefore {
		t.Errorf("the changed tunnel kept its IKE SA %s", cBefore)
	}
	if err := a.Apply(&config.Config{Tunnels: []config.Tunnel{toC}}); err != nil {
		t.Fatal(err)
	}
	n.run()
	if len(b.plane.Pairs()) != 0 || len(a.Status()) != 1 {
		t.Errorf("after removing s2s: B holds %d pairs, A reports %d tunnels", len(b.plane.Pairs()), len(a.Status()))
	}
	if st := b.st("s2s"); !strings.Contains(st.Reason, "deleted the IKE SA") {
		t.Errorf("B after A removed the tunnel: %s %q", st.State, st.Reason)
	}
	c.want(t, "c", ipsec.StateUp, "")
}
