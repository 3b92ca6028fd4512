package tunnelif

import (
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
)

func init() { runtime.LockOSThread() }

// TestRoutesFollowPairs: in a namespace, on a veth standing for a
// tunnel interface: the addresses and MTU are set at once, the routes only
// while a pair is counted, a route left by an earlier run is flushed when
// the interface is taken over, and Check refuses if_id 0 and duplicates.
func TestRoutesFollowPairs(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	testnet.RequireRoot(t)
	ns := testnet.NewNS(t, testnet.Prefix()+"-tif")
	for _, c := range [][]string{
		{"ip", "link", "add", "ipsec0", "type", "veth", "peer", "name", "ipsec0p"},
		{"ip", "link", "set", "ipsec0p", "up"},
		{"ip", "link", "set", "ipsec0", "up"},
		{"ip", "route", "add", "10.77.0.0/16", "dev", "ipsec0", "proto", "0x9b"}, // an earlier run's
	} {
		if err := ns.Run(c...); err != nil {
			t.Fatal(err)
		}
	}
	routes := func() string {
		out, err := ns.Output("ip", "-4", "route", "show", "proto", "0x9b")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	want := ipsec.TunnelInterface{Name: "ipsec0", IfID: 1, MTU: 1399,
		Addresses: []netip.Prefix{netip.MustParsePrefix("169.254.10.2/30")},
		Routes:    []ipsec.TunnelRoute{{Destination: netip.MustParsePrefix("172.31.0.0/16"), Metric: 100}}}
	err := ns.Do(func() error {
		nl, err := netlink.NewHandle()
		if err != nil {
			return err
		}
		defer nl.Close()
		tb := New(nl)
		link, err := nl.LinkByName("ipsec0")
		if err != nil {
			return err
		}
		if err := tb.Configure(link, want); err != nil {
			return err
		}
		if r := routes(); r != "" {
			t.Errorf("routes without a pair (the stale one must go too): %q", r)
		}
		if out, _ := ns.Output("ip", "-o", "addr", "show", "dev", "ipsec0"); !strings.Contains(out, "169.254.10.2/30") {
			t.Errorf("address: %q", out)
		}
		if out, _ := ns.Output("ip", "-o", "link", "show", "dev", "ipsec0"); !strings.Contains(out, "mtu 1399") {
			t.Errorf("MTU: %q", out)
		}
		tb.PairAdded(1)
		tb.PairAdded(1) // a rekey: two pairs for a moment
		if r := routes(); !strings.Contains(r, "172.31.0.0/16 dev ipsec0") || !strings.Contains(r, "metric 100") {
			t.Errorf("routes with a pair: %q", r)
		}
		tb.PairDeleted(1)
		if r := routes(); !strings.Contains(r, "172.31.0.0/16") {
			t.Errorf("the route went while the rekeyed pair is still there: %q", r)
		}
		// A change of metric while up is applied at once.
		want.Routes[0].Metric = 50
		if err := tb.Configure(link, want); err != nil {
			return err
		}
		if r := routes(); !strings.Contains(r, "metric 50") || strings.Contains(r, "metric 100") {
			t.Errorf("routes after the metric changed: %q", r)
		}
		tb.PairDeleted(1)
		if r := routes(); r != "" {
			t.Errorf("routes after the last pair went: %q", r)
		}
		if err := tb.PairAdded(7); err == nil {
			t.Error("a pair for an unknown if_id was counted")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]ipsec.TunnelInterface{
		{{Name: "ipsec0", IfID: 0}},
		{{Name: "ipsec0", IfID: 1}, {Name: "ipsec1", IfID: 1}},
		{{Name: "ipsec0", IfID: 1}, {Name: "ipsec0", IfID: 2}},
		{{Name: "a-name-far-too-long", IfID: 1}},
	} {
		if Check(bad) == nil {
			t.Errorf("Check accepted %+v", bad)
		}
	}
}
