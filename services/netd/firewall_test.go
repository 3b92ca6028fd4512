package netd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/flashgate/flashgate/internal/testnet"
)

// TestFirewallPolicy sends real packets through the router namespace and
// checks each path of the policy: what it allows passes (and is NATed as
// it should be), what it drops gets no answer, what it rejects is refused.
func TestFirewallPolicy(t *testing.T) {
	l := newLab(t)
	fw := labFirewall()
	if err := fw.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := l.nft.Apply(Build(&fw)); err != nil {
		t.Fatal(err)
	}
	tcpWhoami(t, l.wan, "10.99.0.2:7000")
	tcpWhoami(t, l.wan, "10.99.0.2:9000")
	tcpWhoami(t, l.wan, "10.99.0.2:9002")
	udpWhoami(t, l.wan, "10.99.0.2:7001")
	tcpWhoami(t, l.lan, "192.168.50.2:80")
	tcpWhoami(t, l.lan, "192.168.50.2:7000")
	tcpWhoami(t, l.rem, "172.16.9.2:7000")
	for _, a := range []string{":443", ":80", ":22", ":2222"} {
		tcpWhoami(t, l.rt, a)
	}
	udpWhoami(t, l.rt, ":500")
	udpWhoami(t, l.rt, ":4500")
	udpWhoami(t, l.rt, ":501")

	ap := netip.AddrPortFrom
	none := netip.Addr{}
	cases := []struct {
		name    string
		from    *testnet.NS
		network string
		src     netip.Addr
		dst     netip.AddrPort
		seenAs  netip.Addr // zero: must be blocked
		refused bool       // blocked by a reject: refused at once
	}{
		{"LAN to WAN tcp is masqueraded", l.lan, "tcp4", none, ap(wanPeer, 7000), rtWAN, false},
		{"LAN to WAN udp is masqueraded", l.lan, "udp4", none, ap(wanPeer, 7001), rtWAN, false},
		{"user rule drops LAN to WAN tcp 9000", l.lan, "tcp4", none, ap(wanPeer, 9000), none, false},
		{"user rule rejects tcp 9001", l.lan, "tcp4", none, ap(wanPeer, 9001), none, true},
		{"LAN to WAN other port passes", l.lan, "tcp4", none, ap(wanPeer, 9002), rtWAN, false},
		{"LAN reaches the web UI (443)", l.lan, "tcp4", none, ap(rtLAN, 443), lanHost, false},
		{"LAN reaches the redirect (80)", l.lan, "tcp4", none, ap(rtLAN, 80), lanHost, false},
		{"LAN to the box tcp 22 dropped", l.lan, "tcp4", none, ap(rtLAN, 22), none, false},
		{"WAN to the web UI dropped", l.wan, "tcp4", none, ap(rtWAN, 443), none, false},
		{"WAN to port 80 dropped", l.wan, "tcp4", none, ap(rtWAN, 80), none, false},
		{"IKE from the peer passes", l.wan, "udp4", wanPeer, ap(rtWAN, 500), wanPeer, false},
		{"NAT-T from the peer passes", l.wan, "udp4", wanPeer, ap(rtWAN, 4500), wanPeer, false},
		{"IKE from another WAN host dropped", l.wan, "udp4", wanFoe, ap(rtWAN, 500), none, false},
		{"other UDP from the peer dropped", l.wan, "udp4", wanPeer, ap(rtWAN, 501), none, false},
		{"user input rule admits its source", l.wan, "tcp4", wanFoe, ap(rtWAN, 2222), wanFoe, false},
		{"user input rule only for its source", l.wan, "tcp4", wanPeer, ap(rtWAN, 2222), none, false},
		{"WAN to a LAN host directly dropped", l.wan, "tcp4", none, ap(lanHost, 7000), none, false},
		{"port forward reaches the LAN host unNATed", l.wan, "tcp4", wanPeer, ap(rtWAN, 8080), wanPeer, false},
		{"forwarded host not reachable on its own port", l.wan, "tcp4", wanPeer, ap(lanHost, 80), none, false},
		{"LAN to tunnel subnet not NATed", l.lan, "tcp4", none, ap(remHost, 7000), lanHost, false},
		{"tunnel subnet to LAN passes", l.rem, "tcp4", none, ap(lanHost, 7000), remHost, false},
		{"tunnel subnet to WAN dropped", l.rem, "tcp4", none, ap(wanPeer, 7000), none, false},
		{"WAN to tunnel subnet dropped", l.wan, "tcp4", none, ap(remHost, 7000), none, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seen, err := probe(c.from, c.network, c.src, c.dst)
			switch {
			case c.refused:
				if !errors.Is(err, syscall.ECONNREFUSED) {
					t.Errorf("%s %s: want connection refused (reject), got seen=%q err=%v", c.network, c.dst, seen, err)
				}
			case !c.seenAs.IsValid():
				if !errors.Is(err, errBlocked) {
					t.Errorf("%s %s: want no answer (dropped), got seen=%q err=%v", c.network, c.dst, seen, err)
				}
			case err != nil:
				t.Errorf("%s %s: want an answer, got %v", c.network, c.dst, err)
			case seen != c.seenAs.String():
				t.Errorf("%s %s: server saw source %s, want %s", c.network, c.dst, seen, c.seenAs)
			}
		})
	}

	t.Run("ICMP", func(t *testing.T) {
		if err := testnet.Ping(l.lan, wanPeer, 1); err != nil {
			t.Errorf("LAN ping to the WAN host: %v", err)
		}
		if err := testnet.Ping(l.lan, rtLAN, 1); err != nil {
			t.Errorf("LAN ping to the box: %v", err)
		}
		if err := testnet.Ping(l.wan, rtWAN, 1); err == nil {
			t.Errorf("WAN ping to the box was answered; the policy drops it")
		}
	})

	t.Run("hit counters", func(t *testing.T) {
		rules, err := l.nft.Rules()
		if err != nil {
			t.Fatal(err)
		}
		hits := map[string]uint64{}
		for _, h := range Hits(rules) {
			hits[h.Rule] = h.Packets
		}
		for _, want := range []string{"forward builtin:drop", "input builtin:drop", "forward rule:no-9000",
			"forward rule:refuse-9001", "prerouting forward:web", "forward forward:web", "postrouting masquerade:lan-out",
			"input builtin:ike", "input rule:admin-ssh", "input builtin:lan-webui", "forward builtin:lan-to-tunnel",
			"forward builtin:tunnel-to-lan", "postrouting builtin:tunnel-no-nat"} {
			if hits[want] == 0 {
				t.Errorf("counter %q is 0 after traffic that matches it; counters: %v", want, hits)
			}
		}
		if len(rules) != len(Build(&fw)) {
			t.Errorf("kernel has %d rules, the builder made %d", len(rules), len(Build(&fw)))
		}
	})
}

