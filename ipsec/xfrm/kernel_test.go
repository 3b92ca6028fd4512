package xfrm

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/flashgate/flashgate/ipsec"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The tests in this file build two network namespaces joined by a veth
// pair, gateway A and gateway B, each with an inner address on its
// loopback:
//
//	A: 172.16.1.1 (lo), 10.99.0.1/24 (fga) <---> (fgb) 10.99.0.2/24, 172.16.2.1 (lo) :B
//
// TestKernelTunnel installs a matched pair of SAs with our code on each
// side and sends UDP between the inner addresses, so every packet crosses
// the veth as ESP. It needs a kernel with ESP (the appliance's): elsewhere
// it skips with Probe's reason. The compiled test binary is self-contained
// (`go test -c`, then `./xfrm.test -test.v` as root in the VM).

var (
	outerA = netip.MustParseAddr("10.99.0.1")
	outerB = netip.MustParseAddr("10.99.0.2")
	innerA = netip.MustParseAddr("172.16.1.1")
	innerB = netip.MustParseAddr("172.16.2.1")
	netA   = netip.MustParsePrefix("172.16.1.0/24")
	netB   = netip.MustParsePrefix("172.16.2.0/24")
	netC   = netip.MustParsePrefix("172.16.3.0/24") // trapped, no SA
)

// inNamespace runs f on a thread switched into ns. If the thread cannot be
// switched back it stays locked, so Go discards it with the goroutine.
func inNamespace(ns netns.NsHandle, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		ferr := f()
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("back to the original namespace: %w", err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

type gateway struct {
	ns     netns.NsHandle
	outer  netip.Addr
	inner  netip.Addr
	peer   netip.Addr // the other side's outer address
	remote []netip.Prefix
}

// twoGateways builds the namespaces, the veth pair, addresses and routes.
func twoGateways(t *testing.T) (a, b *gateway) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test creates network namespaces: run it as root")
	}
	nsA, err := newNamespace()
	if err != nil {
		t.Fatalf("create namespace A: %v", err)
	}
	t.Cleanup(func() { nsA.Close() })
	nsB, err := newNamespace()
	if err != nil {
		t.Fatalf("create namespace B: %v", err)
	}
	t.Cleanup(func() { nsB.Close() })
	a = &gateway{ns: nsA, outer: outerA, inner: innerA, peer: outerB, remote: []netip.Prefix{netB, netC}}
	b = &gateway{ns: nsB, outer: outerB, inner: innerB, peer: outerA, remote: []netip.Prefix{netA}}

	hA, err := netlink.NewHandleAt(nsA, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer hA.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "fga"}, PeerName: "fgb", PeerNamespace: netlink.NsFd(nsB)}
	if err := hA.LinkAdd(veth); err != nil {
		t.Fatalf("create veth pair: %v", err)
	}
	for _, g := range []*gateway{a, b} {
		name := map[*gateway]string{a: "fga", b: "fgb"}[g]
		h, err := netlink.NewHandleAt(g.ns, unix.NETLINK_ROUTE)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		must := func(what string, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s in namespace of %v: %v", what, g.outer, err)
			}
		}
		lo, err := h.LinkByName("lo")
		must("find lo", err)
		dev, err := h.LinkByName(name)
		must("find "+name, err)
		must("address on lo", h.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: g.inner.AsSlice(), Mask: net.CIDRMask(32, 32)}}))
		must("address on "+name, h.AddrAdd(dev, &netlink.Addr{IPNet: &net.IPNet{IP: g.outer.AsSlice(), Mask: net.CIDRMask(24, 32)}}))
		must("lo up", h.LinkSetUp(lo))
		must(name+" up", h.LinkSetUp(dev))
		for _, r := range g.remote {
			must("route to "+r.String(), h.RouteAdd(&netlink.Route{
				LinkIndex: dev.Attrs().Index,
				Dst:       &net.IPNet{IP: r.Addr().AsSlice(), Mask: net.CIDRMask(r.Bits(), 32)},
				Gw:        g.peer.AsSlice(),
				Src:       g.inner.AsSlice(),
			}))
		}
	}
	// A veth carries packets only once both ends are up and the carrier is
	// on; until then sends are dropped.
	deadline := time.Now().Add(5 * time.Second)
	for _, g := range []*gateway{a, b} {
		name := map[*gateway]string{a: "fga", b: "fgb"}[g]
		h, err := netlink.NewHandleAt(g.ns, unix.NETLINK_ROUTE)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		for {
			l, err := h.LinkByName(name)
			if err == nil && l.Attrs().RawFlags&unix.IFF_RUNNING != 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not come up within 5 s (err %v)", name, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return a, b
}

// echo starts a UDP echo server on g's inner address and returns its
// address; it stops with the test.
func echo(t *testing.T, g *gateway) netip.AddrPort {
	t.Helper()
	var conn *net.UDPConn
	err := inNamespace(g.ns, func() (err error) {
		conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(g.inner, 7777)))
		return err
	})
	if err != nil {
		t.Fatalf("echo server on %v: %v", g.inner, err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			conn.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	return netip.AddrPortFrom(g.inner, 7777)
}

// exchange sends count datagrams from g's inner address to dst and returns
// how many came back, and the last error seen. Each waits at most 500 ms
// for its echo.
func exchange(t *testing.T, g *gateway, dst netip.AddrPort, count int) (int, error) {
	t.Helper()
	var conn *net.UDPConn
	err := inNamespace(g.ns, func() (err error) {
		conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(g.inner, 0)))
		return err
	})
	if err != nil {
		t.Fatalf("client socket on %v: %v", g.inner, err)
	}
	defer conn.Close()
	got := 0
	var last error
	buf := make([]byte, 2048)
	for i := range count {
		msg := []byte(fmt.Sprintf("flashgate xfrm test %d", i))
		if _, err := conn.WriteToUDPAddrPort(msg, dst); err != nil {
			last = err // e.g. EAGAIN while an SA is being acquired
			continue
		}
		conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, _, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			last = err
			continue
		}
		if string(buf[:n]) == string(msg) {
			got++
		}
	}
	return got, last
}

