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

// The proposals issue 5 requires against strongSwan, with the matching ESP
// proposal for each.
var interopSuites = []struct{ ike, esp string }{
	{"aes128gcm16-prfsha256-ecp256", "aes128gcm16"},
	{"aes256gcm16-prfsha384-ecp384", "aes256gcm16"},
	{"aes256-sha256-modp2048", "aes256-sha256"},
	{"aes128-sha1-modp2048", "aes128-sha1"},
	{"chacha20poly1305-prfsha256-curve25519", "chacha20poly1305"},
}

const testPSK = "interop-test-psk-0123456789abcdef"

// tunnelConfig is gateway A's (or B's) side of the site-to-site tunnel.
func tunnelConfig(local, remote netip.Addr, lid, rid string, lan, far netip.Prefix, ikeProp, espProp, start string) config.Tunnel {
	t := config.NewTunnel("s2s")
	t.LocalAddress = config.MustAddr(local.String())
	t.RemoteAddress = config.MustAddr(remote.String())
	t.LocalID, t.RemoteID = lid, rid
	t.PSK = config.NewSecret(testPSK)
	t.IKEProposals = []string{ikeProp}
	t.ESPProposals = []string{espProp}
	t.LocalSubnets = []config.Prefix{config.MustPrefix(lan.String())}
	t.RemoteSubnets = []config.Prefix{config.MustPrefix(far.String())}
	t.StartAction = start
	return t
}

// startIked runs a daemon inside ns (userspace data plane: this kernel has
// no ESP) with the given tunnels.
func startIked(t testing.TB, ns *testnet.NS, tunnels ...config.Tunnel) *Daemon {
	t.Helper()
	return startIkedConfig(t, ns, &config.Config{Tunnels: tunnels})
}

