package esp

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
)

// TestTrap: a trapped prefix is routed into the TUN without an SA; packets
// for it are dropped and reported to OnMissingSA, once per destination
// per MissingSAInterval however many are sent; the route outlives the trap
// while a pair needs it, and goes with the last holder.
func TestTrap(t *testing.T) {
	skipShort(t)
	testnet.RequireRoot(t)
	ns := testnet.NewNS(t, testnet.Prefix()+"-tp")
	var (
		mu   sync.Mutex
		seen []netip.Addr
	)
	hook := func(dst netip.Addr) {
		mu.Lock()
		seen = append(seen, dst)
		mu.Unlock()
	}
	var d *Device
	if err := ns.Do(func() (err error) {
		d, err = NewDevice(Config{TUN: "fgesp0", Workers: 2, OnMissingSA: hook})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	trapped := netip.MustParsePrefix("10.77.0.0/16")
	route := func() bool {
		out, err := ns.Output("ip", "-4", "route", "show", trapped.String())
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(out, "fgesp0")
	}
	if err := d.AddTrap([]netip.Prefix{trapped}); err != nil {
		t.Fatal(err)
	}
	if !route() {
		t.Fatalf("no route for %v into fgesp0 after AddTrap", trapped)
	}

	send := func(dst string, n int) {
		t.Helper()
		err := ns.Do(func() error {
			c, err := net.Dial("udp4", dst+":9")
			if err != nil {
				return err
			}
			defer c.Close()
			for range n {
				c.Write([]byte("trap"))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	count := func(a netip.Addr) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, s := range seen {
			if s == a {
				n++
			}
		}
		return n
	}
	a1, a2 := netip.MustParseAddr("10.77.1.1"), netip.MustParseAddr("10.77.2.2")
	before := d.Counters.NoSA.Load()
	send(a1.String(), 50)
	send(a2.String(), 1)
	deadline := time.Now().Add(2 * time.Second)
	for (count(a1) == 0 || count(a2) == 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := d.Counters.NoSA.Load() - before; got != 51 {
		t.Errorf("NoSA counted %d packets, want the 51 sent", got)
	}
	if count(a1) != 1 || count(a2) != 1 {
		t.Fatalf("OnMissingSA saw %v, want %v and %v once each", seen, a1, a2)
	}
	time.Sleep(MissingSAInterval + 100*time.Millisecond)
	send(a1.String(), 1)
	deadline = time.Now().Add(2 * time.Second)
	for count(a1) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if count(a1) != 2 {
		t.Errorf("OnMissingSA saw %v %d times, want 2: a packet after MissingSAInterval reports again", a1, count(a1))
	}

	// A pair for the same prefix shares the route.
	tc := transforms[0]
	in := &ipsec.ChildSA{SPI: 0x1234, Inbound: true, Transform: tc.t, EncKey: seqBytes(tc.encBytes, 1),
		Src: netip.MustParseAddr("10.9.0.2"), Dst: netip.MustParseAddr("10.9.0.1"),
		RemoteTS: []netip.Prefix{netip.MustParsePrefix("10.8.0.0/24")}, LocalTS: []netip.Prefix{trapped}}
	out := &ipsec.ChildSA{SPI: 0x5678, Transform: tc.t, EncKey: seqBytes(tc.encBytes, 2),
		Src: in.Dst, Dst: in.Src, EncapSrcPort: 4500, EncapDstPort: 4500,
		LocalTS: []netip.Prefix{netip.MustParsePrefix("10.8.0.0/24")}, RemoteTS: []netip.Prefix{trapped}}
	if err := d.AddPair(in, out); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteTrap([]netip.Prefix{trapped}); err != nil {
		t.Fatal(err)
	}
	if !route() {
		t.Errorf("the route for %v went with the trap while a pair still needs it", trapped)
	}
	if err := d.AddTrap([]netip.Prefix{trapped}); err != nil {
		t.Fatal(err)
	}
	if err := d.DeletePair(0x1234); err != nil {
		t.Fatal(err)
	}
	if !route() {
		t.Errorf("the route for %v went with the pair while the trap still needs it", trapped)
	}
	if err := d.DeleteTrap([]netip.Prefix{trapped}); err != nil {
		t.Fatal(err)
	}
	if route() {
		t.Errorf("the route for %v is still there after its last trap and pair went", trapped)
	}
}

// BenchmarkMissingSA is the TX worker's cost for a packet no SA covers,
// with a hook installed: a burst for one destination must not allocate.
func BenchmarkMissingSA(b *testing.B) {
	d := &Device{missing: make(chan netip.Addr, missingQueue)}
	pkt := ipv4Packet(64, 1)
	var r missingReporter
	b.ReportAllocs()
	for b.Loop() {
		r.report(d, pkt)
		select {
		case <-d.missing:
		default:
		}
	}
}
