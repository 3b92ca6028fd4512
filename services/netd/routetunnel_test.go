package netd

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
)

// routeTunnelFirewall is labFirewall with a route tunnel whose interface
// is ipsec0 and whose route leads to 172.20.0.0/16.
func routeTunnelFirewall() Firewall {
	fw := labFirewall()
	fw.Tunnels = append(fw.Tunnels, Tunnel{Name: "aws1", Peer: wanFoe, Path: "tunnels[aws1]", Interface: "ipsec0",
		Routes: []netip.Prefix{netip.MustParsePrefix("172.20.0.0/16")}})
	return fw
}

func TestRouteTunnelRuleset(t *testing.T) {
	fw := routeTunnelFirewall()
	fw.Rules = append(fw.Rules, Rule{Name: "no-rdp-from-tunnels", Chain: ChainForward, In: ZoneTunnel, Protocol: "tcp",
		DestinationPorts: []PortRange{{3389, 3389}}, Action: ActionDrop, Path: "firewall.rules[no-rdp-from-tunnels]"})
	if err := fw.Validate(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range Build(&fw) {
		got = append(got, s.String())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		`forward oifname "wan0" rt ipsec missing meta nfproto ipv4 ip daddr 172.20.0.0/16 counter drop comment "builtin:tunnel-no-leak"`,
		`forward oifname "ipsec0" meta l4proto tcp tcp flags syn / syn counter tcp option maxseg size set rt mtu comment "builtin:tunnel-mss"`,
		`forward iifname "lan0" oifname "ipsec0" counter accept comment "builtin:lan-to-tunnel"`,
		`forward iifname "ipsec0" oifname "lan0" counter accept comment "builtin:tunnel-to-lan"`,
		// The tunnel zone: the policy tunnel's ways, narrowed to its
		// subnet, and the route tunnel's interface, whatever the source.
		`forward iifname "fgesp0" meta nfproto ipv4 ip saddr 172.16.9.0/24 meta l4proto tcp th dport 3389 counter drop comment "rule:no-rdp-from-tunnels"`,
		`forward iifname "ipsec0" meta l4proto tcp th dport 3389 counter drop comment "rule:no-rdp-from-tunnels"`,
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %s\nin:\n%s", want, all)
		}
	}
	// The MSS clamp comes before the established shortcut, which the
	// SYN-ACK would take.
	if strings.Index(all, "builtin:tunnel-mss") > strings.Index(all, `forward ct state established,related`) {
		t.Errorf("the MSS clamp comes after the established shortcut:\n%s", all)
	}
	// A route tunnel's selectors are no remote subnets: nothing is
	// exempted from NAT or kept from the WAN for them.
	fw.Tunnels[1].RemoteSubnets = nil
	c := config.Default()
	tn := config.NewTunnel("aws1")
	tn.Mode, tn.Interface = config.ModeRoute, "ipsec0"
	tn.RemoteSubnets = []config.Prefix{config.MustPrefix("0.0.0.0/0")}
	tn.LocalSubnets = []config.Prefix{config.MustPrefix("0.0.0.0/0")}
	c.Tunnels = append(c.Tunnels, tn)
	c.Routes = append(c.Routes, config.Route{Name: "vpc", Enabled: true, Destination: config.MustPrefix("172.31.0.0/16"), Interface: "ipsec0", Metric: 100})
	d := FromConfig(c)
	if len(d.Routes) != 0 {
		t.Errorf("netd would install the route through ipsec0 itself: %+v", d.Routes)
	}
	for _, s := range Build(&d.Firewall) {
		if s.Dst.Bits() == 0 && s.Dst.IsValid() {
			t.Errorf("a route tunnel's 0.0.0.0/0 selector became a rule: %s", s)
		}
	}
}

