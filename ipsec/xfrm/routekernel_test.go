package xfrm

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/tunnelif"
)

// TestKernelRouteTunnel: a route-based tunnel in the kernel plane, run in
// the VM (vmcheck) on the board's kernel: each gateway gets an XFRM
// interface ipsec0 (if_id 1, MTU 1400, an inner /30) and a pair with
// any-to-any selectors carrying the if_id. The route to the far inner
// address through ipsec0 appears with the pair and wins over the clear
// route through the veth (a /32 against the /24), so the UDP echo is
// carried by the SAs, while clear traffic between the outer addresses
// still passes: the 0.0.0.0/0 policies catch only what is routed into
// ipsec0. When the pair goes, so does the route (and the echo goes in
// clear again through the veth).
func TestKernelRouteTunnel(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test creates network namespaces: run it as root")
	}
	if err := Probe(); err != nil {
		if errors.Is(err, ErrNoESP) {
			t.Skipf("needs a kernel with ESP (run it in the appliance VM): %v", err)
		}
		t.Fatalf("probe: %v", err)
	}
	a, b := twoGateways(t)
	tr := ipsec.Transform{Encryption: "rfc4106(gcm(aes))", EncKeyBits: 128, ICVBits: 128}
	keyAB, keyBA := randomKey(t, 20), randomKey(t, 20)
	const spiAB, spiBA = 0xa0c00001, 0xb0c00001
	anyTS := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
	pair := func(g *gateway, isA bool) (in, out *ipsec.ChildSA) {
		in, out = pairFor(g, isA, tr, spiAB, spiBA, keyAB, keyBA, nil, nil, false)
		for _, c := range []*ipsec.ChildSA{in, out} {
			c.IfID, c.LocalTS, c.RemoteTS, c.SoftBytes = 1, anyTS, anyTS, 0
		}
		return in, out
	}
	planes := map[*gateway]*Plane{}
	farInner := map[*gateway]netip.Addr{a: innerB, b: innerA}
	for _, g := range []*gateway{a, b} {
		p, err := New(Options{Netns: g.ns})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		planes[g] = p
		inner := map[*gateway]string{a: "169.254.10.1/30", b: "169.254.10.2/30"}[g]
		err = p.SetInterfaces([]ipsec.TunnelInterface{{Name: "ipsec0", IfID: 1, MTU: 1400,
			Addresses: []netip.Prefix{netip.MustParsePrefix(inner)},
			Routes:    []ipsec.TunnelRoute{{Destination: netip.PrefixFrom(farInner[g], 32), Metric: 10}}}})
		if err != nil {
			t.Fatalf("SetInterfaces in namespace of %v: %v", g.outer, err)
		}
		l, err := p.routes.h.LinkByName("ipsec0")
		if err != nil {
			t.Fatal(err)
		}
		x, ok := l.(*netlink.Xfrmi)
		if !ok || x.Ifid != 1 || l.Attrs().MTU != 1400 {
			t.Fatalf("ipsec0 is %T %+v, want an xfrm interface with if_id 1 and MTU 1400", l, l.Attrs())
		}
		if r := tunnelRoutes(t, p); len(r) != 0 {
			t.Errorf("routes through ipsec0 before any SA: %v", r)
		}
	}
	inA, outA := pair(a, true)
	inB, outB := pair(b, false)
	if err := planes[a].AddPair(inA, outA); err != nil {
		t.Fatalf("A: %v", err)
	}
	if err := planes[b].AddPair(inB, outB); err != nil {
		t.Fatalf("B: %v", err)
	}
	if r := tunnelRoutes(t, planes[a]); len(r) != 1 || !strings.Contains(r[0], innerB.String()) {
		t.Fatalf("A's routes through ipsec0 with the pair up: %v", r)
	}
	dst := echo(t, b)
	const count = 10
	if got, err := exchange(t, a, dst, count); got < count/2 {
		t.Fatalf("through ipsec0 %v -> %v: %d of %d echoes (last error %v)", a.inner, dst, got, count, err)
	}
	for _, c := range []struct {
		p    *Plane
		spi  uint32
		what string
	}{{planes[a], spiAB, "A out"}, {planes[b], spiAB, "B in"}, {planes[b], spiBA, "B out"}, {planes[a], spiBA, "A in"}} {
		st, err := c.p.Stats(c.spi)
		if err != nil {
			t.Fatal(err)
		}
		if st.Packets < count/2 {
			t.Errorf("%s SA %08x carried %d packets: the echo did not go by route through ipsec0", c.what, c.spi, st.Packets)
		}
	}
	// Clear traffic between the outer addresses is not the tunnel's.
	outerEcho := netip.AddrPortFrom(outerB, 7778)
	var srv *net.UDPConn
	if err := inNamespace(b.ns, func() (err error) { srv, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(outerEcho)); return err }); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	clear := &gateway{ns: a.ns, inner: outerA}
	if got, err := exchange(t, clear, outerEcho, 3); got != 3 {
		t.Errorf("clear UDP between the outer addresses with 0.0.0.0/0 policies on ipsec0: %d of 3 (%v)", got, err)
	}
	if err := planes[a].DeletePair(spiBA); err != nil {
		t.Fatal(err)
	}
	if err := planes[b].DeletePair(spiAB); err != nil {
		t.Fatal(err)
	}
	if r := tunnelRoutes(t, planes[a]); len(r) != 0 {
		t.Errorf("routes through ipsec0 after the pair went: %v", r)
	}
	// The echo falls back on the clear route through the veth.
	if got, err := exchange(t, a, dst, 3); got != 3 {
		t.Errorf("echo by the veth route after the tunnel's route went: %d of 3 (%v)", got, err)
	}
	if err := planes[a].SetInterfaces(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := planes[a].routes.h.LinkByName("ipsec0"); err == nil {
		t.Error("ipsec0 is still there after SetInterfaces(nil)")
	}
}

// tunnelRoutes lists the routes tunnelif added in the plane's namespace.
func tunnelRoutes(t *testing.T, p *Plane) []string {
	t.Helper()
	rs, err := p.routes.h.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: unix.RT_TABLE_MAIN, Protocol: tunnelif.RouteProtocol},
		netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		out = append(out, r.String())
	}
	return out
}