// TestFirewallPolicyIPv6 checks the same policy for IPv6, which the inet
// table covers too: the LAN gets out (routed, not masqueraded), the WAN
// does not get in, the web UI answers the LAN only.
func TestFirewallPolicyIPv6(t *testing.T) {
	l := newLab(t)
	l.addIPv6(t)
	fw := labFirewall()
	fw.Rules = append(fw.Rules, Rule{Name: "v6-block", Chain: ChainForward, In: RoleLAN, Protocol: "tcp",
		Destinations: []netip.Prefix{netip.MustParsePrefix("fd99::2/128")}, DestinationPorts: []PortRange{{7001, 7001}},
		Action: ActionDrop, Path: "firewall.rules[v6-block]"})
	if err := fw.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := l.nft.Apply(Build(&fw)); err != nil {
		t.Fatal(err)
	}
	tcpWhoami(t, l.wan, "[fd99::2]:7000")
	tcpWhoami(t, l.wan, "[fd99::2]:7001")
	tcpWhoami(t, l.lan, "[fd50::2]:7000")
	tcpWhoami(t, l.rt, "[::]:443")
	udpWhoami(t, l.rt, "[::]:500")
	lan6, wan6 := netip.MustParseAddr("fd50::2"), netip.MustParseAddr("fd99::2")
	ap := netip.AddrPortFrom
	cases := []struct {
		name    string
		from    *testnet.NS
		network string
		dst     netip.AddrPort
		seenAs  netip.Addr
	}{
		{"LAN to WAN is routed, not masqueraded", l.lan, "tcp6", ap(wan6, 7000), lan6},
		{"user rule on an IPv6 destination", l.lan, "tcp6", ap(wan6, 7001), netip.Addr{}},
		{"WAN to a LAN host dropped", l.wan, "tcp6", ap(lan6, 7000), netip.Addr{}},
		{"LAN reaches the web UI", l.lan, "tcp6", ap(netip.MustParseAddr("fd50::1"), 443), lan6},
		{"WAN to the web UI dropped", l.wan, "tcp6", ap(netip.MustParseAddr("fd99::1"), 443), netip.Addr{}},
		{"IKE from a host that is no peer dropped", l.wan, "udp6", ap(netip.MustParseAddr("fd99::1"), 500), netip.Addr{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seen, err := probe(c.from, c.network, netip.Addr{}, c.dst)
			switch {
			case !c.seenAs.IsValid():
				if !errors.Is(err, errBlocked) {
					t.Errorf("%s %s: want no answer (dropped), got seen=%q err=%v", c.network, c.dst, seen, err)
				}
			case err != nil:
				t.Errorf("%s %s: want an answer, got %v", c.network, c.dst, err)
			case seen != c.seenAs.String():
				t.Errorf("%s %s: server saw source %s, want %s", c.network, c.dst, seen, c.seenAs)
			}
		})
	}
}

