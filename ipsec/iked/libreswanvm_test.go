package iked

import (
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/pki"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
	pkcs12 "software.sslmate.com/src/go-pkcs12"
)

// TestLibreswanVM: our iked (userspace data plane) in a namespace against
// libreswan's pluto, the second independent implementation, running in a
// qemu VM on flashgate's qemu-x86_64 kernel, so that pluto's SAs go into a
// kernel with ESP (this machine's kernel has none; see
// testnet.StartLibreswanVM). One VM boot serves every case:
//
//	hostA 10.10.1.2 -- 10.10.1.1 gwA (iked) 10.10.0.1 ==tap== 10.10.0.2 VM (pluto, kernel ESP) lan0 10.10.2.1
//
// IKEv1 main + quick mode in the four suites of issue 19 (PFS on in two),
// each in one role and the first in both, traffic both ways through
// pluto's kernel SAs; a phase 2 and a phase 1 rekey of ours under a TCP
// stream; two subnet pairs (a quick mode and traffic per pair); dead peer
// detection declaring pluto dead once its packets are dropped; NAT-T from
// a second gateway behind a masquerading namespace (gwA); and IKEv2 with ECDSA certificates (issue 20) in both roles.
func TestLibreswanVM(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM in qemu")
	}
	p := testnet.Prefix()
	hostA, gwA := testnet.NewNS(t, p+"-lvh"), testnet.NewNS(t, p+"-lvg")
	testnet.Link(t, hostA, "lan0", "10.10.1.2/24", gwA, "lan0", "10.10.1.1/24")
	if err := hostA.Run("ip", "route", "add", "default", "via", "10.10.1.1"); err != nil {
		t.Fatal(err)
	}
	if err := gwA.Run("sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		t.Fatal(err)
	}
	var (
		ourWAN, vmWAN = netip.MustParseAddr("10.10.0.1"), netip.MustParseAddr("10.10.0.2")
		hostAIP       = netip.MustParseAddr("10.10.1.2")
		lanA, lanB    = netip.MustParsePrefix("10.10.1.0/24"), netip.MustParsePrefix("10.10.2.0/24")
		vmLAN         = netip.MustParsePrefix("10.10.2.1/24")
	)
	vm := testnet.StartLibreswanVM(t, gwA, testnet.LibreswanVMConfig{Tap: "wan0",
		Gateway: netip.PrefixFrom(ourWAN, 24), WAN: netip.PrefixFrom(vmWAN, 24), LAN: vmLAN})
	if out, err := vm.Run("/usr/sbin/ip", "xfrm", "state"); err != nil {
		t.Fatalf("the VM's kernel has no XFRM: %v: %s", err, out)
	}

	// Our side is iked with the userspace data plane (this machine's kernel
	// has no ESP), which carries ESP only in UDP: it announces a NAT, and
	// pluto keeps its default here (encapsulation=yes), so pluto's kernel
	// SAs are ESP in UDP on port 4500 too. With encapsulation=no pluto
	// ignores the NAT detection and installs SAs for bare ESP, which drop
	// our packets (TestLibreswanEncapsulationMismatch has what we say).
	v1conn := func(ike, esp string, pfs bool) testnet.PlutoConn {
		return testnet.PlutoConn{Name: "s2s", LocalAddr: vmWAN, RemoteAddr: ourWAN, LocalID: "gwB", RemoteID: "gwA",
			PSK: testPSK, IKE: ike, ESP: esp, PFS: pfs,
			LocalTS: []netip.Prefix{lanB}, RemoteTS: []netip.Prefix{lanA}}
	}
	pluto := vm.StartPluto(t, v1conn("aes128-sha1;modp2048", "aes128-sha1", false))
	// plutoLogOnFailure shows pluto's log as it is when a case fails (the
	// VM's pluto outlives the case).
	plutoLogOnFailure := func(t *testing.T) {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("pluto log (VM), last lines:\n%s", lastLogLines(vm.Pluto.ReadLog(), 60))
			}
		})
	}

	// bothWays checks traffic each way through the tunnel and that it went
	// through pluto's kernel SAs (whack --trafficstatus reads the VM
	// kernel's counters) and ours.
	bothWays := func(t *testing.T, d *Daemon) {
		t.Helper()
		if err := retry(3, func() error { return testnet.Ping(hostA, vmLAN.Addr(), 1) }); err != nil {
			t.Fatalf("hostA -> the VM's LAN through the tunnel: %v\n%s\n%s", err, pluto.Status(), vmXfrm(vm))
		}
		if err := retry(3, func() error { return vm.Ping(hostAIP, 1) }); err != nil {
			t.Fatalf("the VM's LAN -> hostA through the tunnel: %v\n%s\n%s", err, pluto.Status(), vmXfrm(vm))
		}
		in, out := plutoTraffic(pluto)
		t.Logf("pluto's kernel SAs: %d bytes in, %d out", in, out)
		if in == 0 || out == 0 {
			t.Errorf("pluto's kernel SAs counted %d bytes in, %d out; want traffic both ways:\n%s\n%s", in, out, pluto.Status(), vmXfrm(vm))
		}
		st := tunnelStatus(d, "s2s")
		if len(st.Children) == 0 || st.Children[0].PacketsIn == 0 || st.Children[0].PacketsOut == 0 {
			t.Errorf("our CHILD_SA status %+v, want packets both ways", st.Children)
		}
	}

	// rekeysUnderTraffic: a TCP stream from hostA to the VM's echo
	// service across our phase 2 rekey and our phase 1 rekey (a new main
	// mode beside the ISAKMP SA it replaces). pluto 4.10 cannot be told to
	// rekey an IKEv1 SA ("cannot force rekey of IKEv1 connection"): its
	// rekeys come only from lifetimes, which this test does not wait for.
	rekeysUnderTraffic := func(t *testing.T, d *Daemon) {
		t.Helper()
		stream, err := startEchoStream(hostA, netip.AddrPortFrom(vmLAN.Addr(), 7), 128<<10)
		if err != nil {
			t.Fatal(err)
		}
		// A case that fails before Stop must not leave the stream sending
		// into the next cases' tunnels.
		defer stream.conn.Close()
		establishedBefore := strings.Count(pluto.ReadLog(), "IKE SA established")
		time.Sleep(time.Second)
		if err := d.Rekey("s2s", false); err != nil {
			t.Errorf("our phase 2 rekey: %v", err)
		}
		waitEvents(t, d, "s2s", "CHILD_SA rekeyed", 1, 2*time.Minute)
		ikeBefore := tunnelStatus(d, "s2s").IKE
		if err := d.Rekey("s2s", true); err != nil {
			t.Errorf("our phase 1 rekey: %v", err)
		}
		// The new ISAKMP SA, or why there is none (a failed phase 1 rekey
		// says so in the events and the status).
		var st ipsec.TunnelStatus
		if !waitFor(2*time.Minute, func() bool {
			st = tunnelStatus(d, "s2s")
			return countEvents(d, "s2s", "IKE_SA rekeyed") >= 1 || countEvents(d, "s2s", "IKE_SA rekey failed") >= 1
		}) || countEvents(d, "s2s", "IKE_SA rekeyed") != 1 {
			t.Errorf("no new ISAKMP SA after our phase 1 rekey: status %s %q; events:\n%s", st.State, st.Reason, eventLines(st))
		} else if st.IKE == nil || ikeBefore == nil || st.IKE.InitiatorSPI == ikeBefore.InitiatorSPI || len(st.Children) == 0 {
			t.Errorf("after our phase 1 rekey the tunnel's ISAKMP SA is %+v (before %+v), children %d", st.IKE, ikeBefore, len(st.Children))
		}
		// The stream goes on over the phase 2 SA the new ISAKMP SA took.
		time.Sleep(2 * time.Second)
		if err := stream.Stop(2 * time.Minute); err != nil {
			t.Errorf("TCP echo through the tunnel across the rekeys: %v\n%s", err, pluto.Status())
		} else {
			t.Logf("TCP echo across the rekeys: %d bytes each way", stream.sent.Load())
		}
		bothWays(t, d)
		if log := pluto.ReadLog(); strings.Count(log, "IKE SA established") != establishedBefore+1 {
			t.Errorf("pluto logged %d new ISAKMP SAs across our phase 1 rekey, want 1:\n%s", strings.Count(log, "IKE SA established")-establishedBefore, lastLogLines(log, 30))
		}
	}

	// Debian builds libreswan without MODP 1024 (group 2): the legacy
	// suites go with group 5 here (against strongSwan, TestIKEv1StrongSwan
	// runs them with modp1024). Each suite in one role, the first in both;
	// the first, with us initiating, also carries the rekeys (one VM boot,
	// one pluto, one case at a time: a case takes seconds on a quiet
	// machine, and the VM's emulated CPU is what is slow).
	for _, c := range []struct {
		plutoIKE, plutoESP string
		pfs                bool
		ike, esp           string
		weInitiate, rekeys bool
	}{
		{"aes128-sha1;modp2048", "aes128-sha1", false, "aes128-sha1-modp2048", "aes128-sha1", true, true},
		{"aes128-sha1;modp2048", "aes128-sha1", false, "aes128-sha1-modp2048", "aes128-sha1", false, false},
		{"aes256-sha2_256;modp2048", "aes256-sha2_256", true, "aes256-sha256-modp2048", "aes256-sha256-modp2048", false, false},
		{"3des-sha1;modp1536", "3des-sha1", false, "3des-sha1-modp1536", "3des-sha1", true, false},
		{"aes128-sha1;modp1536", "aes128-sha1", true, "aes128-sha1-modp1536", "aes128-sha1-modp1536", false, false},
	} {
		name := "ikev1/" + c.ike + "/" + c.esp + "/" + map[bool]string{true: "initiator", false: "responder"}[c.weInitiate]
		if c.rekeys {
			name += "/rekeys-under-traffic"
		}
		t.Run(name, func(t *testing.T) {
			plutoLogOnFailure(t)
			if err := pluto.Load(v1conn(c.plutoIKE, c.plutoESP, c.pfs)); err != nil {
				t.Fatal(err)
			}
			start := config.StartRespond
			if c.weInitiate {
				start = config.StartInitiate
			}
			tun := tunnelConfig(ourWAN, vmWAN, "gwA", "gwB", lanA, lanB, c.ike, c.esp, start)
			tun.IKEVersion = config.IKEv1
			tun.LegacyAlgorithms = strings.Contains(c.ike, "3des") || strings.Contains(c.ike, "modp1536")
			d := startIked(t, gwA, tun)
			defer d.Close()
			if !c.weInitiate {
				if out, err := pluto.Initiate("s2s"); err != nil {
					t.Fatalf("pluto's main and quick mode: %v\n%s", err, out)
				}
			}
			st := waitState(t, d, "s2s", ipsec.StateUp, 3*time.Minute)
			if st.IKE == nil || st.IKE.Proposal != c.ike {
				t.Errorf("IKE proposal in status = %+v, want %s", st.IKE, c.ike)
			}
			if len(st.Children) == 0 || st.Children[0].Proposal != c.esp {
				t.Errorf("phase 2 status = %+v, want %s", st.Children, c.esp)
			}
			bothWays(t, d)
			if c.rekeys {
				rekeysUnderTraffic(t, d)
			}
		})
	}

	// Two subnet pairs in one tunnel: the VM's LAN gets a second subnet,
	// pluto one connection per pair (s2s, s2s-2), and we run one quick
	// mode per pair under the one ISAKMP SA, then carry traffic through
	// each pair's SAs both ways.
	t.Run("ikev1/two-subnet-pairs", func(t *testing.T) {
		plutoLogOnFailure(t)
		lanB2 := netip.MustParsePrefix("10.10.3.0/24")
		vmLAN2 := netip.MustParsePrefix("10.10.3.1/24")
		if out, err := vm.Run("/usr/sbin/ip", "addr", "replace", vmLAN2.String(), "dev", "lan0"); err != nil {
			t.Fatalf("the VM's second LAN subnet: %v: %s", err, out)
		}
		conn := v1conn("aes128-sha1;modp2048", "aes128-sha1", false)
		conn.LocalTS = []netip.Prefix{lanB, lanB2}
		if err := pluto.Load(conn); err != nil {
			t.Fatal(err)
		}
		tun := tunnelConfig(ourWAN, vmWAN, "gwA", "gwB", lanA, lanB, "aes128-sha1-modp2048", "aes128-sha1", config.StartInitiate)
		tun.IKEVersion = config.IKEv1
		tun.RemoteSubnets = append(tun.RemoteSubnets, config.MustPrefix(lanB2.String()))
		d := startIked(t, gwA, tun)
		defer d.Close()
		var st ipsec.TunnelStatus
		if !waitFor(3*time.Minute, func() bool {
			st = tunnelStatus(d, "s2s")
			return st.State == ipsec.StateUp && len(st.Children) == 2
		}) {
			t.Fatalf("want the tunnel up with a phase 2 SA per subnet pair: %s %q, %d phase 2 SAs; events:\n%s\n%s", st.State, st.Reason, len(st.Children), eventLines(st), pluto.Status())
		}
		for _, far := range []netip.Prefix{vmLAN, vmLAN2} {
			if err := retry(3, func() error { return testnet.Ping(hostA, far.Addr(), 1) }); err != nil {
				t.Errorf("hostA -> %s through the tunnel: %v\n%s\n%s", far.Addr(), err, pluto.Status(), vmXfrm(vm))
			}
			if err := retry(3, func() error {
				_, err := vm.Run("/usr/bin/ping", "-q", "-n", "-c", "1", "-W", "2", "-w", "6", "-I", far.Addr().String(), hostAIP.String())
				return err
			}); err != nil {
				t.Errorf("%s -> hostA through the tunnel: %v\n%s\n%s", far.Addr(), err, pluto.Status(), vmXfrm(vm))
			}
		}
		// Each pair's SAs carried its own traffic, at pluto (kernel
		// counters per connection) and at ours.
		traffic, _ := pluto.Whack("--trafficstatus")
		for _, name := range []string{`"s2s"`, `"s2s-2"`} {
			var line string
			for _, l := range strings.Split(traffic, "\n") {
				if strings.Contains(l, name+",") || strings.Contains(l, name+"[") || strings.Contains(l, name+" ") {
					line = l
				}
			}
			m := plutoTrafficRE.FindStringSubmatch(line)
			if m == nil || m[1] == "0" || m[2] == "0" {
				t.Errorf("pluto's connection %s carried no traffic both ways:\n%s", name, traffic)
			}
		}
		st = tunnelStatus(d, "s2s")
		for _, c := range st.Children {
			if c.PacketsIn == 0 || c.PacketsOut == 0 {
				t.Errorf("our phase 2 SA %+v carried no packets both ways", c)
			}
		}
	})

	// Dead peer detection: with short DPD delays on both sides the live
	// peers keep the tunnel (pluto answers our R-U-THERE), then pluto's
	// IKE and ESP-in-UDP packets are dropped before they reach us and our
	// status must declare the peer dead, in the words the strongSwan test
	// (TestIKEv1NATAndDPD) asserts.
	t.Run("ikev1/dpd-dead-peer", func(t *testing.T) {
		testnet.RequireTool(t, "nft", "nftables")
		plutoLogOnFailure(t)
		conn := v1conn("aes128-sha1;modp2048", "aes128-sha1", false)
		conn.DPDDelay = 2 * time.Second
		if err := pluto.Load(conn); err != nil {
			t.Fatal(err)
		}
		tun := tunnelConfig(ourWAN, vmWAN, "gwA", "gwB", lanA, lanB, "aes128-sha1-modp2048", "aes128-sha1", config.StartInitiate)
		tun.IKEVersion = config.IKEv1
		tun.DPDInterval, tun.DPDTimeout = config.Seconds(1), config.Seconds(4)
		d := startIked(t, gwA, tun)
		defer d.Close()
		waitState(t, d, "s2s", ipsec.StateUp, 3*time.Minute)
		bothWays(t, d)
		time.Sleep(5 * time.Second)
		if st := tunnelStatus(d, "s2s"); st.State != ipsec.StateUp {
			t.Fatalf("the tunnel fell between live peers with DPD on: %s %q; events:\n%s\n%s", st.State, st.Reason, eventLines(st), lastLogLines(pluto.ReadLog(), 30))
		}
		// Only UDP from the VM: its agent (TCP) still answers.
		drop := fmt.Sprintf("add table ip vmdpd; add chain ip vmdpd in { type filter hook input priority 0 ; } ; add rule ip vmdpd in ip saddr %s udp sport { 500, 4500 } drop", vmWAN)
		if err := gwA.Run("nft", drop); err != nil {
			t.Fatal(err)
		}
		defer gwA.Run("nft", "delete table ip vmdpd")
		var text string
		if !waitFor(time.Minute, func() bool {
			st := tunnelStatus(d, "s2s")
			text = st.Reason
			for _, e := range st.Events {
				text += "\n" + e.Message
			}
			return strings.Contains(text, "dead peer detection") && strings.Contains(text, "R-U-THERE")
		}) {
			t.Fatalf("the dead peer is not declared dead:\n%s", text)
		}
		t.Logf("our status: %s", strings.SplitN(text, "\n", 2)[0])
	})

	// NAT-T through a masquerading namespace: a second gateway (iked in
	// gwC, 192.168.60.2, hostC's LAN 10.10.5.0/24 behind it) reaches the
	// VM through gwA, which masquerades it to 10.10.0.1, the address
	// pluto's connection already names. Both sides must detect the NAT
	// and carry the traffic ESP-in-UDP through it.
	t.Run("ikev1/nat-t-masquerade", func(t *testing.T) {
		testnet.RequireTool(t, "nft", "nftables")
		plutoLogOnFailure(t)
		lanC := netip.MustParsePrefix("10.10.5.0/24")
		hostCIP, gwCWAN := netip.MustParseAddr("10.10.5.2"), netip.MustParseAddr("192.168.60.2")
		gwC, hostC := testnet.NewNS(t, p+"-lvn"), testnet.NewNS(t, p+"-lvc")
		testnet.Link(t, hostC, "lan0", "10.10.5.2/24", gwC, "lan0", "10.10.5.1/24")
		testnet.Link(t, gwC, "wan0", "192.168.60.2/24", gwA, "natin0", "192.168.60.1/24")
		testnet.RunAll(t, []testnet.Cmd{
			testnet.In(hostC, "ip", "route", "add", "default", "via", "10.10.5.1"),
			testnet.In(gwC, "ip", "route", "add", "default", "via", "192.168.60.1"),
			testnet.In(gwC, "sysctl", "-qw", "net.ipv4.ip_forward=1"),
			testnet.In(gwA, "nft", "add table ip vmnat; add chain ip vmnat post { type nat hook postrouting priority 100 ; } ; add rule ip vmnat post ip saddr 192.168.60.0/24 oifname wan0 counter masquerade"),
		})
		defer gwA.Run("nft", "delete table ip vmnat")
		conn := v1conn("aes128-sha1;modp2048", "aes128-sha1", false)
		conn.RemoteTS = []netip.Prefix{lanC}
		if err := pluto.Load(conn); err != nil {
			t.Fatal(err)
		}
		tun := tunnelConfig(gwCWAN, vmWAN, "gwA", "gwB", lanC, lanB, "aes128-sha1-modp2048", "aes128-sha1", config.StartInitiate)
		tun.IKEVersion = config.IKEv1
		d := startIked(t, gwC, tun)
		defer d.Close()
		st := waitState(t, d, "s2s", ipsec.StateUp, 3*time.Minute)
		if st.IKE == nil || !st.IKE.NATT {
			t.Errorf("our status does not show NAT-T: %+v", st.IKE)
		}
		if err := retry(3, func() error { return testnet.Ping(hostC, vmLAN.Addr(), 1) }); err != nil {
			t.Fatalf("hostC -> the VM's LAN through the NAT: %v\n%s\n%s", err, pluto.Status(), vmXfrm(vm))
		}
		if err := retry(3, func() error { return vm.Ping(hostCIP, 1) }); err != nil {
			t.Fatalf("the VM's LAN -> hostC through the NAT: %v\n%s\n%s", err, pluto.Status(), vmXfrm(vm))
		}
		if in, out := plutoTraffic(pluto); in == 0 || out == 0 {
			t.Errorf("pluto's kernel SAs counted %d bytes in, %d out; want traffic both ways:\n%s", in, out, pluto.Status())
		}
		// The tunnel went through the masquerade (pluto's connection names
		// only 10.10.0.1; the rule's counter shows the translations).
		if out, err := gwA.Output("nft", "list", "table", "ip", "vmnat"); err != nil || !natCounterRE.MatchString(out) {
			t.Errorf("the masquerade rule translated nothing (%v):\n%s", err, out)
		}
	})

	t.Run("ikev2/certificates", func(t *testing.T) {
		caKey, _ := pki.NewKey(pki.ECDSAP256)
		ca, err := pki.NewCA(pki.Template{CommonName: "Office VPN CA", PathLen: -1}, caKey)
		if err != nil {
			t.Fatal(err)
		}
		issue := func(id string) (*x509.Certificate, any, string) {
			k, _ := pki.NewKey(pki.ECDSAP256)
			c, err := pki.Issue(pki.Template{CommonName: id, Names: []string{id}}, k.Public(), ca, caKey, false)
			if err != nil {
				t.Fatal(err)
			}
			kp, _ := pki.KeyPEM(k)
			return c, k, string(kp)
		}
		boxCert, _, boxKey := issue("gwA.example")
		peerCert, peerKey, _ := issue("gwB.example")
		caKeyPEM, _ := pki.KeyPEM(caKey)
		p12, err := pkcs12.Modern.Encode(peerKey, peerCert, nil, "bundle passphrase")
		if err != nil {
			t.Fatal(err)
		}
		certConn := testnet.PlutoConn{Name: "s2s", IKEv2: true, AuthBy: "ecdsa",
			LocalAddr: vmWAN, RemoteAddr: ourWAN, LocalID: "gwB.example", RemoteID: "gwA.example",
			IKE: "aes128-sha2_256;dh19", ESP: "aes128-sha2_256", LocalTS: []netip.Prefix{lanB}, RemoteTS: []netip.Prefix{lanA},
			CertP12: p12, CertPass: "bundle passphrase", CAPEM: string(pki.CertPEM(ca))}
		pluto = vm.StartPluto(t, certConn)
		store := []config.Certificate{
			{Name: "office-ca", Cert: string(pki.CertPEM(ca)), Key: config.NewSecret(string(caKeyPEM)), CA: true},
			{Name: "box", Cert: string(pki.CertPEM(boxCert)), Key: config.NewSecret(boxKey), Issuer: "office-ca"},
		}
		for _, weInitiate := range []bool{true, false} {
			t.Run(map[bool]string{true: "initiator", false: "responder"}[weInitiate], func(t *testing.T) {
				plutoLogOnFailure(t)
				if err := pluto.Load(certConn); err != nil {
					t.Fatal(err)
				}
				start := config.StartRespond
				if weInitiate {
					start = config.StartInitiate
				}
				tun := tunnelConfig(ourWAN, vmWAN, "gwA.example", "gwB.example", lanA, lanB, "aes128-sha256-ecp256", "aes128-sha256", start)
				tun.PSK = config.Secret{}
				tun.Auth, tun.LocalCert, tun.TrustedCAs = config.AuthCert, "box", []string{"office-ca"}
				d := startIkedConfig(t, gwA, &config.Config{Tunnels: []config.Tunnel{tun}, Certificates: store})
				defer d.Close()
				if !weInitiate {
					if out, err := pluto.Initiate("s2s"); err != nil {
						t.Fatalf("pluto's IKE_SA_INIT and IKE_AUTH: %v\n%s", err, out)
					}
				}
				st := waitState(t, d, "s2s", ipsec.StateUp, 3*time.Minute)
				if st.IKE == nil || st.IKE.Proposal != "aes128-sha256-ecp256" {
					t.Errorf("IKE proposal in status = %+v", st.IKE)
				}
				bothWays(t, d)
				log := pluto.ReadLog()
				if !strings.Contains(log, "authenticated peer") || !strings.Contains(log, "gwA.example") ||
					!(strings.Contains(log, "ECDSA") || strings.Contains(log, "digital signature")) {
					t.Errorf("pluto did not log authenticating us by a signature:\n%s", lastLogLines(log, 30))
				}
			})
		}
	})
}

