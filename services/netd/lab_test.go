package netd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
)

// lab is a router namespace between a LAN host, a WAN host (also the IPsec
// peer, with a second address that is not one) and a host on a "remote
// tunnel subnet" (the decrypted side of a tunnel, here a plain link named
// as the userspace data plane's TUN):
//
//	lan 192.168.50.2 -- lan0 192.168.50.1 [rt] wan0 10.99.0.1 -- 10.99.0.2, .3 wan
//	                                    fgesp0 172.16.9.1 -- 172.16.9.2 rem
type lab struct {
	rt, lan, wan, rem *testnet.NS
	nft               *NFTables
	nl                *Netlink
}

var (
	rtWAN   = netip.MustParseAddr("10.99.0.1")
	wanPeer = netip.MustParseAddr("10.99.0.2")
	wanFoe  = netip.MustParseAddr("10.99.0.3")
	rtLAN   = netip.MustParseAddr("192.168.50.1")
	lanHost = netip.MustParseAddr("192.168.50.2")
	rtRem   = netip.MustParseAddr("172.16.9.1")
	remHost = netip.MustParseAddr("172.16.9.2")
)

func newLab(t *testing.T) *lab {
	t.Helper()
	if testing.Short() {
		t.Skip("namespace test: not in -short mode")
	}
	testnet.RequireRoot(t)
	testnet.RequireTool(t, "ip", "iproute2")
	testnet.RequireTool(t, "ping", "iputils-ping")
	testnet.RequireTool(t, "sysctl", "procps")
	p := testnet.Prefix()
	l := &lab{
		rt: testnet.NewNS(t, p+"-rt"), lan: testnet.NewNS(t, p+"-lan"),
		wan: testnet.NewNS(t, p+"-wan"), rem: testnet.NewNS(t, p+"-rem"),
	}
	testnet.Link(t, l.lan, "eth0", "192.168.50.2/24", l.rt, "lan0", "192.168.50.1/24")
	testnet.Link(t, l.wan, "eth0", "10.99.0.2/24", l.rt, "wan0", "10.99.0.1/24")
	testnet.Link(t, l.rem, "eth0", "172.16.9.2/24", l.rt, ipsec.UserspaceInterface, "172.16.9.1/24")
	for _, c := range [][]string{
		{"lan", "ip", "route", "add", "default", "via", "192.168.50.1"},
		{"rem", "ip", "route", "add", "default", "via", "172.16.9.1"},
		{"wan", "ip", "addr", "add", "10.99.0.3/24", "dev", "eth0"},
		// The WAN side knows a way to the LAN, so that only the firewall
		// (not the lack of a route) keeps it out.
		{"wan", "ip", "route", "add", "192.168.50.0/24", "via", "10.99.0.1"},
		{"wan", "ip", "route", "add", "172.16.9.0/24", "via", "10.99.0.1"},
		{"rt", "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	} {
		ns := map[string]*testnet.NS{"lan": l.lan, "rem": l.rem, "wan": l.wan, "rt": l.rt}[c[0]]
		if err := ns.Run(c[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open("/run/netns/"+l.rt.Name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	l.nft = NewNFTables(nftables.WithNetNSFd(fd))
	nsh, err := netns.GetFromName(l.rt.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nsh.Close() })
	if l.nl, err = NewNetlinkAt(nsh); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.nl.Close)
	return l
}

// addIPv6 gives the lab IPv6 addresses (without duplicate address
// detection, so they are usable at once) and routes:
//
//	lan fd50::2 -- lan0 fd50::1 [rt] wan0 fd99::1 -- fd99::2 wan
func (l *lab) addIPv6(t *testing.T) {
	t.Helper()
	testnet.RunAll(t, []testnet.Cmd{
		testnet.In(l.lan, "ip", "-6", "addr", "add", "fd50::2/64", "dev", "eth0", "nodad"),
		testnet.In(l.rt, "ip", "-6", "addr", "add", "fd50::1/64", "dev", "lan0", "nodad"),
		testnet.In(l.rt, "ip", "-6", "addr", "add", "fd99::1/64", "dev", "wan0", "nodad"),
		testnet.In(l.wan, "ip", "-6", "addr", "add", "fd99::2/64", "dev", "eth0", "nodad"),
		testnet.In(l.lan, "ip", "-6", "route", "add", "default", "via", "fd50::1"),
		testnet.In(l.wan, "ip", "-6", "route", "add", "fd50::/64", "via", "fd99::1"),
		testnet.In(l.rt, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"),
	})
	// The first neighbour discovery on fresh links takes a second or two;
	// get it done before the probes, whose timeouts are short.
	for _, dst := range []string{"fd99::2", "fd50::2"} {
		if err := l.rt.Run("ping", "-6", "-q", "-c", "1", "-W", "5", dst); err != nil {
			t.Fatalf("IPv6 neighbour %s: %v", dst, err)
		}
	}
}

// labFirewall is the policy the lab's router runs: the defaults for one
// WAN, one LAN and a tunnel to 172.16.9.0/24 whose peer is 10.99.0.2, a
// port forward, and user rules of each action.
func labFirewall() Firewall {
	return Firewall{
		Interfaces: []Interface{{"wan0", RoleWAN}, {"lan0", RoleLAN}, {ipsec.UserspaceInterface, RoleOpt}},
		Tunnels: []Tunnel{{Name: "branch", Peer: wanPeer, Path: "tunnels[branch]",
			LocalSubnets:  []netip.Prefix{netip.MustParsePrefix("192.168.50.0/24")},
			RemoteSubnets: []netip.Prefix{netip.MustParsePrefix("172.16.9.0/24")}}},
		Masquerade: []Masquerade{{Name: "lan-out", Interface: "wan0", Path: "firewall.nat.masquerade[lan-out]"}},
		PortForwards: []PortForward{{Name: "web", In: RoleWAN, Protocol: "tcp", External: PortRange{8080, 8080},
			Destination: lanHost, DestinationPort: 80, Path: "firewall.port_forwards[web]"},
			{Name: "stream", In: "wan0", Protocol: "tcp", External: PortRange{8081, 8081},
				Destination: lanHost, DestinationPort: 81, Path: "firewall.port_forwards[stream]"}},
		Rules: []Rule{
			{Name: "no-9000", Chain: ChainForward, In: RoleLAN, Out: RoleWAN, Protocol: "tcp",
				DestinationPorts: []PortRange{{9000, 9000}}, Action: ActionDrop, Log: true, Path: "firewall.rules[no-9000]"},
			{Name: "refuse-9001", Chain: ChainForward, In: RoleLAN, Protocol: "tcp",
				DestinationPorts: []PortRange{{9001, 9001}}, Action: ActionReject, Path: "firewall.rules[refuse-9001]"},
			{Name: "admin-ssh", Chain: ChainInput, In: RoleWAN, Protocol: "tcp",
				Sources:          []netip.Prefix{netip.MustParsePrefix("10.99.0.3/32")},
				DestinationPorts: []PortRange{{2222, 2222}}, Action: ActionAccept, Path: "firewall.rules[admin-ssh]"},
		},
	}
}

// whoami servers answer every TCP connection and UDP datagram with the
// source address they saw, so that one exchange proves both that the packet
// passed and how it was (or was not) NATed.

func tcpWhoami(t *testing.T, ns *testnet.NS, addr string) {
	t.Helper()
	var ln net.Listener
	if err := do(ns, func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "%s\n", c.RemoteAddr().(*net.TCPAddr).IP)
			c.Close()
		}
	}()
}

func udpWhoami(t *testing.T, ns *testnet.NS, addr string) {
	t.Helper()
	var pc net.PacketConn
	if err := do(ns, func() (err error) { pc, err = net.ListenPacket("udp4", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo([]byte(from.(*net.UDPAddr).IP.String()+"\n"), from)
		}
	}()
}

// errBlocked is what a probe returns when nothing answered in time: the
// packets were dropped.
var errBlocked = errors.New("no answer (dropped)")

// probe connects (TCP) or sends a datagram (UDP) from ns, optionally from
// the source address src, and returns the address the server saw.
func probe(ns *testnet.NS, network string, src netip.Addr, dst netip.AddrPort) (string, error) {
	var seen string
	err := do(ns, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		d := net.Dialer{}
		if src.IsValid() {
			if strings.HasPrefix(network, "tcp") {
				d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
			} else {
				d.LocalAddr = &net.UDPAddr{IP: src.AsSlice()}
			}
		}
		c, err := d.DialContext(ctx, network, dst.String())
		if err != nil {
			var ne net.Error
			if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
				return errBlocked
			}
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		if strings.HasPrefix(network, "udp") {
			if _, err := c.Write([]byte("hello")); err != nil {
				return err
			}
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return errBlocked
			}
			return err
		}
		seen = strings.TrimSpace(line)
		return nil
	})
	return seen, err
}

// stream is a TCP connection that sends data continuously until stopped;
// the receiver counts what arrives.
type stream struct {
	sent     int64
	retrans  uint32 // TCP retransmissions of the sender, from TCP_INFO
	received chan int64
	sendErr  error
	stop     chan struct{}
	done     sync.WaitGroup
}

// startStream listens on server (in ns srv) and connects from ns cli to
// dst (which may be a forwarded address that ends at server).
func startStream(t *testing.T, srv *testnet.NS, server string, cli *testnet.NS, dst string) *stream {
	t.Helper()
	s := &stream{received: make(chan int64, 1), stop: make(chan struct{})}
	var ln net.Listener
	if err := do(srv, func() (err error) { ln, err = net.Listen("tcp4", server); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			s.received <- -1
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(60 * time.Second))
		n, _ := io.Copy(io.Discard, c)
		s.received <- n
	}()
	var c net.Conn
	if err := do(cli, func() (err error) { c, err = net.DialTimeout("tcp4", dst, 2*time.Second); return err }); err != nil {
		t.Fatalf("stream to %s: %v", dst, err)
	}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		defer c.Close()
		defer func() {
			if rc, err := c.(*net.TCPConn).SyscallConn(); err == nil {
				rc.Control(func(fd uintptr) {
					if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
						s.retrans = info.Total_retrans
					}
				})
			}
		}()
		buf := make([]byte, 16<<10)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			n, err := c.Write(buf)
			s.sent += int64(n)
			if err != nil {
				s.sendErr = err
				return
			}
			time.Sleep(time.Millisecond) // a steady stream, not a saturated link
		}
	}()
	return s
}

