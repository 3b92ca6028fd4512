package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testnet"
)

// Lab is the network the appliances are plugged into.
type Lab struct {
	Switch              *testnet.NS // bridges and the appliances' TAP ports
	HostA, HostB, HostC *testnet.NS
	GwC                 *testnet.NS // the strongSwan site's gateway
}

var (
	wanA, wanB, wanC    = netip.MustParseAddr("10.10.0.1"), netip.MustParseAddr("10.10.0.2"), netip.MustParseAddr("10.10.0.3")
	lanA, lanB, lanC    = netip.MustParsePrefix("10.10.1.0/24"), netip.MustParsePrefix("10.10.2.0/24"), netip.MustParsePrefix("10.10.3.0/24")
	hostA, hostB, hostC = netip.MustParseAddr("10.10.1.2"), netip.MustParseAddr("10.10.2.2"), netip.MustParseAddr("10.10.3.2")
	// routedA and routedB are second networks on A's and B's LANs that
	// reach each other by static routes through the appliances, without a
	// tunnel: the plain-routing path the tunnel's throughput is compared
	// with. Their hosts are hostA and hostB again (second addresses).
	routedA, routedB         = netip.MustParsePrefix("10.10.11.0/24"), netip.MustParsePrefix("10.10.12.0/24")
	routedHostA, routedHostB = netip.MustParseAddr("10.10.11.2"), netip.MustParseAddr("10.10.12.2")
	// firstBootLAN is the LAN address of a new appliance (config.DefaultForNICs).
	firstBootLAN = netip.MustParseAddr("192.168.1.1")
)

// NewLab makes the switch namespace with its bridges and the host
// namespaces. Everything is removed when the test ends.
func NewLab(t testing.TB) *Lab {
	t.Helper()
	p := testnet.Prefix()
	l := &Lab{
		Switch: testnet.NewNS(t, p+"-sw"),
		HostA:  testnet.NewNS(t, p+"-ha"), HostB: testnet.NewNS(t, p+"-hb"),
		HostC: testnet.NewNS(t, p+"-hc"), GwC: testnet.NewNS(t, p+"-gc"),
	}
	for _, br := range []string{"brwan", "brlana", "brlanb"} {
		mustRun(t, l.Switch, "ip", "link", "add", br, "type", "bridge")
		mustRun(t, l.Switch, "ip", "link", "set", br, "up")
	}
	// hostA and hostB sit on their appliance's LAN, with the first-boot
	// subnet as a second address so they can reach a new appliance, and
	// a third on the routed network, whose traffic to the other site's
	// routed network leaves from it.
	for _, h := range []struct {
		ns       *testnet.NS
		port, br string
		addr     string
		gw       string
		routed   string // address/prefix on the routed network
		routedGW string // the appliance on it
		other    netip.Prefix
	}{
		{l.HostA, "pa", "brlana", "10.10.1.2/24", "10.10.1.1", "10.10.11.2/24", "10.10.11.1", routedB},
		{l.HostB, "pb", "brlanb", "10.10.2.2/24", "10.10.2.1", "10.10.12.2/24", "10.10.12.1", routedA},
	} {
		testnet.Link(t, l.Switch, h.port, "", h.ns, "lan0", h.addr)
		mustRun(t, l.Switch, "ip", "link", "set", h.port, "master", h.br)
		mustRun(t, h.ns, "ip", "addr", "add", "192.168.1.2/24", "dev", "lan0")
		mustRun(t, h.ns, "ip", "addr", "add", h.routed, "dev", "lan0")
		mustRun(t, h.ns, "ip", "route", "add", "default", "via", h.gw)
		src := strings.Split(h.routed, "/")[0]
		mustRun(t, h.ns, "ip", "route", "add", h.other.String(), "via", h.routedGW, "src", src)
	}
	// The strongSwan site: its gateway on the WAN switch, a host behind it.
	testnet.Link(t, l.Switch, "pc", "", l.GwC, "wan0", "10.10.0.3/24")
	mustRun(t, l.Switch, "ip", "link", "set", "pc", "master", "brwan")
	testnet.Link(t, l.GwC, "lan0", "10.10.3.1/24", l.HostC, "lan0", "10.10.3.2/24")
	mustRun(t, l.HostC, "ip", "route", "add", "default", "via", "10.10.3.1")
	mustRun(t, l.GwC, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	return l
}

// plug waits for a TAP port qemu made in the switch namespace and puts it
// on a bridge.
func (l *Lab) plug(t testing.TB, tap, bridge string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for l.Switch.Run("ip", "link", "show", tap) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("qemu made no TAP port %s within 30 s", tap)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mustRun(t, l.Switch, "ip", "link", "set", tap, "master", bridge)
	mustRun(t, l.Switch, "ip", "link", "set", tap, "up")
}

func mustRun(t testing.TB, ns *testnet.NS, args ...string) {
	t.Helper()
	if err := ns.Run(args...); err != nil {
		t.Fatal(fmt.Errorf("lab: %w", err))
	}
}
