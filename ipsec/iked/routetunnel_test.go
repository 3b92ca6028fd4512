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

// startIkedConfig is startIked with a whole configuration (routes too).
func startIkedConfig(t testing.TB, ns *testnet.NS, c *config.Config) *Daemon {
	t.Helper()
	var d *Daemon
	err := ns.Do(func() error {
		var err error
		if d, err = New(Options{DataPlane: "userspace", Logf: t.Logf}); err != nil {
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
