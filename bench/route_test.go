package bench

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/iked"
	"github.com/flashgate/flashgate/ipsec/iked/ikedns"
)

// routeSide is one gateway's configuration of a route tunnel to the other:
// any-to-any selectors, ipsec0, the far LAN routed through it.
func routeSide(t config.Tunnel, far netip.Prefix) *config.Config {
	t.Mode, t.Interface = config.ModeRoute, "ipsec0"
	t.LocalSubnets, t.RemoteSubnets = nil, nil
	return &config.Config{Tunnels: []config.Tunnel{t}, Routes: []config.Route{{Name: "far", Enabled: true,
		Destination: config.MustPrefix(far.String()), Interface: "ipsec0", Metric: 100}}}
}

// BenchmarkRouteTunnelTCP measures one TCP stream host to host through a
// route tunnel (both gateways iked, userspace plane, ipsec0 with a route
// to the far LAN) and through a policy tunnel with the same proposals on
// another topology of the same shape. Each of the b.N rounds runs iperf3
// through both, one after the other, the order swapped every round so
// that neither always runs first; on this shared machine one run can be
// half or twice the next whatever it carries, so the figure is the
// median of the rounds' ratios route/policy (route_ratio), with the
// medians of each side's runs (route_Mbit/s, policy_Mbit/s). The runs are
// short (routeRunTime) so that the two of a round see nearly the same
// machine, and many. Beside them, the median CPU time the ikeds spent per
// byte carried (route_cpu_ns/B, policy_cpu_ns/B): what each path costs,
// which a busy machine changes far less than what it carries. Each round
// is logged.
func BenchmarkRouteTunnelTCP(b *testing.B) {
	testnet.RequireTool(b, "iperf3", "iperf3")
	p := tunnelPair{ike: "aes128gcm16-prfsha256-ecp256", esp: "aes128gcm16"}
	pol := testnet.NewSiteToSite(b)
	pa, pb := p.start(b, pol)
	waitUp(b, pa, 10*time.Second)
	waitUp(b, pb, 5*time.Second)

	rt := testnet.NewSiteToSite(b)
	rb := ikedns.Start(b, rt.GwB, iked.Options{}, routeSide(p.tunnel(rt.GwBWAN, rt.GwAWAN, "gwB", "gwA", rt.LANB, rt.LANA, config.StartRespond), rt.LANA))
	ra := ikedns.Start(b, rt.GwA, iked.Options{}, routeSide(p.tunnel(rt.GwAWAN, rt.GwBWAN, "gwA", "gwB", rt.LANA, rt.LANB, config.StartInitiate), rt.LANB))
	waitUp(b, ra, 10*time.Second)
	waitUp(b, rb, 5*time.Second)
	if out, _ := rt.GwA.Output("ip", "-4", "route", "show", rt.LANB.String()); !strings.Contains(out, "dev ipsec0") {
		b.Fatalf("the route tunnel's route to LAN B: %q", out)
	}
	for _, s := range []*testnet.SiteToSite{pol, rt} {
		if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
			b.Fatalf("hostA cannot reach hostB: %v", err)
		}
	}
	// run is one iperf3 run through s, with the CPU time this process
	// (both ikeds of both topologies; the idle one costs next to
	// nothing) spent per byte carried: a cost that a busy machine
	// changes far less than the throughput.
	type result struct {
		testnet.IperfResult
		cpuNsPerByte float64
	}
	run := func(s *testnet.SiteToSite) result {
		before := cpuTime(b)
		r, err := testnet.Iperf(s.HostB, s.HostA, s.HostBIP, 1, routeRunTime)
		if err != nil {
			b.Fatal(err)
		}
		bytes := r.Mbps * 1e6 / 8 * r.DurationSecond
		return result{r, float64(cpuTime(b)-before) / max(bytes, 1)}
	}
	var route, policy, ratios, routeCPU, policyCPU []float64
	for i := 0; i < b.N; i++ {
		var r, p result
		if i%2 == 0 {
			p = run(pol)
			r = run(rt)
		} else {
			r = run(rt)
			p = run(pol)
		}
		route, policy, ratios = append(route, r.Mbps), append(policy, p.Mbps), append(ratios, r.Mbps/p.Mbps)
		routeCPU, policyCPU = append(routeCPU, r.cpuNsPerByte), append(policyCPU, p.cpuNsPerByte)
		b.Logf("round %d (%s first): route %.0f Mbit/s (%d retransmits, iked %.2f ns CPU/byte), policy %.0f Mbit/s (%d retransmits, %.2f ns/byte), ratio %.2f",
			i+1, []string{"policy", "route"}[i%2], r.Mbps, r.Retransmits, r.cpuNsPerByte, p.Mbps, p.Retransmits, p.cpuNsPerByte, r.Mbps/p.Mbps)
	}
	b.ReportMetric(median(route), "route_Mbit/s")
	b.ReportMetric(median(policy), "policy_Mbit/s")
	b.ReportMetric(median(ratios), "route_ratio")
	b.ReportMetric(median(routeCPU), "route_cpu_ns/B")
	b.ReportMetric(median(policyCPU), "policy_cpu_ns/B")
	b.ReportMetric(0, "ns/op")
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// routeRunTime is one iperf3 run of BenchmarkRouteTunnelTCP.
const routeRunTime = 5 * time.Second

