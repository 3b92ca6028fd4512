package ike

import (
	"crypto/rand"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// forget drops every SA of an endpoint without messages, so that a
// benchmark measures setups and not an ever-growing table.
func forget(ep *Endpoint) {
	for _, sa := range ep.SAs() {
		sa.mu.Lock()
		sa.die(nil)
		ev := sa.takeEvents()
		sa.mu.Unlock()
		runEvents(ev)
	}
}

func benchPair(b *testing.B, ike, esp string) (*testNet, *peer, *peer) {
	ca, cb := pairConfigs(ike, esp)
	n := newTestNet(b)
	a := n.addPeer("A", addrA, ca, nil)
	bb := n.addPeer("B", addrB, cb, nil)
	return n, a, bb
}

// BenchmarkSetup is one IKE_SA + CHILD_SA setup (IKE_SA_INIT and
// IKE_AUTH, PSK), both ends in this process: the CPU cost of a setup for
// initiator and responder together.
func BenchmarkSetup(b *testing.B) {
	for _, g := range []string{"ecp256", "curve25519", "ecp384", "ecp521", "modp2048", "modp3072", "modp4096"} {
		b.Run(g, func(b *testing.B) {
			n, a, bb := benchPair(b, "aes128gcm16-prfsha256-"+g, "aes128gcm16")
			// One setup before the clock starts: the curves' tables are
			// built on first use, which costs seconds on the emulated 386
			// board build and would be most of a short run's only setup.
			if _, err := a.ep.Initiate(a.cfg); err != nil {
				b.Fatal(err)
			}
			n.run()
			forget(a.ep)
			forget(bb.ep)
			n.ResetWire()
			b.ResetTimer()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := a.ep.Initiate(a.cfg); err != nil {
					b.Fatal(err)
				}
				n.run()
				if len(a.pairs) != 1 || len(bb.pairs) != 1 {
					b.Fatalf("iteration %d: pairs %d/%d", i, len(a.pairs), len(bb.pairs))
				}
				forget(a.ep)
				forget(bb.ep)
				n.ResetWire()
			}
		})
	}
}

// BenchmarkSetupParallel runs initiators on all CPUs against one
// responder endpoint and reports setups per second.
func BenchmarkSetupParallel(b *testing.B) {
	ca, cb := pairConfigs("aes128gcm16-prfsha256-ecp256", "aes128gcm16")
	var (
		mu   sync.Mutex
		nets = map[netip.Addr]*testNet{}
	)
	route := func(pkt []byte, local, remote netip.AddrPort) error {
		mu.Lock()
		n := nets[remote.Addr()]
		mu.Unlock()
		return n.send(pkt, local, remote)
	}
	resp, err := NewEndpoint(EndpointConfig{Send: route, PeerFor: func(_, remote netip.AddrPort) *PeerConfig { return cb },
		MaxHalfOpen: 1 << 20, CookieThreshold: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Uint32
	var done atomic.Int64
	b.ReportAllocs()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		id := next.Add(1)
		addr := netip.AddrFrom4([4]byte{10, 20, byte(id >> 8), byte(id)})
		n := newTestNet(b)
		cfg := *ca
		cfg.Local = netip.AddrPortFrom(addr, 500)
		var ups atomic.Int64
		init := n.addPeer("I", addr.String(), &cfg, nil)
		init.ep.cfg.Events.ChildUp = func(ChildUp) { ups.Add(1) }
		n.attach(netip.MustParseAddr(addrB), &peer{ep: resp})
		mu.Lock()
		nets[addr] = n
		mu.Unlock()
		for pb.Next() {
			before := ups.Load()
			init.ep.Initiate(&cfg)
			n.run()
			if ups.Load() != before+1 {
				b.Error("setup failed")
				return
			}
			forget(init.ep)
			n.ResetWire()
			done.Add(1)
		}
	})
	b.ReportMetric(float64(done.Load())/time.Since(start).Seconds(), "setups/s")
	forget(resp)
}

// BenchmarkBytesPerSA measures the heap held per established IKE SA with
// one CHILD_SA, averaged over both ends (each end holds one IKESA per
// tunnel).
func BenchmarkBytesPerSA(b *testing.B) {
	const perRound = 200
	var total float64
	for i := 0; i < b.N; i++ {
		n, a, bb := benchPair(b, "aes128gcm16-prfsha256-ecp256", "aes128gcm16")
		// The test's pretend data plane would hold the keys; drop them.
		a.ep.cfg.Events.ChildUp = func(u ChildUp) { u.In.Zero(); u.Out.Zero() }
		bb.ep.cfg.Events.ChildUp = a.ep.cfg.Events.ChildUp
		var ms0, ms1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		for j := 0; j < perRound; j++ {
			a.ep.Initiate(a.cfg)
			n.run()
			n.ResetWire()
		}
		runtime.GC()
		runtime.ReadMemStats(&ms1)
		if ga, gb := len(a.established()), len(bb.established()); ga != perRound || gb != perRound {
			b.Fatalf("%d/%d SAs established, want %d on each side", ga, gb, perRound)
		}
		total += float64(ms1.HeapAlloc-ms0.HeapAlloc) / (2 * perRound)
		runtime.KeepAlive(n)
	}
	b.ReportMetric(total/float64(b.N), "bytes/ike_sa")
}

func ExampleParseProposal() {
	p, _ := ParseProposal(ProtoIKE, "aes256-sha256-modp2048")
	fmt.Println(p, p.PRF[0] == PRF_HMAC_SHA2_256)
	// Output: aes256-sha256-modp2048 true
}

// BenchmarkDH is one side's Diffie-Hellman work in a setup: an ephemeral
// key, its public value, and the shared secret from the peer's public value.
// Reported as ms/dh, the figure the board build's dh.<group>_ms_386 uses.
func BenchmarkDH(b *testing.B) {
	for _, g := range []DHGroup{MODP2048, ECP256, ECP384, Curve25519} {
		b.Run(g.String(), func(b *testing.B) {
			peer, err := newDHKey(g, rand.Reader)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			for i := 0; i < b.N; i++ {
				k, err := newDHKey(g, rand.Reader)
				if err != nil {
					b.Fatal(err)
				}
				k.Public()
				if _, err := k.Shared(peer.Public()); err != nil {
					b.Fatal(err)
				}
				k.Zero()
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/dh")
		})
	}
}