// synMSS captures, in ns, the MSS option of the first TCP SYN to port that
// arrives (0 while none has).
func synMSS(t *testing.T, ns *testnet.NS, port uint16) func() int {
	t.Helper()
	var fd int
	err := do(ns, func() (err error) {
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	var mss atomic.Int32
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped; unix.Close(fd) })
	go func() {
		defer close(stopped)
		buf := make([]byte, 2048)
		for {
			select {
			case <-done:
				return
			default:
			}
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil || n < 40 || buf[0]>>4 != 4 || buf[9] != protoTCP {
				continue
			}
			ihl := int(buf[0]&0xf) * 4
			tcp := buf[ihl:n]
			if len(tcp) < 20 || binary.BigEndian.Uint16(tcp[2:]) != port || tcp[13]&tcpFlagSYN == 0 {
				continue
			}
			opts := tcp[20:min(len(tcp), int(tcp[12]>>4)*4)]
			for i := 0; i+1 < len(opts); {
				switch opts[i] {
				case 0:
					i = len(opts)
				case 1:
					i++
				default:
					if opts[i] == tcpOptMaxSeg && i+4 <= len(opts) {
						mss.CompareAndSwap(0, int32(binary.BigEndian.Uint16(opts[i+2:])))
					}
					if opts[i+1] < 2 {
						i = len(opts)
					} else {
						i += int(opts[i+1])
					}
				}
			}
		}
	}()
	return func() int { return int(mss.Load()) }
}

// TestRouteTunnelFirewall: the lab with a route tunnel's interface, ipsec0
// (a plain link here, standing for the decrypted side of the tunnel) with
// the cloud's MTU of 1399. The LAN reaches what is routed through it and
// back; a TCP SYN through it arrives with its MSS clamped to 1359 (1399
// less 40 bytes of headers) although the LAN host offered 1460; and when
// the tunnel's route is gone, its destinations do not leak out of the WAN.
func TestRouteTunnelFirewall(t *testing.T) {
	l := newLab(t)
	sink := testnet.NewNS(t, testnet.Prefix()+"-vpc")
	testnet.Link(t, sink, "eth0", "172.20.0.2/16", l.rt, "ipsec0", "169.254.10.2/30")
	testnet.RunAll(t, []testnet.Cmd{
		testnet.In(l.rt, "ip", "link", "set", "ipsec0", "mtu", "1399"),
		testnet.In(l.rt, "ip", "route", "add", "172.20.0.0/16", "dev", "ipsec0", "metric", "100"),
		testnet.In(sink, "ip", "addr", "add", "169.254.10.1/30", "dev", "eth0"),
		testnet.In(sink, "ip", "route", "add", "default", "via", "169.254.10.2"),
		testnet.In(l.rt, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"),
	})
	fw := routeTunnelFirewall()
	if err := fw.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := l.nft.Apply(Build(&fw)); err != nil {
		t.Fatal(err)
	}
	mss := synMSS(t, sink, 7400)
	tcpWhoami(t, sink, "172.20.0.2:7400")
	if seen, err := probe(l.lan, "tcp4", netip.Addr{}, netip.MustParseAddrPort("172.20.0.2:7400")); err != nil || seen != lanHost.String() {
		t.Fatalf("LAN -> through ipsec0: seen %q, %v; want %s (no NAT into a tunnel)", seen, err, lanHost)
	}
	if !waitMSS(mss) || mss() != 1359 {
		t.Errorf("the SYN through ipsec0 arrived with MSS %d, want 1359 (MTU 1399)", mss())
	}
	tcpWhoami(t, l.lan, "192.168.50.2:7401")
	if seen, err := probe(sink, "tcp4", netip.MustParseAddr("172.20.0.2"), netip.MustParseAddrPort("192.168.50.2:7401")); err != nil || seen != "172.20.0.2" {
		t.Errorf("ipsec0 -> LAN: seen %q, %v", seen, err)
	}
	// The tunnel goes down: iked withdraws its route, and a route out of
	// the WAN (a default route, here a specific one) would take over.
	for _, c := range [][]string{
		{"ip", "route", "del", "172.20.0.0/16", "dev", "ipsec0"},
		{"ip", "route", "add", "172.20.0.0/16", "via", wanPeer.String()},
	} {
		if err := l.rt.Run(c...); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.wan.Run("ip", "addr", "add", "172.20.0.2/32", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	atWAN := udpSources(t, l.wan, "172.20.0.2:7402")
	sendUDP(t, l.lan, lanHost, netip.MustParseAddrPort("172.20.0.2:7402"))
	time.Sleep(time.Second)
	if got := atWAN(); len(got) > 0 {
		t.Errorf("traffic for the route tunnel's destination left by the WAN in clear while it was down (from %v)", got)
	}
}

func waitMSS(mss func() int) bool {
	deadline := time.Now().Add(3 * time.Second)
	for mss() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	return mss() != 0
}
