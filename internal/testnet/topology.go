package testnet

import (
	"fmt"
	"net/netip"
	"testing"
)

// SiteToSite is the topology of interop.md:
//
//	hostA 10.10.1.2 -- 10.10.1.1 gwA 10.10.0.1 ==veth== 10.10.0.2 gwB 10.10.2.1 -- 10.10.2.2 hostB
//
// The gateways forward but have no route to the far LAN, so host-to-host
// traffic passes only through a tunnel that is up.
type SiteToSite struct {
	HostA, GwA, GwB, HostB *NS

	GwAWAN, GwBWAN   netip.Addr // 10.10.0.1, 10.10.0.2
	GwALAN, GwBLAN   netip.Addr // 10.10.1.1, 10.10.2.1
	HostAIP, HostBIP netip.Addr // 10.10.1.2, 10.10.2.2
	LANA, LANB       netip.Prefix
	WANIfA, WANIfB   string // the gateways' WAN interface names
}

// NewSiteToSite builds the four namespaces and three veth links. Everything
// is removed when the test ends.
func NewSiteToSite(t testing.TB) *SiteToSite {
	t.Helper()
	RequireRoot(t)
	RequireTool(t, "ip", "iproute2")
	p := Prefix()
	s := &SiteToSite{
		HostA: NewNS(t, p+"-ha"), GwA: NewNS(t, p+"-ga"),
		GwB: NewNS(t, p+"-gb"), HostB: NewNS(t, p+"-hb"),
		GwAWAN:  netip.MustParseAddr("10.10.0.1"),
		GwBWAN:  netip.MustParseAddr("10.10.0.2"),
		GwALAN:  netip.MustParseAddr("10.10.1.1"),
		GwBLAN:  netip.MustParseAddr("10.10.2.1"),
		HostAIP: netip.MustParseAddr("10.10.1.2"),
		HostBIP: netip.MustParseAddr("10.10.2.2"),
		LANA:    netip.MustParsePrefix("10.10.1.0/24"),
		LANB:    netip.MustParsePrefix("10.10.2.0/24"),
		WANIfA:  "wan0", WANIfB: "wan0",
	}
	Link(t, s.HostA, "lan0", "10.10.1.2/24", s.GwA, "lan0", "10.10.1.1/24")
	Link(t, s.GwA, "wan0", "10.10.0.1/24", s.GwB, "wan0", "10.10.0.2/24")
	Link(t, s.GwB, "lan0", "10.10.2.1/24", s.HostB, "lan0", "10.10.2.2/24")
	for _, c := range []struct {
		ns *NS
		gw string
	}{{s.HostA, "10.10.1.1"}, {s.HostB, "10.10.2.1"}} {
		if err := c.ns.Run("ip", "route", "add", "default", "via", c.gw); err != nil {
			t.Fatal(err)
		}
	}
	for _, gw := range []*NS{s.GwA, s.GwB} {
		if err := gw.Run("sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// Link joins two namespaces with a veth pair and gives each end an address
// (CIDR form; empty for none). The pair is made inside a, with its peer
// put into b by the same request: it never exists in the host's namespace,
// so a failing test cannot leave it there.
func Link(t testing.TB, a *NS, aIf, aAddr string, b *NS, bIf, bAddr string) {
	t.Helper()
	if err := a.Run("ip", "link", "add", aIf, "type", "veth", "peer", "name", bIf, "netns", b.Name); err != nil {
		t.Fatalf("link %s/%s - %s/%s: %v", a.Name, aIf, b.Name, bIf, err)
	}
	for _, end := range []struct {
		ns         *NS
		name, addr string
	}{{a, aIf, aAddr}, {b, bIf, bAddr}} {
		var cmds [][]string
		if end.addr != "" {
			cmds = append(cmds, []string{"ip", "addr", "add", end.addr, "dev", end.name})
		}
		cmds = append(cmds, []string{"ip", "link", "set", end.name, "up"})
		for _, c := range cmds {
			if err := end.ns.Run(c...); err != nil {
				t.Fatalf("link %s/%s: %v", end.ns.Name, end.name, err)
			}
		}
	}
}

// Ping sends count ICMP echo requests from ns to dst with a deadline and
// reports whether all were answered.
func Ping(ns *NS, dst netip.Addr, count int) error {
	_, err := ns.Output("ping", "-q", "-n", "-c", fmt.Sprint(count), "-i", "0.2", "-W", "1", "-w", fmt.Sprint(count+3), dst.String())
	return err
}

// LANANets and LANBNets are the LANs as lists, the form connections take.
func (s *SiteToSite) LANANets() []netip.Prefix { return []netip.Prefix{s.LANA} }
func (s *SiteToSite) LANBNets() []netip.Prefix { return []netip.Prefix{s.LANB} }
