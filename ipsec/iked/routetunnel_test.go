package iked

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
)

// routeTunnel is gateway A's side of a route tunnel to remote: no subnets
// (any-to-any selectors), interface ifc.
func routeTunnel(name, ifc string, local, remote netip.Addr, rid string) config.Tunnel {
	any4 := netip.MustParsePrefix("0.0.0.0/0")
	t := tunnelConfig(local, remote, "gwA", rid, any4, any4, interopSuites[0].ike, interopSuites[0].esp, config.StartInitiate)
	t.Name, t.Mode, t.Interface = name, config.ModeRoute, ifc
	t.LocalSubnets, t.RemoteSubnets = nil, nil
	return t
}

// startIkedConfig runs a daemon (userspace data plane) inside ns with a
// whole configuration (route tunnels need their routes). Other packages
// use ikedns.Start, which this package cannot import.
func startIkedConfig(t testing.TB, ns *testnet.NS, c *config.Config) *Daemon {
	t.Helper()
	var d *Daemon
	err := ns.Do(func() error {
		var err error
		if d, err = Open(Options{DataPlane: "userspace", Logf: t.Logf}); err != nil {
			return err
		}
		d.Run()
		return d.Apply(c)
	})
	if err != nil {
		t.Fatalf("start iked in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func routeShow(t testing.TB, ns *testnet.NS, dst netip.Prefix) string {
	t.Helper()
	out, err := ns.Output("ip", "-4", "route", "show", dst.String())
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// TestRouteTunnelStrongSwan: a route tunnel on our side against
// strongSwan (policy-based with kernel-libipsec, LAN B <-> LAN A): we
// propose 0.0.0.0/0 both ways, strongSwan narrows to its subnets, and the
// traffic to LAN B goes by the configured route through ipsec0, not by a
// policy route into the userspace plane's fgesp0. When strongSwan deletes
// the tunnel the route goes with it.
func TestRouteTunnelStrongSwan(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	s := testnet.NewSiteToSite(t)
	charon := testnet.StartCharon(t, s.GwB, charonConn(s, interopSuites[0].ike, interopSuites[0].esp, "none"))
	tn := routeTunnel("s2s", "ipsec0", s.GwAWAN, s.GwBWAN, "gwB")
	tn.InnerAddresses = []config.Prefix{config.MustPrefix("169.254.10.1/30")}
	c := &config.Config{Tunnels: []config.Tunnel{tn}, Routes: []config.Route{
		{Name: "lan-b", Enabled: true, Destination: config.MustPrefix(s.LANB.String()), Interface: "ipsec0", Metric: 100}}}
	d := startIkedConfig(t, s.GwA, c)
	st := waitState(t, d, "s2s", ipsec.StateUp, 15*time.Second)
	if len(st.Children) != 1 || len(st.Children[0].LocalTS) != 1 || st.Children[0].LocalTS[0] != s.LANA.String() {
		t.Errorf("CHILD_SA %+v: want selectors narrowed by strongSwan to %v === %v", st.Children, s.LANA, s.LANB)
	}
	r := routeShow(t, s.GwA, s.LANB)
	if !strings.Contains(r, "dev ipsec0") || !strings.Contains(r, "metric 100") || strings.Contains(r, ipsec.UserspaceInterface) {
		t.Fatalf("route to LAN B %q: want it through ipsec0 with metric 100 only", r)
	}
	if out, _ := s.GwA.Output("ip", "-o", "addr", "show", "dev", "ipsec0"); !strings.Contains(out, "169.254.10.1/30") {
		t.Errorf("ipsec0 has no inner address: %q", out)
	}
	if out, _ := s.GwA.Output("ip", "-o", "link", "show", "dev", "ipsec0"); !strings.Contains(out, "mtu 1438") {
		t.Errorf("ipsec0's MTU, sized for AES-GCM over IPv4 in UDP: %q", out)
	}
	if err := testnet.Ping(s.HostA, s.HostBIP, 3); err != nil {
		t.Fatalf("hostA -> hostB by route through ipsec0: %v", err)
	}
	if err := testnet.Ping(s.HostB, s.HostAIP, 3); err != nil {
		t.Fatalf("hostB -> hostA: %v", err)
	}
	if err := tcpCopy(s, 4<<20, 10*time.Second); err != nil {
		t.Fatalf("TCP through ipsec0: %v", err)
	}
	if out, err := s.GwA.Output("ip", "-s", "-o", "link", "show", "dev", "ipsec0"); err != nil || !strings.Contains(out, "RX:") {
		t.Errorf("ipsec0 counters: %v %q", err, out)
	}
	// strongSwan deletes the tunnel (and we may bring it back at once:
	// start initiate); while it is down the route is gone.
	if out, err := charon.Swanctl("--terminate", "--ike", "s2s"); err != nil {
		t.Fatalf("swanctl --terminate: %v: %s", err, out)
	}
	if !waitFor(5*time.Second, func() bool { return !strings.Contains(routeShow(t, s.GwA, s.LANB), "ipsec0") }) {
		// It may have come straight back: then a second CHILD_SA is up.
		if tunnelStatus(d, "s2s").State != ipsec.StateUp {
			t.Fatalf("route to LAN B stayed with the tunnel down: %q", routeShow(t, s.GwA, s.LANB))
		}
	}
	waitState(t, d, "s2s", ipsec.StateUp, 15*time.Second)
	if !waitFor(5*time.Second, func() bool { return strings.Contains(routeShow(t, s.GwA, s.LANB), "ipsec0") }) {
		t.Fatalf("route not back with the tunnel: %q", routeShow(t, s.GwA, s.LANB))
	}
	if err := testnet.Ping(s.HostA, s.HostBIP, 3); err != nil {
		t.Fatalf("hostA -> hostB after the tunnel came back: %v", err)
	}
	// Taking the tunnel out of the configuration removes its interface.
	if err := s.GwA.Do(func() error { return d.Apply(&config.Config{}) }); err != nil {
		t.Fatal(err)
	}
	if out, err := s.GwA.Output("ip", "link", "show", "dev", "ipsec0"); err == nil {
		t.Errorf("ipsec0 is still there: %s", out)
	}
}

// awsStyle is the AWS shape in namespaces: gateway B (strongSwan) has two
// outer addresses, one per tunnel; gateway A (us) has two route tunnels to
// it, ipsec0 and ipsec1, each with a route to LAN B (metric 100 and 200)
// and DPD every second.
type awsStyle struct {
	s      *testnet.SiteToSite
	charon *testnet.Charon
	d      *Daemon
	peer2  netip.Addr
}

func newAWSStyle(t testing.TB) *awsStyle {
	s := testnet.NewSiteToSite(t)
	a := &awsStyle{s: s, peer2: netip.MustParseAddr("10.10.0.3")}
	if err := s.GwB.Run("ip", "addr", "add", a.peer2.String()+"/24", "dev", s.WANIfB); err != nil {
		t.Fatal(err)
	}
	var conns []testnet.CharonConn
	c := &config.Config{}
	for i, peer := range []netip.Addr{s.GwBWAN, a.peer2} {
		n := []string{"t1", "t2"}[i]
		cc := charonConn(s, interopSuites[0].ike, interopSuites[0].esp, "none")
		cc.Name, cc.LocalAddr, cc.LocalID, cc.DPDDelay = n, peer, "gwB"+n, time.Second
		conns = append(conns, cc)
		tn := routeTunnel(n, []string{"ipsec0", "ipsec1"}[i], s.GwAWAN, peer, "gwB"+n)
		tn.DPDInterval, tn.DPDTimeout = config.Seconds(1), config.Seconds(3)
		c.Tunnels = append(c.Tunnels, tn)
		c.Routes = append(c.Routes, config.Route{Name: "lan-b-" + n, Enabled: true,
			Destination: config.MustPrefix(s.LANB.String()), Interface: tn.Interface, Metric: 100 * (i + 1)})
	}
	a.charon = testnet.StartCharon(t, s.GwB, conns...)
	a.d = startIkedConfig(t, s.GwA, c)
	waitState(t, a.d, "t1", ipsec.StateUp, 15*time.Second)
	waitState(t, a.d, "t2", ipsec.StateUp, 15*time.Second)
	return a
}

// packetsOut is what the tunnel's CHILD_SAs sent.
func (a *awsStyle) packetsOut(name string) uint64 {
	var n uint64
	for _, c := range tunnelStatus(a.d, name).Children {
		n += c.PacketsOut
	}
	return n
}

// killPeer1 makes tunnel 1's peer side die: gateway B drops everything to
// and from its first address, then strongSwan forgets the tunnel (its
// DELETE is dropped), as when one of AWS's two endpoints fails. Nothing
// tells our side: DPD must notice. revive undoes the drop.
func (a *awsStyle) killPeer1(t testing.TB) (died time.Time, revive func()) {
	t.Helper()
	p := a.s.GwBWAN.String()
	for _, cmd := range [][]string{
		{"nft", "add", "table", "ip", "fgkill"},
		{"nft", "add", "chain", "ip", "fgkill", "in", "{ type filter hook input priority -10; }"},
		{"nft", "add", "chain", "ip", "fgkill", "out", "{ type filter hook output priority -10; }"},
		{"nft", "add", "rule", "ip", "fgkill", "in", "ip", "daddr", p, "drop"},
		{"nft", "add", "rule", "ip", "fgkill", "out", "ip", "saddr", p, "drop"},
	} {
		if err := a.s.GwB.Run(cmd...); err != nil {
			t.Fatal(err)
		}
	}
	died = time.Now()
	// The DELETE goes nowhere; swanctl reports that as a failure.
	a.charon.Swanctl("--terminate", "--ike", "t1", "--force", "--timeout", "1")
	return died, func() {
		if err := a.s.GwB.Run("nft", "delete", "table", "ip", "fgkill"); err != nil {
			t.Fatal(err)
		}
	}
}

// waitCarrier pings hostB from hostA until a ping passes and the named
// tunnel carried it, and returns how long that took.
func (a *awsStyle) waitCarrier(t testing.TB, name string, start time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	for time.Since(start) < timeout {
		before := a.packetsOut(name)
		if testnet.Ping(a.s.HostA, a.s.HostBIP, 1) == nil && a.packetsOut(name) > before {
			return time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no ping through %s within %v; routes %q; t1 %+v; t2 %+v", name, timeout,
		routeShow(t, a.s.GwA, a.s.LANB), tunnelStatus(a.d, "t1"), tunnelStatus(a.d, "t2"))
	return 0
}

// TestRouteTunnelFailover: two route tunnels to one strongSwan peer, the
// first preferred by metric. When the peer side of the first dies, DPD
// takes its CHILD_SA down and its route with it, and the second carries
// the traffic; when the first's peer is back, iked brings the tunnel up
// again and the traffic returns to it.
func TestRouteTunnelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	a := newAWSStyle(t)
	if r := routeShow(t, a.s.GwA, a.s.LANB); !strings.Contains(r, "dev ipsec0") || !strings.Contains(r, "dev ipsec1") {
		t.Fatalf("routes to LAN B with both tunnels up: %q", r)
	}
	a.waitCarrier(t, "t1", time.Now(), 5*time.Second)
	died, revive := a.killPeer1(t)
	took := a.waitCarrier(t, "t2", died, 30*time.Second)
	t.Logf("traffic moved to tunnel 2 %.1f s after tunnel 1's peer died (DPD every 1 s, dead after 3 s)", took.Seconds())
	if r := routeShow(t, a.s.GwA, a.s.LANB); strings.Contains(r, "ipsec0") {
		t.Errorf("tunnel 1's route is still there: %q", r)
	}
	if st := tunnelStatus(a.d, "t1"); st.State == ipsec.StateUp {
		t.Errorf("tunnel 1 is up with its peer dead: %+v", st)
	}
	revive()
	revived := time.Now()
	waitState(t, a.d, "t1", ipsec.StateUp, 90*time.Second)
	back := a.waitCarrier(t, "t1", revived, 90*time.Second)
	t.Logf("traffic back on tunnel 1 %.1f s after its peer came back (iked's retry backoff)", back.Seconds())
	if err := tcpCopy(a.s, 2<<20, 10*time.Second); err != nil {
		t.Fatalf("TCP after failing back: %v", err)
	}
}