// TestFirewallReplaceUnderTraffic replaces the ruleset 20 times while two
// TCP connections stream through the router, one masqueraded and one
// through the port forward: neither may lose its connection or a byte.
// (Retransmissions are logged, not judged: on a loaded machine a delayed
// ACK makes TCP send a tail-loss probe, which counts as one.)
func TestFirewallReplaceUnderTraffic(t *testing.T) {
	l := newLab(t)
	fw := labFirewall()
	if err := l.nft.Apply(Build(&fw)); err != nil {
		t.Fatal(err)
	}
	streams := map[string]*stream{
		"masqueraded LAN->WAN":    startStream(t, l.wan, "10.99.0.2:7100", l.lan, "10.99.0.2:7100"),
		"port-forwarded WAN->LAN": startStream(t, l.lan, "192.168.50.2:81", l.wan, "10.99.0.1:8081"),
	}
	// Every other ruleset differs: an extra rule before the others, a
	// reordered list and a changed port forward, so each apply really
	// rebuilds the table.
	alt := labFirewall()
	alt.Rules = append([]Rule{{Name: "extra", Chain: ChainForward, In: RoleWAN, Protocol: "udp",
		DestinationPorts: []PortRange{{5000, 5100}}, Action: ActionDrop, Path: "firewall.rules[extra]"}}, alt.Rules...)
	alt.Rules[1], alt.Rules[2] = alt.Rules[2], alt.Rules[1]
	alt.PortForwards[0].External = PortRange{8082, 8082}
	// Meanwhile a WAN host sprays datagrams at a LAN host it must never
	// reach: a replacement that opened the firewall for a moment would let
	// some through.
	leaks := udpCounter(t, l.lan, "192.168.50.2:7009")
	stopSpray := spray(t, l.wan, "192.168.50.2:7009")
	for i := range 20 {
		f := &fw
		if i%2 == 0 {
			f = &alt
		}
		if err := l.nft.Apply(Build(f)); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if sent := stopSpray(); sent == 0 {
		t.Error("the WAN host sent no datagrams")
	} else if n := leaks.Load(); n != 0 {
		t.Errorf("%d of %d datagrams from the WAN reached the LAN host during the replacements", n, sent)
	}
	for name, s := range streams {
		sent, received, err := s.finish()
		if err != nil {
			t.Errorf("%s: the connection broke: %v", name, err)
		}
		if sent == 0 || received != sent {
			t.Errorf("%s: sent %d bytes, received %d", name, sent, received)
		}
		t.Logf("%s: %d bytes through 20 replacements, %d retransmissions", name, sent, s.retrans)
	}
}

// TestRefusedApplyKeepsRuleset gives the reconciler bad states after a
// good one: each is refused with the field path of the problem, and the
// kernel's ruleset is the very one that was there (same rule handles:
// nothing was rebuilt).
func TestRefusedApplyKeepsRuleset(t *testing.T) {
	l := newLab(t)
	r := &Reconciler{NFT: l.nft}
	good := &Desired{Firewall: labFirewall(), Addresses: []Address{
		{Link: "lan0", Prefix: netip.MustParsePrefix("192.168.50.1/24"), Path: "interfaces[lan0].addresses[0]"},
		{Link: "wan0", Prefix: netip.MustParsePrefix("10.99.0.1/24"), Path: "interfaces[wan0].addresses[0]"},
	}, Links: []Link{{Name: "lan0", Role: RoleLAN, Up: true, Path: "interfaces[lan0]"}, {Name: "wan0", Role: RoleWAN, Up: true, Path: "interfaces[wan0]"}}}
	if err := r.Apply(good); err != nil {
		t.Fatal(err)
	}
	before, err := l.nft.Rules()
	if err != nil {
		t.Fatal(err)
	}
	// The same state again (the periodic resync) leaves the table alone,
	// counters included.
	same := cloneDesired(good)
	if err := r.Apply(same); err != nil {
		t.Fatal(err)
	}
	if _, _, res := r.Current(); res.FirewallReplaced {
		t.Errorf("applying an unchanged state replaced the firewall")
	}
	if again, _ := l.nft.Rules(); !reflect.DeepEqual(handles(before), handles(again)) {
		t.Errorf("applying an unchanged state changed the kernel's rules")
	}
	good = same
	cases := []struct {
		name     string
		change   func(d *Desired)
		wantPath string
	}{
		{"rule names an unknown interface", func(d *Desired) { d.Firewall.Rules[0].In = "eth9" }, "firewall.rules[no-9000].in"},
		{"port forwards on the same port", func(d *Desired) {
			pf := d.Firewall.PortForwards[0]
			pf.Name, pf.Path, pf.External, pf.In = "web2", "firewall.port_forwards[web2]", PortRange{8000, 8100}, "wan0"
			d.Firewall.PortForwards = append(d.Firewall.PortForwards, pf)
		}, "firewall.port_forwards[web2].external_ports"},
		{"tunnel subnet overlaps the LAN", func(d *Desired) {
			d.Firewall.Tunnels[0].RemoteSubnets = append(d.Firewall.Tunnels[0].RemoteSubnets, netip.MustParsePrefix("192.168.0.0/16"))
		}, "tunnels[branch].remote_subnets[1]"},
		{"two interfaces on one network", func(d *Desired) {
			d.Addresses = append(d.Addresses, Address{Link: "wan0", Prefix: netip.MustParsePrefix("192.168.50.9/24"), Path: "interfaces[wan0].addresses[1]"})
		}, "interfaces[wan0].addresses[1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := cloneDesired(good)
			c.change(bad)
			err := r.Apply(bad)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Apply: want a *ValidationError, got %v", err)
			}
			found := false
			for _, p := range ve.Problems {
				found = found || p.Path == c.wantPath
			}
			if !found {
				t.Errorf("Apply: want a problem at %s, got %v", c.wantPath, err)
			}
			after, err := l.nft.Rules()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(handles(before), handles(after)) {
				t.Errorf("the kernel's ruleset changed after a refused apply:\nbefore %v\nafter  %v", handles(before), handles(after))
			}
			if cur, _, _ := r.Current(); cur != good {
				t.Errorf("the reconciler's current state changed after a refused apply")
			}
		})
	}
}