// finish stops the sender and returns what was sent and received.
func (s *stream) finish() (sent, received int64, err error) {
	close(s.stop)
	s.done.Wait()
	select {
	case received = <-s.received:
	case <-time.After(10 * time.Second):
		return s.sent, -1, errors.New("receiver did not see the end of the stream in 10 s")
	}
	return s.sent, received, s.sendErr
}

// do runs f inside ns. It is testnet.NS.Do except that the thread returns
// to the test's namespace afterwards (see inNetNS): a thread left in ns
// could be the main thread, and testnet's clean-up kills every process
// `ip netns pids` lists for the namespace, which would then be the test.
func do(ns *testnet.NS, f func() error) error {
	h, err := netns.GetFromName(ns.Name)
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", ns.Name, err)
	}
	defer h.Close()
	return inNetNS(h, f)
}

// udpCounter counts the datagrams that reach addr in ns.
func udpCounter(t *testing.T, ns *testnet.NS, addr string) *atomic.Int64 {
	t.Helper()
	var pc net.PacketConn
	if err := do(ns, func() (err error) { pc, err = net.ListenPacket("udp4", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var n atomic.Int64
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			n.Add(1)
		}
	}()
	return &n
}

// spray sends a datagram to dst from ns every 200 µs (at most 50000, at
// most 30 s) until the returned function is called; that returns how many
// were sent.
func spray(t *testing.T, ns *testnet.NS, dst string) func() int {
	t.Helper()
	var c net.Conn
	if err := do(ns, func() (err error) { c, err = net.Dial("udp4", dst); return err }); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		defer c.Close()
		sent := 0
		deadline := time.Now().Add(30 * time.Second)
		for sent < 50000 && time.Now().Before(deadline) {
			select {
			case <-stop:
				done <- sent
				return
			default:
			}
			if _, err := c.Write([]byte("leak?")); err == nil {
				sent++
			}
			time.Sleep(200 * time.Microsecond)
		}
		<-stop
		done <- sent
	}()
	return func() int { close(stop); return <-done }
}

// daemon is a netd Daemon for the lab's router, boards.Board "lab", with
// its netlink and nftables handles and its DHCP sockets in rt's namespace,
// alive until ctx ends.
func (l *lab) daemon(t *testing.T, ctx context.Context) *Daemon {
	t.Helper()
	rtNS, err := netns.GetFromName(l.rt.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rtNS.Close() })
	d := NewDaemon(ctx, boards.Board{Name: "lab"}, &Reconciler{NFT: l.nft, Netlink: l.nl})
	d.InNS = func(f func() error) error { return inNetNS(rtNS, f) }
	return d
}
