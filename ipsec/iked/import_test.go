package iked

import (
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/config/importer"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
)

// TestImportedStrongSwanTunnels: the flashboot gateway's tunnel written
// as strongSwan's swanctl.conf and as an ipsec.conf (with its
// ipsec.secrets line), imported by config/importer, runs unchanged
// against strongSwan configured as the peer, like the isakmpd.conf it
// comes from (TestImportedIsakmpdTunnel).
func TestImportedStrongSwanTunnels(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	for _, file := range []string{"swanctl-site.conf", "ipsec-site.conf"} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile("../../config/importer/testdata/" + file)
			if err != nil {
				t.Fatal(err)
			}
			res, err := importer.Import(data)
			if err != nil || len(res.Tunnels) == 0 {
				t.Fatalf("import: %v, %d tunnels", err, len(res.Tunnels))
			}
			tun := res.Tunnels[0]
			if tun.Name != "VPN-A-B" || tun.IKEVersion != config.IKEv1 || !tun.LegacyAlgorithms {
				t.Fatalf("imported tunnel: %+v", tun)
			}
			p := testnet.Prefix()
			hostA, gwA := testnet.NewNS(t, p+"-ha"), testnet.NewNS(t, p+"-ga")
			gwB, hostB := testnet.NewNS(t, p+"-gb"), testnet.NewNS(t, p+"-hb")
			testnet.Link(t, hostA, "lan0", "192.168.2.2/24", gwA, "lan0", "192.168.2.1/24")
			testnet.Link(t, gwA, "wan0", "192.168.3.197/24", gwB, "wan0", "192.168.3.198/24")
			testnet.Link(t, gwB, "lan0", "192.168.4.1/24", hostB, "lan0", "192.168.4.2/24")
			testnet.RunAll(t, []testnet.Cmd{
				testnet.In(hostA, "ip", "route", "add", "default", "via", "192.168.2.1"),
				testnet.In(hostB, "ip", "route", "add", "default", "via", "192.168.4.1"),
				testnet.In(gwA, "sysctl", "-qw", "net.ipv4.ip_forward=1"),
				testnet.In(gwB, "sysctl", "-qw", "net.ipv4.ip_forward=1"),
			})
			testnet.StartCharon(t, gwB, testnet.CharonConn{Name: "s2s", Version: 1,
				LocalAddr: netip.MustParseAddr("192.168.3.198"), RemoteAddr: netip.MustParseAddr("192.168.3.197"),
				LocalID: "192.168.3.198", RemoteID: "192.168.3.197", PSK: "yoursharedsecret",
				Proposals: "aes128-sha1-modp1024", ESPProposals: "aes128-sha1",
				LocalTS: []netip.Prefix{netip.MustParsePrefix("192.168.4.0/24")}, RemoteTS: []netip.Prefix{netip.MustParsePrefix("192.168.2.0/24")}})
			d := startIked(t, gwA, tun)
			st := waitState(t, d, tun.Name, ipsec.StateUp, 15*time.Second)
			if err := testnet.Ping(hostA, netip.MustParseAddr("192.168.4.2"), 2); err != nil {
				t.Fatalf("192.168.2.2 -> 192.168.4.2 through the imported tunnel: %v", err)
			}
			if st.IKE == nil || st.IKE.Proposal != "aes128-sha1-modp1024" {
				t.Errorf("negotiated %+v", st.IKE)
			}
			if len(st.Weak) == 0 {
				t.Errorf("the status does not mark the legacy proposals weak: %+v", st)
			}
		})
	}
}