func handles(rs []netdapi.RuleCounter) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%s/%d/%s", r.Chain, r.Handle, r.Comment)
	}
	return out
}

// cloneDesired copies the slices a test may change.
func cloneDesired(d *Desired) *Desired {
	c := *d
	c.Addresses = slices.Clone(d.Addresses)
	c.Firewall.Rules = slices.Clone(d.Firewall.Rules)
	c.Firewall.PortForwards = slices.Clone(d.Firewall.PortForwards)
	c.Firewall.Tunnels = slices.Clone(d.Firewall.Tunnels)
	for i := range c.Firewall.Tunnels {
		c.Firewall.Tunnels[i].RemoteSubnets = slices.Clone(c.Firewall.Tunnels[i].RemoteSubnets)
	}
	return &c
}

// TestKernelRefusedBatchChangesNothing makes the kernel itself refuse a
// batch (a DNAT in a filter chain passes our translation but not the
// kernel's checks) and checks that the table's deletion at the start of
// that same batch was undone with the rest: the old ruleset is in force.
// It also applies a 600-rule ruleset, which must fit in one batch.
func TestKernelRefusedBatchChangesNothing(t *testing.T) {
	l := newLab(t)
	big := Build(bigFirewall())
	if err := l.nft.Apply(big); err != nil {
		t.Fatalf("apply %d rules: %v", len(big), err)
	}
	if rules, err := l.nft.Rules(); err != nil || len(rules) != len(big) {
		t.Fatalf("after applying %d rules the kernel has %d (%v)", len(big), len(rules), err)
	}
	fw := labFirewall()
	good := Build(&fw)
	if err := l.nft.Apply(good); err != nil {
		t.Fatal(err)
	}
	before, err := l.nft.Rules()
	if err != nil {
		t.Fatal(err)
	}
	bad := append(slices.Clone(good), Spec{Chain: ChainInput, Comment: "bad", Family: 4, Verdict: VerdictDNAT,
		DNAT: netip.MustParseAddr("192.0.2.1")})
	if err := l.nft.Apply(bad); err == nil {
		t.Fatal("the kernel accepted a DNAT in a filter chain; the test needs a batch it refuses")
	}
	after, err := l.nft.Rules()
	if err != nil {
		t.Fatalf("the table is gone after a refused batch: %v", err)
	}
	if !reflect.DeepEqual(handles(before), handles(after)) {
		t.Errorf("a refused batch changed the ruleset:\nbefore %v\nafter  %v", handles(before), handles(after))
	}
	// And the old policy still works.
	tcpWhoami(t, l.wan, "10.99.0.2:7000")
	if seen, err := probe(l.lan, "tcp4", netip.Addr{}, netip.AddrPortFrom(wanPeer, 7000)); err != nil || seen != rtWAN.String() {
		t.Errorf("after the refused batch LAN to WAN: seen %q, %v", seen, err)
	}
}