// retry runs f up to n times until it succeeds: qemu emulates the VM's
// CPU, and with the machine loaded a ping's deadline can pass before the
// emulated kernel answers.
func retry(n int, f func() error) (err error) {
	for i := 0; i < n; i++ {
		if err = f(); err == nil {
			return nil
		}
	}
	return err
}

// vmXfrm is the VM kernel's view when traffic does not pass: its SAs
// with their counters and encapsulation, its policies, and its XFRM
// error counters (e.g. XfrmInStateMismatch for ESP in UDP reaching an SA
// without encapsulation).
func vmXfrm(vm *testnet.LibreswanVM) string {
	var b strings.Builder
	for _, c := range [][]string{{"/usr/sbin/ip", "-s", "xfrm", "state"}, {"/usr/sbin/ip", "xfrm", "policy"}} {
		out, err := vm.Run(c...)
		fmt.Fprintf(&b, "VM: %s (%v):\n%s\n", strings.Join(c[1:], " "), err, out)
	}
	if out, err := vm.ReadFile("/proc/net/xfrm_stat"); err == nil {
		var nz []string
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[1] != "0" {
				nz = append(nz, l)
			}
		}
		fmt.Fprintf(&b, "VM: /proc/net/xfrm_stat (not 0): %s\n", strings.Join(nz, "; "))
	}
	return b.String()
}

