package netd

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/flashgate/flashgate/internal/testnet"
)

// A neighbour learns the address netd adds from its announcement, without
// sending anything itself: the peer accepts gratuitous ARP here
// (arp_accept), so the announcement alone makes its entry.
func TestAddedAddressIsAnnounced(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test: not in -short mode")
	}
	testnet.RequireRoot(t)
	testnet.RequireTool(t, "ip", "iproute2")
	testnet.RequireTool(t, "sysctl", "procps")
	p := testnet.Prefix()
	rt, peer := testnet.NewNS(t, p+"-rt"), testnet.NewNS(t, p+"-pe")
	testnet.Link(t, rt, "wan0", "", peer, "eth0", "10.124.0.2/24")
	if err := rt.Run("ip", "link", "set", "wan0", "down"); err != nil {
		t.Fatal(err)
	}
	if err := peer.Run("sysctl", "-qw", "net.ipv4.conf.eth0.arp_accept=1"); err != nil {
		t.Fatal(err)
	}
	out, err := rt.Output("ip", "-o", "link", "show", "wan0")
	_, after, ok := strings.Cut(out, "link/ether ")
	if err != nil || !ok {
		t.Fatalf("MAC of wan0: %v %q", err, out)
	}
	mac := strings.Fields(after)[0]

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
	d := &Desired{
		Links: []Link{{Name: "wan0", Role: RoleWAN, Up: true}},
		Addresses: []Address{
			{Link: "wan0", Prefix: netip.MustParsePrefix("10.124.0.1/24")},
			{Link: "wan0", Prefix: netip.MustParsePrefix("10.124.0.5/24")},
		},
	}
	if err := nl.Reconcile(d); err != nil {
		t.Fatal(err)
	}
	// The link came up with the reconcile: the announcement waits for its
	// carrier, then goes out at once.
	var neigh string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		neigh, _ = peer.Output("ip", "-4", "neigh", "show", "dev", "eth0")
		if strings.Contains(neigh, "10.124.0.1 lladdr "+mac) && strings.Contains(neigh, "10.124.0.5 lladdr "+mac) {
			return
		}
	}
	t.Fatalf("the peer's ARP table has no entries for 10.124.0.1 and 10.124.0.5 at %s 5 s after netd added them: %q", mac, neigh)
}

func TestARPAnnouncement(t *testing.T) {
	got := arpAnnouncement([]byte{0x52, 0x54, 0, 0xfa, 1, 1}, netip.MustParseAddr("10.10.0.1"))
	want := []byte{
		0, 1, 8, 0, 6, 4, 0, 1, // Ethernet, IPv4, request
		0x52, 0x54, 0, 0xfa, 1, 1, 10, 10, 0, 1, // sender: our MAC and address
		0, 0, 0, 0, 0, 0, 10, 10, 0, 1, // target: no MAC, our address
	}
	if string(got) != string(want) {
		t.Errorf("announcement\n got % x\nwant % x", got, want)
	}
}