// TestTunnelZoneTrustsOnlyTheTunnel checks the ways an address-only
// tunnel zone fails: a WAN host sending from a remote subnet's address
// reaches the LAN, and LAN traffic for a tunnel that is down leaves by the
// WAN in clear, even when a user rule accepts everything from the LAN to
// the WAN, or when the connection was running before. Reverse-path
// filtering is off on the router, because a tunnel that is down (its
// routes gone, the default route pointing at the WAN) defeats it anyway:
// the firewall alone must hold.
func TestTunnelZoneTrustsOnlyTheTunnel(t *testing.T) {
	l := newLab(t)
	fw := labFirewall()
	// The broadest user rule there is for the way out: it must not reopen
	// the leak.
	fw.Rules = append(fw.Rules, Rule{Name: "lan-out", Chain: ChainForward, In: RoleLAN, Out: RoleWAN,
		Protocol: "any", Action: ActionAccept, Path: "firewall.rules[lan-out]"})
	before := fw
	before.Tunnels = slices.Clone(fw.Tunnels)
	// A second remote subnet whose tunnel is down: nothing routes it into
	// fgesp0, and the router's route for it leads out of the WAN.
	down := netip.MustParsePrefix("172.16.10.0/24")
	fw.Tunnels[0].RemoteSubnets = append(slices.Clone(fw.Tunnels[0].RemoteSubnets), down)
	for _, f := range []*Firewall{&before, &fw} {
		if err := f.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	// First without that subnet, to open a connection to it that the
	// router has seen established when the full policy arrives: the
	// conntrack entry of a connection that ran through a tunnel now down.
	if err := l.nft.Apply(Build(&before)); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"rt", "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0", "net.ipv4.conf.wan0.rp_filter=0"},
		{"rt", "ip", "route", "add", down.String(), "via", wanPeer.String()},
		{"wan", "ip", "addr", "add", "172.16.9.77/32", "dev", "eth0"},
		{"wan", "ip", "addr", "add", "172.16.10.2/24", "dev", "eth0"},
	} {
		ns := map[string]*testnet.NS{"rt": l.rt, "wan": l.wan}[c[0]]
		if err := ns.Run(c[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	running := openLines(t, l.wan, "172.16.10.2:7200", l.lan)
	if err := running.send("before"); err != nil {
		t.Fatalf("a connection to 172.16.10.2 before the subnet was a tunnel's: %v", err)
	}
	if err := l.nft.Apply(Build(&fw)); err != nil {
		t.Fatal(err)
	}
	atLAN := udpSources(t, l.lan, "192.168.50.2:7100")
	atWAN := udpSources(t, l.wan, "172.16.10.2:7100")
	spoofed := netip.MustParseAddr("172.16.9.77")
	if err := running.send("after"); err == nil {
		t.Errorf("a running LAN connection to the remote subnet of a tunnel that is down went on by the WAN in clear")
	}

	sendUDP(t, l.rem, remHost, netip.MustParseAddrPort("192.168.50.2:7100"))
	sendUDP(t, l.wan, spoofed, netip.MustParseAddrPort("192.168.50.2:7100"))
	sendUDP(t, l.lan, lanHost, netip.MustParseAddrPort("172.16.10.2:7100"))
	time.Sleep(time.Second)

	if got := atLAN(); !slices.Contains(got, remHost) {
		t.Errorf("the LAN host got datagrams from %v; want one from %s, out of the tunnel", got, remHost)
	} else if slices.Contains(got, spoofed) {
		t.Errorf("a WAN host sending from the tunnel's remote subnet (%s) reached the LAN", spoofed)
	}
	if got := atWAN(); len(got) > 0 {
		t.Errorf("LAN traffic for the remote subnet of a tunnel that is down left by the WAN in clear (from %v)", got)
	}
	// The leak rule is narrow: the LAN still reaches the WAN.
	tcpWhoami(t, l.wan, "10.99.0.2:7000")
	if seen, err := probe(l.lan, "tcp4", netip.Addr{}, netip.AddrPortFrom(wanPeer, 7000)); err != nil || seen != rtWAN.String() {
		t.Errorf("LAN to WAN: seen %q, %v; want an answer seen from %s", seen, err, rtWAN)
	}
}

// lines is a TCP connection from one namespace to a server in another that
// answers every line with the same line.
type lines struct {
	c net.Conn
	r *bufio.Reader
}

// openLines starts the echo server on addr in srv and connects to it from
// cli.
func openLines(t *testing.T, srv *testnet.NS, addr string, cli *testnet.NS) *lines {
	t.Helper()
	var ln net.Listener
	if err := do(srv, func() (err error) { ln, err = net.Listen("tcp4", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	var c net.Conn
	if err := do(cli, func() (err error) { c, err = net.DialTimeout("tcp4", addr, time.Second); return err }); err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &lines{c: c, r: bufio.NewReader(c)}
}

// send writes one line and waits at most a second for its echo.
func (l *lines) send(line string) error {
	l.c.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprintln(l.c, line); err != nil {
		return err
	}
	got, err := l.r.ReadString('\n')
	if err != nil {
		return err
	}
	if got != line+"\n" {
		return fmt.Errorf("echo %q, want %q", got, line)
	}
	return nil
}

// udpSources records the source of every datagram that reaches addr in ns;
// the returned function lists them so far.
func udpSources(t *testing.T, ns *testnet.NS, addr string) func() []netip.Addr {
	t.Helper()
	var pc net.PacketConn
	if err := do(ns, func() (err error) { pc, err = net.ListenPacket("udp4", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var mu sync.Mutex
	var from []netip.Addr
	go func() {
		buf := make([]byte, 1500)
		for {
			_, a, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			mu.Lock()
			from = append(from, a.(*net.UDPAddr).AddrPort().Addr().Unmap())
			mu.Unlock()
		}
	}()
	return func() []netip.Addr {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(from)
	}
}

// sendUDP sends three datagrams from src in ns to dst.
func sendUDP(t *testing.T, ns *testnet.NS, src netip.Addr, dst netip.AddrPort) {
	t.Helper()
	err := do(ns, func() error {
		c, err := net.DialUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		for range 3 {
			if _, err := c.Write([]byte("who?")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("send from %s to %s: %v", src, dst, err)
	}
}