// median of xs (the mean of the middle two when there are evenly many).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// BenchmarkRouteFailover measures route.failover_s: gwA (iked) has two
// route tunnels to gwB's strongSwan, at two outer addresses (AWS's shape),
// with routes to LAN B at metrics 100 and 200 and DPD every second (dead
// after 3 s). Tunnel 1's peer side dies without a word (gwB drops its
// address, strongSwan forgets the tunnel); the figure is the time from
// then to the first ping from hostA to hostB carried by tunnel 2, probed
// every 100 ms.
func BenchmarkRouteFailover(b *testing.B) {
	var total float64
	for i := 0; i < b.N; i++ {
		total += routeFailoverOnce(b)
	}
	b.ReportMetric(total/float64(b.N), "failover_s")
	b.ReportMetric(0, "ns/op")
}

func routeFailoverOnce(b *testing.B) float64 {
	s := testnet.NewSiteToSite(b)
	peer2 := netip.MustParseAddr("10.10.0.3")
	if err := s.GwB.Run("ip", "addr", "add", peer2.String()+"/24", "dev", s.WANIfB); err != nil {
		b.Fatal(err)
	}
	p := tunnelPair{ike: "aes128gcm16-prfsha256-ecp256", esp: "aes128gcm16"}
	var conns []testnet.CharonConn
	c := &config.Config{}
	for i, addr := range []netip.Addr{s.GwBWAN, peer2} {
		n := []string{"t1", "t2"}[i]
		conns = append(conns, testnet.CharonConn{Name: n, LocalAddr: addr, RemoteAddr: s.GwAWAN, LocalID: "gwB" + n, RemoteID: "gwA",
			PSK: benchPSK, Proposals: p.ike, ESPProposals: p.esp, LocalTS: []netip.Prefix{s.LANB}, RemoteTS: []netip.Prefix{s.LANA},
			DPDDelay: time.Second})
		t := p.tunnel(s.GwAWAN, addr, "gwA", "gwB"+n, s.LANA, s.LANB, config.StartInitiate)
		t.Name, t.Mode, t.Interface = n, config.ModeRoute, []string{"ipsec0", "ipsec1"}[i]
		t.LocalSubnets, t.RemoteSubnets = nil, nil
		t.DPDInterval, t.DPDTimeout = config.Seconds(1), config.Seconds(3)
		c.Tunnels = append(c.Tunnels, t)
		c.Routes = append(c.Routes, config.Route{Name: "lan-b-" + n, Enabled: true,
			Destination: config.MustPrefix(s.LANB.String()), Interface: t.Interface, Metric: 100 * (i + 1)})
	}
	charon := testnet.StartCharon(b, s.GwB, conns...)
	d := ikedns.Start(b, s.GwA, iked.Options{}, c)
	deadline := time.Now().Add(20 * time.Second)
	for !(stateOf(d, "t1") == ipsec.StateUp && stateOf(d, "t2") == ipsec.StateUp) {
		if time.Now().After(deadline) {
			b.Fatalf("route tunnels not up: %+v", d.Status())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !carried(d, s, "t1") {
		b.Fatal("tunnel 1 does not carry the traffic with both up")
	}
	for _, cmd := range [][]string{
		{"nft", "add", "table", "ip", "fgkill"},
		{"nft", "add", "chain", "ip", "fgkill", "in", "{ type filter hook input priority -10; }"},
		{"nft", "add", "chain", "ip", "fgkill", "out", "{ type filter hook output priority -10; }"},
		{"nft", "add", "rule", "ip", "fgkill", "in", "ip", "daddr", s.GwBWAN.String(), "drop"},
		{"nft", "add", "rule", "ip", "fgkill", "out", "ip", "saddr", s.GwBWAN.String(), "drop"},
	} {
		if err := s.GwB.Run(cmd...); err != nil {
			b.Fatal(err)
		}
	}
	died := time.Now()
	charon.Swanctl("--terminate", "--ike", "t1", "--force", "--timeout", "1") // its DELETE is dropped
	for !carried(d, s, "t2") {
		if time.Since(died) > 60*time.Second {
			b.Fatalf("no failover to tunnel 2 within 60 s: %+v", d.Status())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(died).Seconds()
}

func stateOf(d *iked.Daemon, name string) ipsec.TunnelState {
	for _, st := range d.Status() {
		if st.Name == name {
			return st.State
		}
	}
	return ""
}

// carried pings hostB once from hostA and reports whether it passed and
// tunnel name's CHILD_SAs sent it.
func carried(d *iked.Daemon, s *testnet.SiteToSite, name string) bool {
	out := func() (n uint64) {
		for _, st := range d.Status() {
			if st.Name == name {
				for _, c := range st.Children {
					n += c.PacketsOut
				}
			}
		}
		return n
	}
	before := out()
	return testnet.Ping(s.HostA, s.HostBIP, 1) == nil && out() > before
}
