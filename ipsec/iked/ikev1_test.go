package iked

import (
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/config/importer"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
)

// IKEv1 tunnels (ike_version 1) through the daemon and the userspace data
// plane against strongSwan's charon with version = 1: one charon serves
// the whole table, each case loads its connection; traffic must pass both
// ways.

func v1Tunnel(s *testnet.SiteToSite, ikeP, espP, start string) config.Tunnel {
	t := tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, ikeP, espP, start)
	t.IKEVersion = config.IKEv1
	t.LegacyAlgorithms = strings.Contains(ikeP+espP, "3des") || strings.Contains(ikeP+espP, "modp1024")
	return t
}

func v1Charon(s *testnet.SiteToSite, ikeP, espP string) testnet.CharonConn {
	c := charonConn(s, ikeP, espP, "none")
	c.Version = 1
	return c
}

// resetCharon drops what the last case left at strongSwan's end.
func resetCharon(t *testing.T, c *testnet.Charon) {
	c.Swanctl("--terminate", "--ike", "s2s", "--force", "--timeout", "2")
	waitFor(5*time.Second, func() bool {
		sas, err := c.SAs()
		return err == nil && len(sas) == 0
	})
}

func TestIKEv1StrongSwan(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	s := testnet.NewSiteToSite(t)
	charon := testnet.StartCharon(t, s.GwB, v1Charon(s, "aes128-sha1-modp2048", "aes128-sha1"))
	for _, c := range []struct {
		ike, esp   string
		weInitiate bool
		rekeys     bool
	}{
		{"aes128-sha1-modp2048", "aes128-sha1", true, true},
		{"aes128-sha1-modp2048", "aes128-sha1", false, false},
		{"aes256-sha256-modp2048", "aes256-sha256-modp2048", true, false}, // PFS
		{"aes256-sha256-modp2048", "aes256-sha256-modp2048", false, true},
		{"3des-sha1-modp1024", "3des-sha1", true, false},
		{"3des-sha1-modp1024", "3des-sha1", false, false},
		{"aes128-sha1-modp1024", "aes128-sha1", true, false}, // the isakmpd peers' suite
		{"aes128-sha1-modp1024", "aes128-sha1", false, false},
	} {
		role := "responder"
		if c.weInitiate {
			role = "initiator"
		}
		t.Run(c.ike+"/"+c.esp+"/"+role, func(t *testing.T) {
			resetCharon(t, charon)
			if err := charon.Load(v1Charon(s, c.ike, c.esp)); err != nil {
				t.Fatal(err)
			}
			start := config.StartRespond
			if c.weInitiate {
				start = config.StartInitiate
			}
			d := startIked(t, s.GwA, v1Tunnel(s, c.ike, c.esp, start))
			if !c.weInitiate {
				if err := charon.Initiate("s2s-net"); err != nil {
					t.Fatal(err)
				}
			}
			waitState(t, d, "s2s", ipsec.StateUp, 15*time.Second)
			if err := charon.WaitChild("s2s-net", 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := testnet.Ping(s.HostA, s.HostBIP, 1); err != nil {
				t.Fatalf("hostA -> hostB through the IKEv1 tunnel: %v", err)
			}
			if err := testnet.Ping(s.HostB, s.HostAIP, 1); err != nil {
				t.Fatalf("hostB -> hostA through the IKEv1 tunnel: %v", err)
			}
			if c.rekeys {
				// A TCP stream across phase 2 rekeys by each side and a
				// phase 1 rekey of ours.
				stream, err := startStream(s, 5214, 4<<20)
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(300 * time.Millisecond)
				if err := d.Rekey("s2s", false); err != nil {
					t.Errorf("our phase 2 rekey: %v", err)
				}
				waitEvents(t, d, "s2s", "CHILD_SA rekeyed", 1, 5*time.Second)
				time.Sleep(300 * time.Millisecond)
				if out, err := charon.Swanctl("--rekey", "--child", "s2s-net"); err != nil {
					t.Errorf("strongSwan's phase 2 rekey: %v: %s", err, out)
				}
				waitEvents(t, d, "s2s", "CHILD_SA rekeyed", 2, 5*time.Second)
				time.Sleep(300 * time.Millisecond)
				before := tunnelStatus(d, "s2s").IKE
				if err := d.Rekey("s2s", true); err != nil {
					t.Errorf("our phase 1 rekey: %v", err)
				}
				// The phase 1 rekey must have happened, not only the
				// stream have survived the attempt.
				waitEvents(t, d, "s2s", "IKE_SA rekeyed", 1, 10*time.Second)
				if now := tunnelStatus(d, "s2s"); now.IKE == nil || before == nil || now.IKE.InitiatorSPI == before.InitiatorSPI || len(now.Children) == 0 {
					t.Errorf("after our phase 1 rekey the tunnel's ISAKMP SA is %+v (before %+v), phase 2 SAs %d", now.IKE, before, len(now.Children))
				}
				// strongSwan's phase 1 rekey (an IKEv1 reauthentication: a
				// new main mode) under the same stream.
				time.Sleep(300 * time.Millisecond)
				before = tunnelStatus(d, "s2s").IKE
				if out, err := charon.Swanctl("--rekey", "--ike", "s2s", "--reauth"); err != nil {
					t.Errorf("strongSwan's phase 1 rekey: %v: %s", err, out)
				}
				if !waitFor(10*time.Second, func() bool {
					now := tunnelStatus(d, "s2s")
					return now.IKE != nil && before != nil && now.IKE.InitiatorSPI != before.InitiatorSPI && len(now.Children) > 0
				}) {
					st := tunnelStatus(d, "s2s")
					t.Errorf("after strongSwan's phase 1 rekey the tunnel's ISAKMP SA is %+v (before %+v), phase 2 SAs %d; events:\n%s", st.IKE, before, len(st.Children), eventLines(st))
				}
				time.Sleep(time.Second)
				if err := stream.Stop(5 * time.Second); err != nil {
					sas, _ := charon.Swanctl("--list-sas")
					st := tunnelStatus(d, "s2s")
					var esp any
					if e := d.Stats().ESP; e != nil {
						esp = *e
					}
					t.Fatalf("TCP across the rekeys: %v\nour CHILD_SAs: %+v\nour ESP counters: %+v\ncharon's SAs:\n%s", err, st.Children, esp, sas)
				}
				if err := testnet.Ping(s.HostA, s.HostBIP, 1); err != nil {
					t.Fatalf("after the rekeys: %v", err)
				}
			}
			st := waitState(t, d, "s2s", ipsec.StateUp, time.Second)
			if st.IKE == nil || st.IKE.Proposal != c.ike {
				t.Errorf("IKE proposal in status = %+v, want %s", st.IKE, c.ike)
			}
			if len(st.Children) == 0 || st.Children[0].Proposal != c.esp || st.Children[0].PacketsIn == 0 {
				t.Errorf("phase 2 status = %+v, want %s carrying packets", st.Children, c.esp)
			}
			d.Close()
		})
	}

	for _, c := range []struct {
		name      string
		edit      func(ours *config.Tunnel, peer *testnet.CharonConn)
		peerStart bool
		want      []string
	}{
		{"wrong psk", func(o *config.Tunnel, p *testnet.CharonConn) { p.PSK = "a-different-psk-0123456789" }, false,
			[]string{"AUTHENTICATION_FAILED", "pre-shared key"}},
		{"proposal mismatch", func(o *config.Tunnel, p *testnet.CharonConn) { p.Proposals = "aes256-sha256-modp3072" }, false,
			[]string{"NO_PROPOSAL_CHOSEN", "main mode", "aes128-sha1-modp2048"}},
		// The same two on a respond tunnel, strongSwan initiating: the
		// refusal is ours, and our status must say it too.
		{"wrong psk, peer initiates", func(o *config.Tunnel, p *testnet.CharonConn) {
			p.PSK = "a-different-psk-0123456789"
			o.StartAction = config.StartRespond
		}, true, []string{"AUTHENTICATION_FAILED", "pre-shared key mismatch"}},
		{"proposal mismatch, peer initiates", func(o *config.Tunnel, p *testnet.CharonConn) {
			p.Proposals = "aes256-sha256-modp3072"
			o.StartAction = config.StartRespond
		}, true, []string{"NO_PROPOSAL_CHOSEN", "peer offered aes256-sha256-modp3072, we accept aes128-sha1-modp2048"}},
		{"IKEv2 tunnel gets IKEv1", func(o *config.Tunnel, p *testnet.CharonConn) {
			o.IKEVersion = config.IKEv2
			o.StartAction = config.StartRespond
		}, true, []string{"the peer speaks IKEv1 main mode; set ike_version 1"}},
		{"IKEv1 tunnel gets IKEv2", func(o *config.Tunnel, p *testnet.CharonConn) {
			p.Version = 2
			o.StartAction = config.StartRespond
		}, true, []string{"the peer speaks IKEv2; set ike_version 2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			resetCharon(t, charon)
			ours := v1Tunnel(s, "aes128-sha1-modp2048", "aes128-sha1", config.StartInitiate)
			peer := v1Charon(s, "aes128-sha1-modp2048", "aes128-sha1")
			c.edit(&ours, &peer)
			if err := charon.Load(peer); err != nil {
				t.Fatal(err)
			}
			d := startIked(t, s.GwA, ours)
			if c.peerStart {
				go charon.Initiate("s2s-net")
			}
			if text, ok := statusSays(d, "s2s", c.want, 20*time.Second); !ok {
				t.Fatalf("status and events do not say %q:\n%s", c.want, text)
			}
			d.Close()
		})
	}
}

// statusSays waits until the tunnel's reason and events, together, hold
// every one of want: what an admin reads when a peer is refused or refuses.
// It returns that text, for the failure message.
func statusSays(d *Daemon, name string, want []string, timeout time.Duration) (string, bool) {
	var text string
	ok := waitFor(timeout, func() bool {
		st := tunnelStatus(d, name)
		text = st.Reason
		for _, e := range st.Events {
			text += "\n" + e.Message
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				return false
			}
		}
		return true
	})
	return text, ok
}

