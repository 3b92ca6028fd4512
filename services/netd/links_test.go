package netd

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/flashgate/flashgate/internal/testnet"
)

// TestNetlinkReconcile drives a namespace's links, addresses, routes and
// forwarding through two desired states and checks that the second one
// changed only what differs and left alone what netd does not own.
func TestNetlinkReconcile(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test: not in -short mode")
	}
	testnet.RequireRoot(t)
	testnet.RequireTool(t, "sysctl", "procps")
	p := testnet.Prefix()
	rt, peer := testnet.NewNS(t, p+"-rt"), testnet.NewNS(t, p+"-pe")
	testnet.Link(t, rt, "lan0", "", peer, "eth0", "")
	testnet.Link(t, rt, "other0", "10.123.0.1/24", peer, "eth1", "")
	if err := rt.Run("ip", "link", "set", "lan0", "down"); err != nil {
		t.Fatal(err)
	}
	h, err := netns.GetFromName(rt.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := NewNetlinkAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	pfx := netip.MustParsePrefix
	first := &Desired{
		Links: []Link{{Name: "lan0", Role: RoleLAN, Up: true, MTU: 1400}},
		Addresses: []Address{
			{Link: "lan0", Prefix: pfx("192.168.60.1/24")},
			{Link: "lan0", Prefix: pfx("192.168.61.1/24")},
			{Link: "lan0", Prefix: pfx("fd00:60::1/64")},
		},
		Routes: []Route{
			{Destination: pfx("10.200.0.0/16"), Gateway: netip.MustParseAddr("192.168.60.254")},
			{Destination: pfx("10.201.0.0/16"), Link: "lan0", Metric: 10},
		},
		Forwarding: true,
	}
	if err := first.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := nl.Reconcile(first); err != nil {
		t.Fatalf("first reconcile: %v", err)
	}
	// A route someone else added (proto boot) must survive.
	if err := rt.Run("ip", "route", "add", "10.202.0.0/16", "via", "192.168.61.253"); err != nil {
		t.Fatal(err)
	}
	show := func(args ...string) string {
		out, err := rt.Output(args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	link := show("ip", "-o", "link", "show", "lan0")
	if !strings.Contains(link, "mtu 1400") || !strings.Contains(link, "UP") {
		t.Errorf("lan0 after the first reconcile: want up with MTU 1400, got %s", link)
	}
	for _, want := range []string{"192.168.60.1/24", "192.168.61.1/24", "fd00:60::1/64"} {
		if a := show("ip", "-o", "addr", "show", "dev", "lan0"); !strings.Contains(a, want) {
			t.Errorf("lan0 lacks %s: %s", want, a)
		}
	}
	routes := show("ip", "route", "show", "proto", "static")
	for _, want := range []string{"10.200.0.0/16 via 192.168.60.254 dev lan0", "10.201.0.0/16 dev lan0 scope link metric 10"} {
		if !strings.Contains(routes, want) {
			t.Errorf("routes lack %q:\n%s", want, routes)
		}
	}
	if fw := show("sysctl", "-n", "net.ipv4.ip_forward"); strings.TrimSpace(fw) != "1" {
		t.Errorf("ip_forward is %q, want 1", fw)
	}

	second := &Desired{
		Links:     []Link{{Name: "lan0", Role: RoleLAN, Up: true, MTU: 1500}},
		Addresses: []Address{{Link: "lan0", Prefix: pfx("192.168.61.1/24")}, {Link: "lan0", Prefix: pfx("192.168.62.1/24")}},
		Routes:    []Route{{Destination: pfx("10.200.0.0/16"), Gateway: netip.MustParseAddr("192.168.61.254")}},
	}
	if err := nl.Reconcile(second); err != nil {
		t.Fatalf("second reconcile: %v", err)
	}
	addrs := show("ip", "-o", "addr", "show", "dev", "lan0")
	for _, gone := range []string{"192.168.60.1/24", "fd00:60::1/64"} {
		if strings.Contains(addrs, gone) {
			t.Errorf("lan0 still has %s after it left the desired state: %s", gone, addrs)
		}
	}
	for _, want := range []string{"192.168.61.1/24", "192.168.62.1/24", "fe80::"} {
		if !strings.Contains(addrs, want) {
			t.Errorf("lan0 lacks %s: %s", want, addrs)
		}
	}
	if a := show("ip", "-o", "addr", "show", "dev", "other0"); !strings.Contains(a, "10.123.0.1/24") {
		t.Errorf("the unmanaged interface other0 lost its address: %s", a)
	}
	routes = show("ip", "route", "show")
	if !strings.Contains(routes, "10.200.0.0/16 via 192.168.61.254 dev lan0 proto static") {
		t.Errorf("the changed route is missing:\n%s", routes)
	}
	if strings.Contains(routes, "10.201.0.0/16") {
		t.Errorf("the route that left the desired state is still there:\n%s", routes)
	}
	if !strings.Contains(routes, "10.202.0.0/16 via 192.168.61.253") {
		t.Errorf("a route netd did not add (proto boot) was removed:\n%s", routes)
	}
	if mtu := show("ip", "-o", "link", "show", "lan0"); !strings.Contains(mtu, "mtu 1500") {
		t.Errorf("MTU not changed back: %s", mtu)
	}
	if fw := show("sysctl", "-n", "net.ipv4.ip_forward"); strings.TrimSpace(fw) != "0" {
		t.Errorf("ip_forward is %q, want 0", fw)
	}
	st := nl.Status(second.Links)
	if len(st) != 1 || !st[0].Present || !st[0].Up || st[0].MTU != 1500 || len(st[0].Addresses) < 2 {
		t.Errorf("status: %+v", st)
	}

	// A missing interface is reported and does not stop the rest.
	third := &Desired{
		Links:     []Link{{Name: "gone0", Role: RoleOpt, Up: true}, {Name: "lan0", Role: RoleLAN, Up: true}},
		Addresses: []Address{{Link: "lan0", Prefix: pfx("192.168.63.1/24")}},
	}
	err = nl.Reconcile(third)
	if err == nil || !strings.Contains(err.Error(), "gone0") {
		t.Errorf("reconcile with a missing interface: want an error naming gone0, got %v", err)
	}
	if a := show("ip", "-o", "addr", "show", "dev", "lan0"); !strings.Contains(a, "192.168.63.1/24") {
		t.Errorf("lan0 was not configured because another interface is missing: %s", a)
	}
}

// TestIsPort: a port is a link with a device behind it (the kernel's
// parent device: a PCI, USB or virtio NIC), never loopback.
func TestIsPort(t *testing.T) {
	for _, tc := range []struct {
		what  string
		attrs netlink.LinkAttrs
		port  bool
	}{
		{"a PCI NIC", netlink.LinkAttrs{Name: "eth0", ParentDev: "0000:00:03.0", ParentDevBus: "pci"}, true},
		{"a USB NIC", netlink.LinkAttrs{Name: "enx00e04c680001", ParentDev: "2-1:1.0", ParentDevBus: "usb"}, true},
		{"a virtio NIC", netlink.LinkAttrs{Name: "eth1", ParentDev: "virtio1", ParentDevBus: "virtio"}, true},
		{"loopback", netlink.LinkAttrs{Name: "lo", Flags: net.FlagLoopback | net.FlagUp}, false},
		{"a veth, bridge, TUN or ipsecN", netlink.LinkAttrs{Name: "ipsec0"}, false},
	} {
		if got := isPort(&tc.attrs); got != tc.port {
			t.Errorf("isPort(%s) = %v, want %v", tc.what, got, tc.port)
		}
	}
}