// TestNamespaceHarness checks the namespaces, veth and echo used by the
// kernel test, in clear, so that a failure of TestKernelTunnel in the VM
// points at XFRM and not at the harness. It runs on any kernel with netns.
func TestNamespaceHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	a, b := twoGateways(t)
	dst := echo(t, b)
	if got, err := exchange(t, a, dst, 5); got != 5 {
		t.Fatalf("clear UDP %v -> %v: %d of 5 echoes came back (last error: %v)", a.inner, dst, got, err)
	}
}

func randomKey(t *testing.T, n int) []byte {
	k := make([]byte, n)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// pairFor returns the (in, out) CHILD_SAs of gateway g for a tunnel whose
// SPIs and keys are given from A's point of view.
func pairFor(g *gateway, a bool, tr ipsec.Transform, spiAB, spiBA uint32, keyAB, keyBA, intAB, intBA []byte, natt bool) (in, out *ipsec.ChildSA) {
	local := []netip.Prefix{netA}
	remote := []netip.Prefix{netB}
	if !a {
		local, remote = remote, local
	}
	mk := func(spi uint32, src, dst netip.Addr, enc, integ []byte, inbound bool) *ipsec.ChildSA {
		c := &ipsec.ChildSA{
			ReqID: 5, SPI: spi, Inbound: inbound, Src: src, Dst: dst, Transform: tr,
			EncKey: append([]byte{}, enc...), IntegKey: append([]byte{}, integ...),
			LocalTS: local, RemoteTS: remote, ReplayWindow: 1024,
			SoftLifetime: 50 * time.Minute, HardLifetime: time.Hour,
		}
		if natt {
			c.EncapSrcPort, c.EncapDstPort = 4500, 4500
		}
		return c
	}
	if a {
		in = mk(spiBA, outerB, outerA, keyBA, intBA, true)
		out = mk(spiAB, outerA, outerB, keyAB, intAB, false)
		out.SoftBytes = softBytes // a soft expire after a few packets, to see the event
	} else {
		in = mk(spiAB, outerA, outerB, keyAB, intAB, true)
		out = mk(spiBA, outerB, outerA, keyBA, intBA, false)
	}
	return in, out
}

// softBytes is the soft byte limit of A's outbound SA: the kernel counts
// inner bytes, about 50 per test datagram, so a few packets cross it.
const softBytes = 400

func TestKernelTunnel(t *testing.T) {
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
	tests := []struct {
		name     string
		tr       ipsec.Transform
		encLen   int
		integLen int
		natt     bool
	}{
		{"aes128gcm16", ipsec.Transform{Encryption: "rfc4106(gcm(aes))", EncKeyBits: 128, ICVBits: 128}, 20, 0, false},
		{"aes128-sha256", ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 128, Integrity: "hmac(sha256)"}, 16, 32, false},
		{"aes256-sha1 in UDP", ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 256, Integrity: "hmac(sha1)"}, 32, 20, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := twoGateways(t)
			planes := map[*gateway]*Plane{}
			for _, g := range []*gateway{a, b} {
				p, err := New(Options{Netns: g.ns})
				if err != nil {
					t.Fatalf("New plane in namespace of %v: %v", g.outer, err)
				}
				t.Cleanup(func() { p.Close() })
				planes[g] = p
				if tc.natt {
					var sock *net.UDPConn
					err := inNamespace(g.ns, func() (err error) {
						sock, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(g.outer, 4500)))
						return err
					})
					if err != nil {
						t.Fatalf("UDP 4500 socket: %v", err)
					}
					t.Cleanup(func() { sock.Close() })
					if err := SetESPInUDP(sock); err != nil {
						t.Fatal(err)
					}
				}
			}
			const spiAB, spiBA = 0xa0b00001, 0xb0a00001
			keyAB, keyBA := randomKey(t, tc.encLen), randomKey(t, tc.encLen)
			intAB, intBA := randomKey(t, tc.integLen), randomKey(t, tc.integLen)
			inA, outA := pairFor(a, true, tc.tr, spiAB, spiBA, keyAB, keyBA, intAB, intBA, tc.natt)
			inB, outB := pairFor(b, false, tc.tr, spiAB, spiBA, keyAB, keyBA, intAB, intBA, tc.natt)
			if err := planes[a].AddPair(inA, outA); err != nil {
				t.Fatalf("A: %v", err)
			}
			if err := planes[b].AddPair(inB, outB); err != nil {
				t.Fatalf("B: %v", err)
			}
			// The kernel holds the keys: the plane zeroed the ChildSAs'
			// and keeps no copy (the traffic below still flows).
			for _, c := range []*ipsec.ChildSA{inA, outA, inB, outB} {
				if slices.ContainsFunc(append(slices.Clone(c.EncKey), c.IntegKey...), func(b byte) bool { return b != 0 }) {
					t.Errorf("SA %08x: keys not zeroed once installed", c.SPI)
				}
			}
			if err := planes[a].AddPair(inA, outA); err == nil {
				t.Error("adding the same pair twice: expected an error")
			}
			if got := routesIn(t, planes[a]); !slices.Contains(got, outA.RemoteTS[0].Masked()) {
				t.Errorf("table %d of A holds %v, expected a route for the remote subnet %v", RouteTable, got, outA.RemoteTS[0])
			}

			dst := echo(t, b)
			const count = 20
			got, lastErr := exchange(t, a, dst, count)
			if got < count/2 {
				t.Fatalf("through the tunnel %v -> %v: %d of %d echoes came back (last error: %v)", a.inner, dst, got, count, lastErr)
			}
			for _, c := range []struct {
				p    *Plane
				spi  uint32
				what string
			}{{planes[a], spiAB, "A out"}, {planes[b], spiAB, "B in"}, {planes[b], spiBA, "B out"}, {planes[a], spiBA, "A in"}} {
				st, err := c.p.Stats(c.spi)
				if err != nil {
					t.Fatalf("%s stats: %v", c.what, err)
				}
				t.Logf("%s SA %08x: %d packets, %d bytes, %d replay drops, %d integrity failures", c.what, c.spi, st.Packets, st.Bytes, st.ReplayDrops, st.AuthFailures)
				if st.Packets < uint64(got) || st.Bytes < softBytes {
					t.Errorf("%s SA %08x: %d packets and %d bytes, expected at least %d packets and %d bytes", c.what, c.spi, st.Packets, st.Bytes, got, softBytes)
				}
				if st.AuthFailures != 0 || st.ReplayDrops != 0 {
					t.Errorf("%s SA %08x: %d integrity failures, %d replay drops; expected none", c.what, c.spi, st.AuthFailures, st.ReplayDrops)
				}
			}

			select {
			case e := <-planes[a].Expires():
				if e.SPI != spiAB || e.Hard {
					t.Errorf("expire event %+v, expected a soft expire of %08x", e, uint32(spiAB))
				}
			case <-time.After(3 * time.Second):
				t.Errorf("no soft expire for SA %08x after %d packets over its %d-byte soft limit", uint32(spiAB), got, softBytes)
			}

			if err := planes[a].Trap(9, outerA, outerB, []netip.Prefix{netA}, []netip.Prefix{netC}); err != nil {
				t.Fatalf("trap: %v", err)
			}
			exchange(t, a, netip.AddrPortFrom(netip.MustParseAddr("172.16.3.1"), 7777), 1)
			select {
			case acq := <-planes[a].Acquires():
				if acq.ReqID != 9 || acq.Remote != netC || acq.Dst != outerB {
					t.Errorf("acquire %+v, expected reqid 9 for %v via %v", acq, netC, outerB)
				}
			case <-time.After(3 * time.Second):
				t.Error("no acquire after traffic hit the trap")
			}
			if err := planes[a].Untrap(9); err != nil {
				t.Error(err)
			}

			pols, _ := buildPolicies(inA, outA)
			if err := planes[a].DeletePair(spiBA); err != nil {
				t.Errorf("A delete: %v", err)
			}
			if err := planes[b].DeletePair(spiAB); err != nil {
				t.Errorf("B delete: %v", err)
			}
			if got := routesIn(t, planes[a]); len(got) != 0 {
				t.Errorf("table %d of A still holds %v after the pair was deleted", RouteTable, got)
			}
			for _, k := range [][]byte{inA.EncKey, outA.EncKey, inA.IntegKey, outB.EncKey} {
				for _, x := range k {
					if x != 0 {
						t.Fatal("keys not zeroed after DeletePair")
					}
				}
			}
			for _, spi := range []uint32{spiAB, spiBA} {
				dstAddr := map[uint32]netip.Addr{spiAB: outerB, spiBA: outerA}[spi]
				if _, err := planes[a].conn.request(msgGetSA, false, encodeUsersaID(dstAddr, spi)); !errors.Is(err, unix.ESRCH) {
					t.Errorf("SA %08x after delete: expected ESRCH, got %v", spi, err)
				}
			}
			for i := range pols {
				if _, err := planes[a].conn.request(0x15 /* XFRM_MSG_GETPOLICY */, false, encodePolicyID(&pols[i])); !errors.Is(err, unix.ENOENT) {
					t.Errorf("policy %s %v->%v after delete: expected ENOENT, got %v", dirName(pols[i].Dir), pols[i].Sel.Src, pols[i].Sel.Dst, err)
				}
			}
		})
	}
}

// routesIn lists the destinations in the plane's route table.
func routesIn(t *testing.T, p *Plane) []netip.Prefix {
	t.Helper()
	rs, err := p.routes.h.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: RouteTable}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatalf("list table %d: %v", RouteTable, err)
	}
	var out []netip.Prefix
	for _, r := range rs {
		if r.Dst == nil {
			continue
		}
		a, _ := netip.AddrFromSlice(r.Dst.IP)
		ones, _ := r.Dst.Mask.Size()
		out = append(out, netip.PrefixFrom(a.Unmap(), ones))
	}
	return out
}
