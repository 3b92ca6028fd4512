package bench

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testnet"
)

// iperfTime is the length of one iperf3 run, as in interop.md's anchors.
const iperfTime = 10 * time.Second

// BenchmarkTunnelTCP measures TCP throughput host to host through each kind
// of tunnel on the same topology, one after another in one run: plain
// routing (no tunnel), strongSwan with kernel-libipsec, wireguard-go, and
// flashgate (iked on both gateways, userspace ESP). The runner reports
// flashgate's figure with each of the others as its peer.
func BenchmarkTunnelTCP(b *testing.B) {
	testnet.RequireTool(b, "iperf3", "iperf3")
	kinds := []struct {
		name  string
		setup func(b *testing.B, s *testnet.SiteToSite)
	}{
		{"plain", func(b *testing.B, s *testnet.SiteToSite) {
			for _, c := range []struct {
				ns  *testnet.NS
				net netip.Prefix
				via netip.Addr
			}{{s.GwA, s.LANB, s.GwBWAN}, {s.GwB, s.LANA, s.GwAWAN}} {
				if err := c.ns.Run("ip", "route", "add", c.net.String(), "via", c.via.String()); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"strongswan", func(b *testing.B, s *testnet.SiteToSite) {
			conn := func(local, remote netip.Addr, lid, rid string, lts, rts netip.Prefix) testnet.CharonConn {
				return testnet.CharonConn{Name: "s2s", LocalAddr: local, RemoteAddr: remote, LocalID: lid, RemoteID: rid,
					PSK: "bench-psk-0123456789abcdef", Proposals: "aes128gcm16-prfsha256-ecp256", ESPProposals: "aes128gcm16",
					LocalTS: []netip.Prefix{lts}, RemoteTS: []netip.Prefix{rts}}
			}
			a := testnet.StartCharon(b, s.GwA, conn(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB))
			peer := testnet.StartCharon(b, s.GwB, conn(s.GwBWAN, s.GwAWAN, "gwB", "gwA", s.LANB, s.LANA))
			if err := a.Initiate("s2s-net"); err != nil {
				b.Fatal(err)
			}
			if err := peer.WaitChild("s2s-net", 10*time.Second); err != nil {
				b.Fatal(err)
			}
		}},
		{"wireguard-go", func(b *testing.B, s *testnet.SiteToSite) { testnet.StartWireGuard(b, s) }},
		{"flashgate", func(b *testing.B, s *testnet.SiteToSite) {
			// Both gateways run our iked with the userspace data plane
			// (this kernel has no ESP), negotiating as a user would.
			p := tunnelPair{ike: "aes128gcm16-prfsha256-ecp256", esp: "aes128gcm16"}
			a, peer := p.start(b, s)
			waitUp(b, a, 10*time.Second)
			waitUp(b, peer, 5*time.Second)
		}},
	}
	for _, k := range kinds {
		for _, streams := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/streams=%d", k.name, streams), func(b *testing.B) {
				s := testnet.NewSiteToSite(b)
				k.setup(b, s)
				if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
					b.Fatalf("%s: hostA cannot reach hostB: %v", k.name, err)
				}
				var sum testnet.IperfResult
				for i := 0; i < b.N; i++ {
					r, err := testnet.Iperf(s.HostB, s.HostA, s.HostBIP, streams, iperfTime)
					if err != nil {
						b.Fatal(err)
					}
					sum.Mbps += r.Mbps
					sum.SenderCPU += r.SenderCPU
					sum.ReceiverCPU += r.ReceiverCPU
				}
				n := float64(b.N)
				b.ReportMetric(sum.Mbps/n, "Mbit/s")
				b.ReportMetric(sum.SenderCPU/n, "sender-cpu-%")
				b.ReportMetric(sum.ReceiverCPU/n, "receiver-cpu-%")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