// waitState waits for the tunnel to reach state, and returns its status.
func waitState(t testing.TB, d *Daemon, name string, state ipsec.TunnelState, timeout time.Duration) ipsec.TunnelStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last ipsec.TunnelStatus
	for time.Now().Before(deadline) {
		for _, s := range d.Status() {
			if s.Name == name {
				last = s
				if s.State == state {
					return s
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("tunnel %s: state %q after %v, want %q; reason %q; events %+v", name, last.State, timeout, state, last.Reason, last.Events)
	return last
}

// waitEvents waits until n events of the tunnel contain text.
func waitEvents(t *testing.T, d *Daemon, name, text string, n int, timeout time.Duration) {
	t.Helper()
	var got int
	if !waitFor(timeout, func() bool {
		got = 0
		for _, e := range tunnelStatus(d, name).Events {
			if strings.Contains(e.Message, text) {
				got++
			}
		}
		return got >= n
	}) {
		t.Fatalf("tunnel %s: %d events %q within %v, want %d; events %+v", name, got, text, timeout, n, tunnelStatus(d, name).Events)
	}
}

// waitEvent waits for an event of the tunnel that contains text.
func waitEvent(t *testing.T, d *Daemon, name, text string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last ipsec.TunnelStatus
	for time.Now().Before(deadline) {
		for _, s := range d.Status() {
			if s.Name != name {
				continue
			}
			last = s
			for _, e := range s.Events {
				if strings.Contains(e.Message, text) {
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("tunnel %s: no event %q within %v; events %+v", name, text, timeout, last.Events)
}

func charonConn(s *testnet.SiteToSite, ikeProp, espProp, start string) testnet.CharonConn {
	return testnet.CharonConn{Name: "s2s", LocalAddr: s.GwBWAN, RemoteAddr: s.GwAWAN, LocalID: "gwB", RemoteID: "gwA",
		PSK: testPSK, Proposals: ikeProp, ESPProposals: espProp,
		LocalTS: []netip.Prefix{s.LANB}, RemoteTS: []netip.Prefix{s.LANA}, StartAction: start}
}

// TestInteropStrongSwan: our iked on gwA against strongSwan's charon
// (kernel-libipsec) on gwB, each of the required proposals, with our side
// as initiator and as responder; hostA must reach hostB through the tunnel,
// by ping and by a TCP transfer whose every byte is checked, and a TCP
// connection must survive a CHILD_SA rekey by each side.
func TestInteropStrongSwan(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	for _, suite := range interopSuites {
		for _, weInitiate := range []bool{true, false} {
			role := "responder"
			if weInitiate {
				role = "initiator"
			}
			t.Run(suite.ike+"/"+role, func(t *testing.T) {
				s := testnet.NewSiteToSite(t)
				start, peerStart := config.StartRespond, "none"
				if weInitiate {
					start = config.StartInitiate
				}
				charon := testnet.StartCharon(t, s.GwB, charonConn(s, suite.ike, suite.esp, peerStart))
				d := startIked(t, s.GwA, tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, suite.ike, suite.esp, start))
				if !weInitiate {
					if err := charon.Initiate("s2s-net"); err != nil {
						t.Fatal(err)
					}
				}
				st := waitState(t, d, "s2s", ipsec.StateUp, 15*time.Second)
				if err := charon.WaitChild("s2s-net", 5*time.Second); err != nil {
					t.Fatal(err)
				}
				if err := testnet.Ping(s.HostA, s.HostBIP, 3); err != nil {
					t.Fatalf("hostA -> hostB through the tunnel: %v", err)
				}
				if err := testnet.Ping(s.HostB, s.HostAIP, 3); err != nil {
					t.Fatalf("hostB -> hostA through the tunnel: %v", err)
				}
				if err := tcpCopy(s, 4<<20, 10*time.Second); err != nil {
					t.Fatalf("TCP hostA -> hostB through the tunnel: %v", err)
				}
				// A TCP connection across a CHILD_SA rekey by each side.
				stream, err := startStream(s, 5204, 4<<20)
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(300 * time.Millisecond)
				if err := d.Rekey("s2s", false); err != nil {
					t.Errorf("our CHILD_SA rekey: %v", err)
				}
				waitEvents(t, d, "s2s", "CHILD_SA rekeyed", 1, 5*time.Second)
				time.Sleep(300 * time.Millisecond)
				if out, err := charon.Swanctl("--rekey", "--child", "s2s-net"); err != nil {
					t.Errorf("strongSwan's CHILD_SA rekey: %v: %s", err, out)
				}
				waitEvents(t, d, "s2s", "CHILD_SA rekeyed", 2, 5*time.Second)
				time.Sleep(300 * time.Millisecond)
				if err := stream.Stop(5 * time.Second); err != nil {
					t.Fatalf("TCP across the rekeys: %v", err)
				}
				st = waitState(t, d, "s2s", ipsec.StateUp, time.Second)
				if st.IKE == nil || st.IKE.Proposal != suite.ike {
					t.Errorf("IKE proposal in status = %+v, want %s", st.IKE, suite.ike)
				}
				if len(st.Children) != 1 || st.Children[0].Proposal != suite.esp || st.Children[0].PacketsIn == 0 || st.Children[0].PacketsOut == 0 {
					t.Errorf("CHILD_SA status = %+v, want one %s pair that carried packets both ways", st.Children, suite.esp)
				}
			})
		}
	}
}

// TestOursAgainstOurs: two flashgate gateways.
func TestOursAgainstOurs(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	s := testnet.NewSiteToSite(t)
	ikeP, espP := "aes128gcm16-prfsha256-ecp256", "aes128gcm16"
	b := startIked(t, s.GwB, tunnelConfig(s.GwBWAN, s.GwAWAN, "gwB", "gwA", s.LANB, s.LANA, ikeP, espP, config.StartRespond))
	a := startIked(t, s.GwA, tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, ikeP, espP, config.StartInitiate))
	waitState(t, a, "s2s", ipsec.StateUp, 10*time.Second)
	waitState(t, b, "s2s", ipsec.StateUp, 5*time.Second)
	if err := testnet.Ping(s.HostA, s.HostBIP, 3); err != nil {
		t.Fatalf("hostA -> hostB: %v", err)
	}
	// A delete from one side cleans up both; A (initiate) comes back.
	if err := a.Down("s2s"); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, b, "s2s", "deleted the IKE SA", 5*time.Second)
	waitState(t, a, "s2s", ipsec.StateUp, 10*time.Second)
	waitState(t, b, "s2s", ipsec.StateUp, 5*time.Second)
	if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
		t.Fatalf("after re-initiation: %v", err)
	}
}

// TestMismatchReasons: each kind of misconfiguration gives its plain
// reason on our side, with strongSwan as the peer.
func TestMismatchReasons(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	cases := []struct {
		name       string
		edit       func(ours *config.Tunnel, peer *testnet.CharonConn)
		wantReason []string
	}{
		{"psk", func(o *config.Tunnel, p *testnet.CharonConn) { p.PSK = "a-different-psk-0123456789" },
			[]string{"AUTHENTICATION_FAILED"}},
		{"proposal", func(o *config.Tunnel, p *testnet.CharonConn) { p.Proposals = "aes256-sha1-modp3072" },
			[]string{"NO_PROPOSAL_CHOSEN", "aes128gcm16-prfsha256-ecp256"}},
		{"selectors", func(o *config.Tunnel, p *testnet.CharonConn) {
			p.LocalTS = []netip.Prefix{netip.MustParsePrefix("10.20.2.0/24")}
			p.RemoteTS = []netip.Prefix{netip.MustParsePrefix("10.20.1.0/24")}
		}, []string{"TS_UNACCEPTABLE", "10.10.1.0/24"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := testnet.NewSiteToSite(t)
			ours := tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, "aes128gcm16-prfsha256-ecp256", "aes128gcm16", config.StartInitiate)
			peer := charonConn(s, "aes128gcm16-prfsha256-ecp256", "aes128gcm16", "none")
			c.edit(&ours, &peer)
			testnet.StartCharon(t, s.GwB, peer)
			d := startIked(t, s.GwA, ours)
			st := waitState(t, d, "s2s", ipsec.StateFailed, 15*time.Second)
			t.Logf("reason: %s", st.Reason)
			for _, w := range c.wantReason {
				if !strings.Contains(st.Reason, w) {
					t.Errorf("reason %q does not mention %q", st.Reason, w)
				}
			}
		})
	}
}
