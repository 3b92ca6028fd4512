package iked

import (
	"fmt"
	"net/netip"
	"os"
	"path"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/ike"
	"github.com/flashgate/flashgate/ipsec/ike/iketest"
	"github.com/flashgate/flashgate/ipsec/iked/ikedtest"
)

// memHub is a head office in this process: one Daemon with n respond
// tunnels on iketest's network, and n branches played by one engine (as
// bench/spokes does over real sockets), so that what the hub holds per
// IKE_SA and CHILD_SA can be read from the Go heap.
type memHub struct {
	tb     testing.TB
	net    *iketest.Network
	d      *Daemon
	spokes []*ike.PeerConfig
	ep     *ike.Endpoint
	ups    atomic.Int64
}

var (
	memHubAddr = netip.MustParseAddr("10.97.0.1")
	memHubLAN  = netip.MustParsePrefix("10.98.0.1/32")
)

const memHubPSK = "hub-memory-psk-0123456789"

// memHubSpoke is the address, identity and LAN of branch i.
func memHubSpoke(i int) (addr netip.Addr, id string, lan netip.Prefix) {
	addr = netip.AddrFrom4([4]byte{10, 99, byte(1 + i/250), byte(1 + i%250)})
	lan = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200, byte(i / 250), byte(1 + i%250)}), 32)
	return addr, fmt.Sprintf("spoke%d.example", i), lan
}

// newMemHub starts the hub on dp (the userspace ESP device in a test
// namespace, or ikedtest's plane) with n configured respond tunnels.
func newMemHub(tb testing.TB, dp DataPlane, n int) *memHub {
	tb.Helper()
	h := &memHub{tb: tb, net: iketest.NewNetwork()}
	tr := ikedtest.NewTransport(h.net, memHubAddr, 0)
	d, err := New(Options{Now: h.net.Clock.Now, TickInterval: -1, ForceEncap: true, Logf: tb.Logf}, dp, tr)
	if err != nil {
		tb.Fatal(err)
	}
	h.d = d
	d.Run()
	tb.Cleanup(func() { d.Close() })
	var tunnels []config.Tunnel
	for i := range n {
		addr, id, lan := memHubSpoke(i)
		t := tunnelConfig(memHubAddr, addr, "hub.example", id, memHubLAN, lan, "aes128gcm16-prfsha256-ecp256", "aes128gcm16", config.StartRespond)
		t.Name = fmt.Sprintf("branch%d", i)
		t.PSK = config.NewSecret(memHubPSK)
		tunnels = append(tunnels, t)
	}
	if err := d.Apply(&config.Config{Tunnels: tunnels}); err != nil {
		tb.Fatal(err)
	}
	return h
}

// attachSpokes puts the branches' addresses on the network (before the
// baseline: the network's table of hosts is the test's, not the hub's).
// IKE on the NAT-T port comes after the non-ESP marker (ikedtest.Transport
// takes it off for the hub).
func (h *memHub) attachSpokes(n int) {
	receive := func(pkt []byte, local, remote netip.AddrPort) {
		if local.Port() == 4500 {
			kind, msg := ike.ClassifyNATT(pkt)
			if kind != ike.NATTIKE {
				return
			}
			pkt = msg
		}
		if ep := h.ep; ep != nil {
			ep.HandleMessage(pkt, local, remote)
		}
	}
	for i := range n {
		addr, _, _ := memHubSpoke(i)
		h.net.Attach(addr, receive)
	}
}

// bringUp has every branch set up its IKE_SA and CHILD_SA, 50 at a time.
func (h *memHub) bringUp(n int) {
	tb := h.tb
	tb.Helper()
	var err error
	h.ep, err = ike.NewEndpoint(ike.EndpointConfig{Send: h.net.Send, Now: h.net.Clock.Now,
		Events: ike.Events{
			// The branches' own keys are not the hub's memory.
			ChildUp:   func(u ike.ChildUp) { u.In.Zero(); u.Out.Zero(); h.ups.Add(1) },
			ChildDown: func(*ike.IKESA, uint32, error) {},
			Failure:   func(p *ike.PeerConfig, err error) { tb.Logf("failure %s: %v", p.Name, err) },
		}})
	if err != nil {
		tb.Fatal(err)
	}
	ikeProps, _ := ike.ParseProposals(ike.ProtoIKE, "aes128gcm16-prfsha256-ecp256")
	espProps, _ := ike.ParseProposals(ike.ProtoESP, "aes128gcm16")
	hubID, _ := ike.ParseIdentity("hub.example")
	for i := range n {
		addr, idText, lan := memHubSpoke(i)
		id, err := ike.ParseIdentity(idText)
		if err != nil {
			tb.Fatal(err)
		}
		h.spokes = append(h.spokes, &ike.PeerConfig{Name: idText, Local: netip.AddrPortFrom(addr, 500),
			Remote: netip.AddrPortFrom(memHubAddr, 500), LocalID: id, RemoteID: hubID, PSK: []byte(memHubPSK),
			IKEProposals: ikeProps, ESPProposals: espProps,
			LocalTS: []netip.Prefix{lan}, RemoteTS: []netip.Prefix{memHubLAN}, ForceEncap: true})
	}
	for i, p := range h.spokes {
		if _, err := h.ep.Initiate(p); err != nil {
			tb.Fatalf("branch %d: %v", i, err)
		}
		if i%50 == 49 || i == n-1 {
			if err := h.net.Run(); err != nil {
				tb.Fatal(err)
			}
			h.net.ResetWire()
		}
	}
	if got := h.ups.Load(); got != int64(n) {
		tb.Fatalf("%d of %d branches' CHILD_SAs up", got, n)
	}
	up := 0
	for _, s := range h.d.Status() {
		if s.State == ipsec.StateUp {
			up++
		}
	}
	if up != n {
		tb.Fatalf("%d of %d hub tunnels up", up, n)
	}
}

