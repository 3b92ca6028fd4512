package esp

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
)

// routePair is a route tunnel between the two gateways' Devices: ipsecN
// on both sides with if_id, any-to-any selectors, and a route to the far
// LAN through it with metric.
func routePair(t *testing.T, tn *tunnel, ifID uint32, spiAB, spiBA uint32) {
	t.Helper()
	tc := transforms[0]
	s := tn.s
	any4 := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
	child := func(spi uint32, inbound bool, src, dst netip.Addr, seed byte) *ipsec.ChildSA {
		return &ipsec.ChildSA{ReqID: 10 + ifID, SPI: spi, Inbound: inbound, Src: src, Dst: dst,
			EncapSrcPort: 4500, EncapDstPort: 4500, Transform: tc.t, EncKey: seqBytes(tc.encBytes, seed),
			LocalTS: any4, RemoteTS: any4, ReplayWindow: 1024, IfID: ifID}
	}
	if err := tn.a.AddPair(child(spiBA, true, s.GwBWAN, s.GwAWAN, byte(ifID)+20), child(spiAB, false, s.GwAWAN, s.GwBWAN, byte(ifID)+10)); err != nil {
		t.Fatal(err)
	}
	if err := tn.b.AddPair(child(spiAB, true, s.GwAWAN, s.GwBWAN, byte(ifID)+10), child(spiBA, false, s.GwBWAN, s.GwAWAN, byte(ifID)+20)); err != nil {
		t.Fatal(err)
	}
}

func routesOf(t *testing.T, ns *testnet.NS, dst netip.Prefix) string {
	t.Helper()
	out, err := ns.Output("ip", "route", "show", dst.String())
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// TestRouteTunnelFailover: two route tunnels between the gateways (the
// AWS shape), each its own TUN with a route to the far LAN, metric 100
// and 200. Traffic takes ipsec0; when ipsec0's pair goes its route goes
// with it and ipsec1 carries the traffic; when a pair is back, so is the
// route, and the traffic returns. The policy TUN has no SA at all here,
// so whatever passes went by route.
func TestRouteTunnelFailover(t *testing.T) {
	tn := newTunnelPort(t, transforms[0], 4500)
	s := tn.s
	// Take the policy pair out: only the route tunnels are left.
	if err := tn.a.DeletePair(spiBtoA); err != nil {
		t.Fatal(err)
	}
	if err := tn.b.DeletePair(spiAtoB); err != nil {
		t.Fatal(err)
	}
	ifs := func(far netip.Prefix) []ipsec.TunnelInterface {
		return []ipsec.TunnelInterface{
			{Name: "ipsec0", IfID: 1, MTU: 1438, Routes: []ipsec.TunnelRoute{{Destination: far, Metric: 100}},
				Addresses: []netip.Prefix{netip.MustParsePrefix("169.254.10.1/30")}},
			{Name: "ipsec1", IfID: 2, MTU: 1438, Routes: []ipsec.TunnelRoute{{Destination: far, Metric: 200}}},
		}
	}
	for _, side := range []struct {
		ns  *testnet.NS
		d   *Device
		far netip.Prefix
	}{{s.GwA, tn.a, s.LANB}, {s.GwB, tn.b, s.LANA}} {
		if err := side.ns.Do(func() error { return side.d.SetInterfaces(ifs(side.far)) }); err != nil {
			t.Fatalf("SetInterfaces in %s: %v", side.ns.Name, err)
		}
	}
	if r := routesOf(t, s.GwA, s.LANB); r != "" {
		t.Fatalf("routes through tunnels without SAs: %q", r)
	}
	if out, _ := s.GwA.Output("ip", "-o", "addr", "show", "dev", "ipsec0"); !strings.Contains(out, "169.254.10.1/30") {
		t.Errorf("ipsec0's inner address missing: %q", out)
	}
	if out, _ := s.GwA.Output("ip", "-o", "link", "show", "dev", "ipsec0"); !strings.Contains(out, "mtu 1438") {
		t.Errorf("ipsec0's MTU: %q", out)
	}
	if err := testnet.Ping(s.HostA, s.HostBIP, 1); err == nil {
		t.Fatal("ping passed with no SA up")
	}
	routePair(t, tn, 1, 0xa1000001, 0xb1000001)
	routePair(t, tn, 2, 0xa2000001, 0xb2000001)
	if r := routesOf(t, s.GwA, s.LANB); !strings.Contains(r, "dev ipsec0") || !strings.Contains(r, "dev ipsec1") {
		t.Fatalf("routes with both tunnels up: %q", r)
	}
	sent := func(spi uint32) uint64 {
		st, err := tn.a.Stats(spi)
		if err != nil {
			t.Fatal(err)
		}
		return st.Packets
	}
	if err := testnet.Ping(s.HostA, s.HostBIP, 3); err != nil {
		t.Fatalf("ping through ipsec0: %v", err)
	}
	if n0, n1 := sent(0xa1000001), sent(0xa2000001); n0 < 3 || n1 != 0 {
		t.Fatalf("with both up: %d packets on ipsec0, %d on ipsec1; want ipsec0 only", n0, n1)
	}
	// ipsec0 goes down on both sides (as DPD would see it).
	if err := tn.a.DeletePair(0xb1000001); err != nil {
		t.Fatal(err)
	}
	if err := tn.b.DeletePair(0xa1000001); err != nil {
		t.Fatal(err)
	}
	if r := routesOf(t, s.GwA, s.LANB); strings.Contains(r, "ipsec0") || !strings.Contains(r, "dev ipsec1") {
		t.Fatalf("routes with ipsec0 down: %q", r)
	}
	if err := testnet.Ping(s.HostA, s.HostBIP, 3); err != nil {
		t.Fatalf("ping through ipsec1 after ipsec0 went: %v", err)
	}
	if n1 := sent(0xa2000001); n1 < 3 {
		t.Fatalf("%d packets on ipsec1 after failover", n1)
	}
	tcpTransfer(t, s, 4<<20)
	// ipsec0 is back: its route, and the traffic, return.
	routePair(t, tn, 1, 0xa1000002, 0xb1000002)
	before := sent(0xa2000001)
	if err := testnet.Ping(s.HostA, s.HostBIP, 3); err != nil {
		t.Fatalf("ping after ipsec0 came back: %v", err)
	}
	if n0, n1 := sent(0xa1000002), sent(0xa2000001)-before; n0 < 3 || n1 != 0 {
		t.Fatalf("after recovery: %d packets on ipsec0, %d more on ipsec1", n0, n1)
	}
	// Removing an interface takes its routes and TUN.
	if err := s.GwA.Do(func() error { return tn.a.SetInterfaces(ifs(s.LANB)[1:]) }); err != nil {
		t.Fatal(err)
	}
	if out, err := s.GwA.Output("ip", "link", "show", "dev", "ipsec0"); err == nil {
		t.Errorf("ipsec0 still there: %s", out)
	}
	if r := routesOf(t, s.GwA, s.LANB); strings.Contains(r, "ipsec0") {
		t.Errorf("route through a removed interface: %q", r)
	}
	if err := tn.a.AddPair(&ipsec.ChildSA{SPI: 0x1234, Inbound: true, IfID: 9}, &ipsec.ChildSA{SPI: 0x1235, IfID: 9,
		Src: s.GwAWAN, Dst: s.GwBWAN, EncapSrcPort: 4500, EncapDstPort: 4500, Transform: transforms[0].t,
		EncKey: seqBytes(transforms[0].encBytes, 1)}); err == nil {
		t.Error("AddPair accepted an if_id without an interface")
	}
}
