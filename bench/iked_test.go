package bench

import (
	"net/netip"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/iked"
	"github.com/flashgate/flashgate/ipsec/iked/ikedns"
)

const benchPSK = "bench-psk-0123456789abcdef"

// tunnelPair is a flashgate-to-flashgate tunnel on a SiteToSite topology.
type tunnelPair struct{ ike, esp string }

func (p tunnelPair) tunnel(local, remote netip.Addr, lid, rid string, lan, far netip.Prefix, start string) config.Tunnel {
	t := config.NewTunnel("s2s")
	t.LocalAddress = config.MustAddr(local.String())
	t.RemoteAddress = config.MustAddr(remote.String())
	t.LocalID, t.RemoteID = lid, rid
	t.PSK = config.NewSecret(benchPSK)
	t.IKEProposals, t.ESPProposals = []string{p.ike}, []string{p.esp}
	t.LocalSubnets = []config.Prefix{config.MustPrefix(lan.String())}
	t.RemoteSubnets = []config.Prefix{config.MustPrefix(far.String())}
	t.StartAction = start
	return t
}

// start runs iked on gwB (responder) and gwA (initiator).
func (p tunnelPair) start(b testing.TB, s *testnet.SiteToSite) (a, peer *iked.Daemon) {
	peer = startIked(b, s.GwB, p.tunnel(s.GwBWAN, s.GwAWAN, "gwB", "gwA", s.LANB, s.LANA, config.StartRespond))
	a = startIked(b, s.GwA, p.tunnel(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, config.StartInitiate))
	return a, peer
}

func startIked(b testing.TB, ns *testnet.NS, tunnels ...config.Tunnel) *iked.Daemon {
	b.Helper()
	return ikedns.Start(b, ns, iked.Options{}, &config.Config{Tunnels: tunnels})
}

func waitUp(b testing.TB, d *iked.Daemon, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	var last []ipsec.TunnelStatus
	for time.Now().Before(deadline) {
		last = d.Status()
		if len(last) > 0 && last[0].State == ipsec.StateUp {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("tunnel not up after %v: %+v", timeout, last)
}