// TestIKEv1NATAndDPD: gateway A sits behind a masquerading NAT; the IKEv1
// tunnel to strongSwan floats to port 4500, carries traffic in UDP, and when
// the path dies our dead peer detection (R-U-THERE, RFC 3706) takes it
// down with the words in the status.
//
//	hostA -- gwA 192.168.50.2 -- 192.168.50.1 nat 10.10.0.1 (masquerade) -- 10.10.0.2 gwB (charon) -- hostB
func TestIKEv1NATAndDPD(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	testnet.RequireTool(t, "nft", "nftables")
	p := testnet.Prefix()
	hostA, gwA, nat := testnet.NewNS(t, p+"-ha"), testnet.NewNS(t, p+"-ga"), testnet.NewNS(t, p+"-nat")
	gwB, hostB := testnet.NewNS(t, p+"-gb"), testnet.NewNS(t, p+"-hb")
	testnet.Link(t, hostA, "lan0", "10.10.1.2/24", gwA, "lan0", "10.10.1.1/24")
	testnet.Link(t, gwA, "wan0", "192.168.50.2/24", nat, "in0", "192.168.50.1/24")
	testnet.Link(t, nat, "pub0", "10.10.0.1/24", gwB, "wan0", "10.10.0.2/24")
	testnet.Link(t, gwB, "lan0", "10.10.2.1/24", hostB, "lan0", "10.10.2.2/24")
	for _, c := range [][]string{
		{hostA.Name, "ip", "route", "add", "default", "via", "10.10.1.1"},
		{hostB.Name, "ip", "route", "add", "default", "via", "10.10.2.1"},
		{gwA.Name, "ip", "route", "add", "default", "via", "192.168.50.1"},
		{gwA.Name, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{gwB.Name, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{nat.Name, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{nat.Name, "nft", "add table ip nat; add chain ip nat post { type nat hook postrouting priority 100 ; } ; add rule ip nat post oifname pub0 masquerade"},
	} {
		ns := map[string]*testnet.NS{hostA.Name: hostA, hostB.Name: hostB, gwA.Name: gwA, gwB.Name: gwB, nat.Name: nat}[c[0]]
		if err := ns.Run(c[1:]...); err != nil {
			t.Fatalf("%v: %v", c, err)
		}
	}
	s := &testnet.SiteToSite{HostA: hostA, GwA: gwA, GwB: gwB, HostB: hostB,
		GwAWAN: netip.MustParseAddr("192.168.50.2"), GwBWAN: netip.MustParseAddr("10.10.0.2"),
		HostAIP: netip.MustParseAddr("10.10.1.2"), HostBIP: netip.MustParseAddr("10.10.2.2"),
		LANA: netip.MustParsePrefix("10.10.1.0/24"), LANB: netip.MustParsePrefix("10.10.2.0/24")}
	peer := v1Charon(s, "aes128-sha1-modp2048", "aes128-sha1")
	peer.RemoteAddr = netip.MustParseAddr("10.10.0.1") // A as the NAT shows it
	testnet.StartCharon(t, gwB, peer)
	ours := v1Tunnel(s, "aes128-sha1-modp2048", "aes128-sha1", config.StartInitiate)
	ours.DPDInterval = config.Duration{Duration: time.Second}
	ours.DPDTimeout = config.Duration{Duration: 3 * time.Second}
	d := startIked(t, gwA, ours)
	st := waitState(t, d, "s2s", ipsec.StateUp, 15*time.Second)
	if err := testnet.Ping(hostA, s.HostBIP, 2); err != nil {
		t.Fatalf("hostA -> hostB through the NAT: %v", err)
	}
	if err := testnet.Ping(hostB, s.HostAIP, 1); err != nil {
		t.Fatalf("hostB -> hostA through the NAT: %v", err)
	}
	if st.IKE == nil || !st.IKE.NATT {
		t.Errorf("status does not show NAT-T: %+v", st.IKE)
	}
	// DPD between live peers keeps the tunnel; then the path dies.
	time.Sleep(3 * time.Second)
	waitState(t, d, "s2s", ipsec.StateUp, time.Second)
	if err := nat.Run("ip", "link", "set", "pub0", "down"); err != nil {
		t.Fatal(err)
	}
	var text string
	if !waitFor(20*time.Second, func() bool {
		st := tunnelStatus(d, "s2s")
		text = st.Reason
		for _, e := range st.Events {
			text += "\n" + e.Message
		}
		return strings.Contains(text, "dead peer detection") && strings.Contains(text, "R-U-THERE")
	}) {
		t.Fatalf("the dead peer is not declared dead:\n%s", text)
	}
}

// TestImportedIsakmpdTunnel: the flashboot gateway's isakmpd.conf (the
// report this product started from), imported by config/importer, runs
// unchanged against strongSwan configured as that file's peer (machine B
// at 192.168.3.198, IKEv1 main mode with AES-SHA and isakmpd's group 2,
// quick mode QM-ESP-AES-SHA-SUITE, 192.168.2.0/24 to 192.168.4.0/24),
// and carries traffic.
func TestImportedIsakmpdTunnel(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	data, err := os.ReadFile("../../config/importer/testdata/isakmpd-flashboot-vpn.conf")
	if err != nil {
		t.Fatal(err)
	}
	res, err := importer.ImportAs(importer.ISAKMPD, data)
	if err != nil || len(res.Tunnels) != 1 {
		t.Fatalf("import: %v, %d tunnels", err, len(res.Tunnels))
	}
	tun := res.Tunnels[0]
	if tun.IKEVersion != config.IKEv1 {
		t.Fatalf("imported tunnel is not IKEv1: %+v", tun)
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
	// Machine B as the file describes it, in strongSwan's words.
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
	if err := testnet.Ping(hostB, netip.MustParseAddr("192.168.2.2"), 1); err != nil {
		t.Fatalf("192.168.4.2 -> 192.168.2.2 through the imported tunnel: %v", err)
	}
	if st.IKE == nil || st.IKE.Proposal != "aes128-sha1-modp1024" || len(st.Children) == 0 || st.Children[0].Proposal != "aes128-sha1" {
		t.Errorf("negotiated %+v / %+v, want aes128-sha1-modp1024 / aes128-sha1 as isakmpd's AES-SHA and QM-ESP-AES-SHA-SUITE", st.IKE, st.Children)
	}
}
