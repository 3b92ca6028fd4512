package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
)

// ikev1Setup is what ikev1.setup_ms measures: main mode + quick mode, PSK,
// modp2048, no PFS.
const (
	ikev1SetupIKE = "aes128-sha1-modp2048"
	ikev1SetupESP = "aes128-sha1"
)

// BenchmarkIKEv1Setup: an IKEv1 ISAKMP SA and its first phase 2 SA, one
// after another, from the initiator's first message to its phase 2 SA
// installed. flashgate: iked to iked (userspace ESP install included);
// strongswan: charon to charon with version = 1 over vici's initiate
// (kernel-libipsec install included).
func BenchmarkIKEv1Setup(b *testing.B) {
	b.Run("flashgate", func(b *testing.B) {
		s := testnet.NewSiteToSite(b)
		p := tunnelPair{ike: ikev1SetupIKE, esp: ikev1SetupESP}
		resp := p.tunnel(s.GwBWAN, s.GwAWAN, "gwB", "gwA", s.LANB, s.LANA, config.StartRespond)
		resp.IKEVersion = config.IKEv1
		startIked(b, s.GwB, resp)
		a, w := startIkedWatched(b, s.GwA)
		var total time.Duration
		for i := 0; i < b.N; i++ {
			t := p.tunnel(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, config.StartInitiate)
			t.IKEVersion = config.IKEv1
			t.Name = fmt.Sprintf("t%d", i)
			up := w.expect(t.Name)
			start := time.Now()
			if err := a.Apply(&config.Config{Tunnels: []config.Tunnel{t}}); err != nil {
				b.Fatal(err)
			}
			select {
			case <-up:
			case <-time.After(10 * time.Second):
				b.Fatalf("setup %d: not up after 10 s: %+v", i, a.Status())
			}
			total += time.Since(start)
			if testing.Verbose() {
				b.Logf("setup %d: %v", i, time.Since(start))
			}
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/setup")
		b.ReportMetric(0, "ns/op")
	})
	b.Run("strongswan", func(b *testing.B) {
		s := testnet.NewSiteToSite(b)
		conn := testnet.CharonConn{Name: "s2s", Version: 1, LocalAddr: s.GwAWAN, RemoteAddr: s.GwBWAN, LocalID: "gwA", RemoteID: "gwB",
			PSK: benchPSK, Proposals: ikev1SetupIKE, ESPProposals: ikev1SetupESP, LocalTS: s.LANANets(), RemoteTS: s.LANBNets()}
		a := testnet.StartCharon(b, s.GwA, conn)
		peer := conn
		peer.LocalAddr, peer.RemoteAddr, peer.LocalID, peer.RemoteID = s.GwBWAN, s.GwAWAN, "gwB", "gwA"
		peer.LocalTS, peer.RemoteTS = s.LANBNets(), s.LANANets()
		testnet.StartCharon(b, s.GwB, peer)
		sess, err := a.Session()
		if err != nil {
			b.Fatal(err)
		}
		defer sess.Close()
		var total time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			if err := charonInitiate(sess); err != nil {
				b.Fatalf("setup %d: %v", i, err)
			}
			total += time.Since(start)
			charonTerminate(sess)
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/setup")
		b.ReportMetric(0, "ns/op")
	})
}