// dropSpokes takes the branches off the network without a word to the
// hub, and forgets them: what is left on the heap is the hub's.
func (h *memHub) dropSpokes() {
	for i := range h.spokes {
		addr, _, _ := memHubSpoke(i)
		h.net.Detach(addr)
	}
	h.net.Discard()
	h.net.ResetWire()
	h.spokes, h.ep = nil, nil
}

type heapFigures struct{ alloc, inuse, stack, total uint64 }

func readHeap() heapFigures {
	// Twice: a finalizer's object is freed at the second.
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return heapFigures{ms.HeapAlloc, ms.HeapInuse, ms.StackInuse, ms.TotalAlloc}
}

// writeHeapProfile writes the heap profile as of the last GC (readHeap's).
func writeHeapProfile(tb testing.TB, file string) {
	w, err := os.Create(file)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Close()
	if err := pprof.Lookup("heap").WriteTo(w, 0); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("heap profile: go tool pprof -top -sample_index=inuse_space %s", file)
}

// processCPU is the CPU time this process has used (user and system).
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func perSA(after, before uint64, n int) float64 {
	return (float64(after) - float64(before)) / float64(n)
}

// memHubSize is the branch count of BenchmarkHubMemory: 1000, or
// $FLASHGATE_HUB_MEMORY_SPOKES.
func memHubSize(tb testing.TB) int {
	if s := os.Getenv("FLASHGATE_HUB_MEMORY_SPOKES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 62500 {
			tb.Fatalf("FLASHGATE_HUB_MEMORY_SPOKES: %q is not a branch count from 1 to 62500", s)
		}
		return n
	}
	return 1000
}

// BenchmarkHubMemory is bench's hub (BenchmarkHub) in one process: a
// Daemon with 1000 respond tunnels brings up an IKE_SA and a CHILD_SA with
// each of 1000 branches, and reports the Go heap it holds per SA after a
// GC (the branches are forgotten first): heap_alloc (live objects) and
// heap_inuse (their spans), goroutine stacks, and per configured tunnel
// before any SA; and the process's CPU time per setup (both ends, and the
// collector: GOGC's cost). With root the data plane is the userspace ESP device in
// a namespace of its own (sub-benchmark "userspace": its per-SA state is
// counted), without, ikedtest's memory plane ("memory"). The heap profile
// with every SA up (the hub's alone; FILE.memory and FILE.userspace):
//
//	FLASHGATE_HUB_MEMORY_PROFILE=/tmp/hub.heap go test -run '^$' -bench HubMemory -benchtime 1x -memprofilerate 1 ./ipsec/iked
//	go tool pprof -top -sample_index=inuse_space /tmp/hub.heap.userspace
func BenchmarkHubMemory(b *testing.B) {
	n := memHubSize(b)
	b.Run("memory", func(b *testing.B) {
		for range b.N {
			measureHubMemory(b, n, func(testing.TB) DataPlane { return ikedtest.NewPlane() })
		}
	})
	b.Run("userspace", func(b *testing.B) {
		if os.Geteuid() != 0 {
			b.Skip("the userspace ESP device needs a namespace (root)")
		}
		for range b.N {
			measureHubMemory(b, n, func(tb testing.TB) DataPlane {
				ns := testnet.NewNS(tb, testnet.Prefix()+"-mem")
				var dp DataPlane
				if err := ns.Do(func() (err error) { dp, _, err = OpenDataPlane("userspace", "fgesp0", 4500); return err }); err != nil {
					tb.Fatal(err)
				}
				return dp
			})
		}
	})
}

func measureHubMemory(b *testing.B, n int, plane func(testing.TB) DataPlane) {
	b.Helper()
	dp := plane(b)
	empty := readHeap()
	h := newMemHub(b, dp, n)
	tunnels := readHeap()
	h.attachSpokes(n)
	configured := readHeap()
	goroutines := runtime.NumGoroutine()
	cpu := processCPU(b)
	h.bringUp(n)
	cpu = processCPU(b) - cpu
	h.dropSpokes()
	up := readHeap()
	if f := os.Getenv("FLASHGATE_HUB_MEMORY_PROFILE"); f != "" {
		writeHeapProfile(b, fmt.Sprintf("%s.%s", f, path.Base(b.Name())))
	}
	b.ReportMetric(perSA(up.alloc, configured.alloc, n), "heap_alloc_bytes/sa")
	b.ReportMetric(perSA(up.inuse, configured.inuse, n), "heap_inuse_bytes/sa")
	b.ReportMetric(perSA(up.stack, configured.stack, n), "stack_bytes/sa")
	// Everything allocated over the setups, both ends: the garbage is
	// what the collector's CPU goes to, and what fragments the spans the
	// SAs' objects stay in.
	b.ReportMetric(perSA(up.total, configured.total, n), "allocated_bytes/sa")
	b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/float64(n), "goroutines/sa")
	b.ReportMetric(perSA(tunnels.alloc, empty.alloc, n), "heap_alloc_bytes/tunnel")
	// Both ends' CPU (the branches are an engine in this process too), the
	// collector's included: what GOGC costs per setup.
	b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu_us/sa")
	b.ReportMetric(0, "ns/op")
	runtime.KeepAlive(h)
}