// natCounterRE: an nft counter that counted packets.
var natCounterRE = regexp.MustCompile(`counter packets [1-9]`)

var plutoTrafficRE = regexp.MustCompile(`inBytes=(\d+), outBytes=(\d+)`)

// plutoTraffic sums the byte counters of pluto's IPsec SAs (whack
// --trafficstatus: the kernel's counters).
func plutoTraffic(p *testnet.Pluto) (in, out int64) {
	s, _ := p.Whack("--trafficstatus")
	for _, m := range plutoTrafficRE.FindAllStringSubmatch(s, -1) {
		i, _ := strconv.ParseInt(m[1], 10, 64)
		o, _ := strconv.ParseInt(m[2], 10, 64)
		in, out = in+i, out+o
	}
	return in, out
}

// echoStream is one TCP connection from ns to an echo service through the
// tunnel: the pattern goes out at a bounded rate and every echoed byte is
// checked, so the stream tests both directions at once.
type echoStream struct {
	conn     net.Conn
	sent     atomic.Int64
	received atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
	sendErr  error
	recvErr  error
}

func startEchoStream(ns *testnet.NS, dst netip.AddrPort, rate int) (*echoStream, error) {
	c, err := tcpDial(ns, dst, time.Minute)
	if err != nil {
		return nil, fmt.Errorf("connect to the echo service %s: %w", dst, err)
	}
	st := &echoStream{conn: c, stop: make(chan struct{})}
	st.wg.Add(2)
	go func() {
		defer st.wg.Done()
		_, st.recvErr = verifyStream(c, 3, &st.received)
	}()
	go func() {
		defer st.wg.Done()
		st.sendErr = sendPaced(c, 3, 8<<10, rate, time.Minute, st.stop, &st.sent)
	}()
	return st, nil
}

// Stop ends the sending, waits up to timeout for every byte to come back,
// and reports any loss, corruption or stall.
func (st *echoStream) Stop(timeout time.Duration) error {
	close(st.stop)
	done := make(chan struct{})
	go func() { st.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		st.conn.Close()
		<-done
		return fmt.Errorf("the echo did not drain within %v: sent %d, echoed %d", timeout, st.sent.Load(), st.received.Load())
	}
	st.conn.Close()
	if st.sendErr != nil {
		return fmt.Errorf("sender after %d bytes: %w", st.sent.Load(), st.sendErr)
	}
	if st.recvErr != nil && st.recvErr != io.EOF {
		return fmt.Errorf("receiver after %d bytes: %w", st.received.Load(), st.recvErr)
	}
	if st.sent.Load() != st.received.Load() {
		return fmt.Errorf("sent %d bytes, %d echoed", st.sent.Load(), st.received.Load())
	}
	return nil
}
