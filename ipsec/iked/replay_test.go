package iked

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/ike"
	"golang.org/x/sys/unix"
)

// ikeCapture records the IKE messages (UDP 4500 with the non-ESP marker)
// one address sends to another, as seen on an interface of ns.
type ikeCapture struct {
	fd   int
	mu   sync.Mutex
	msgs [][]byte // with the marker
	done chan struct{}
}

func captureIKE(t *testing.T, ns *testnet.NS, ifname string, from netip.Addr) *ikeCapture {
	t.Helper()
	c := &ikeCapture{done: make(chan struct{})}
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		proto := int(htons(unix.ETH_P_IP))
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return err
		}
		tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		c.fd = fd
		return nil
	})
	if err != nil {
		t.Fatalf("capture on %s/%s: %v", ns.Name, ifname, err)
	}
	go func() {
		defer close(c.done)
		buf := make([]byte, 65536)
		for {
			n, _, err := unix.Recvfrom(c.fd, buf, 0)
			if errors.Is(err, unix.EBADF) || errors.Is(err, unix.ENOTSOCK) {
				return
			}
			if err != nil {
				select {
				case <-c.stopped():
					return
				default:
				}
				continue
			}
			if p := ikeInUDP(buf[:n], from); p != nil {
				c.mu.Lock()
				c.msgs = append(c.msgs, append([]byte(nil), p...))
				c.mu.Unlock()
			}
		}
	}()
	t.Cleanup(c.stop)
	return c
}

var captureStop = make(map[*ikeCapture]chan struct{})
var captureMu sync.Mutex

func (c *ikeCapture) stopped() chan struct{} {
	captureMu.Lock()
	defer captureMu.Unlock()
	ch, ok := captureStop[c]
	if !ok {
		ch = make(chan struct{})
		captureStop[c] = ch
	}
	return ch
}

func (c *ikeCapture) stop() {
	ch := c.stopped()
	select {
	case <-ch:
		return
	default:
		close(ch)
	}
	<-c.done
	unix.Close(c.fd)
}

func (c *ikeCapture) messages() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.msgs...)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// ikeInUDP returns the UDP payload of an IPv4 packet from src:4500 to port
// 4500 that starts with the non-ESP marker, or nil.
func ikeInUDP(b []byte, src netip.Addr) []byte {
	if len(b) < 20 || b[0]>>4 != 4 || b[9] != unix.IPPROTO_UDP {
		return nil
	}
	ihl := int(b[0]&0xf) * 4
	if len(b) < ihl+8+4+ike.HeaderLen || netip.AddrFrom4([4]byte(b[12:16])) != src {
		return nil
	}
	udp := b[ihl:]
	if binary.BigEndian.Uint16(udp) != 4500 || binary.BigEndian.Uint16(udp[2:]) != 4500 {
		return nil
	}
	p := udp[8:]
	if binary.BigEndian.Uint32(p) != 0 {
		return nil // ESP
	}
	return p
}

// TestReplayedIKE: strongSwan's IKE messages, captured on the wire, are
// sent to us again — from the peer's own address and from another one.
// Replayed requests are answered from the cache or dropped, replayed
// responses dropped, all counted; no CHILD_SA is created or rekeyed by a
// replay, and none moves the IKE SA to the replayer's address.
func TestReplayedIKE(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	s := testnet.NewSiteToSite(t)
	charon := testnet.StartCharon(t, s.GwB, charonConn(s, lifecycleIKE, lifecycleESP, "none"))
	d := startIked(t, s.GwA, tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, lifecycleIKE, lifecycleESP, config.StartInitiate))
	waitState(t, d, "s2s", ipsec.StateUp, 10*time.Second)

	// Record a CHILD_SA rekey by strongSwan (its requests: CREATE_CHILD_SA,
	// then the DELETE of the old pair) and one by us (its responses).
	capture := captureIKE(t, s.GwA, s.WANIfA, s.GwBWAN)
	if out, err := charon.Swanctl("--rekey", "--child", "s2s-net"); err != nil {
		t.Fatalf("swanctl --rekey: %v: %s", err, out)
	}
	waitEvents(t, d, "s2s", "CHILD_SA rekeyed", 1, 5*time.Second)
	time.Sleep(300 * time.Millisecond)
	if err := d.Rekey("s2s", false); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, d, "s2s", "CHILD_SA rekeyed", 2, 5*time.Second)
	time.Sleep(500 * time.Millisecond)
	capture.stop()
	msgs := capture.messages()
	var lastRequest []byte
	for _, m := range msgs {
		if h, err := ike.DecodeHeader(m[4:]); err == nil && !h.IsResponse() {
			lastRequest = m
		}
	}
	if len(msgs) < 4 || lastRequest == nil {
		t.Fatalf("captured %d IKE messages from strongSwan, want its requests and responses of two rekeys", len(msgs))
	}
	before := waitState(t, d, "s2s", ipsec.StateUp, time.Second)
	stats0 := d.Stats().IKE
	rekeys := countEvents(d, "s2s", "CHILD_SA rekeyed")

	// A namespace on its own link to gwA sends from the peer's address
	// and from 10.10.0.66 (IP_TRANSPARENT: neither is its own).
	rp := testnet.NewNS(t, testnet.Prefix()+"-rp")
	testnet.Link(t, s.GwA, "rp0", "10.98.0.1/24", rp, "rp0", "10.98.0.2/24")
	for _, c := range [][]string{{"sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0"}, {"sysctl", "-qw", "net.ipv4.conf.rp0.rp_filter=0"}} {
		if err := s.GwA.Run(c...); err != nil {
			t.Fatal(err)
		}
	}
	if err := rp.Run("ip", "route", "add", "10.10.0.0/24", "via", "10.98.0.1"); err != nil {
		t.Fatal(err)
	}
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1) })
		return errors.Join(err, serr)
	}}
	var fromPeer, fromElsewhere net.PacketConn
	if err := rp.Do(func() error {
		var err error
		if fromPeer, err = lc.ListenPacket(context.Background(), "udp4", "10.10.0.2:4500"); err != nil {
			return err
		}
		fromElsewhere, err = lc.ListenPacket(context.Background(), "udp4", "10.10.0.66:4500")
		return err
	}); err != nil {
		t.Fatalf("replay sockets: %v", err)
	}
	defer fromPeer.Close()
	defer fromElsewhere.Close()
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(s.GwAWAN, 4500))
	replays := 0
	for range 10 {
		for _, m := range msgs {
			if _, err := fromPeer.WriteTo(m, to); err != nil {
				t.Fatal(err)
			}
			replays++
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Last, so that nothing from the peer's address could move the SA
	// back: strongSwan's last request, authentic, from elsewhere. (The SA
	// followed it until retransmitted requests stopped moving it.)
	for range 10 {
		if _, err := fromElsewhere.WriteTo(lastRequest, to); err != nil {
			t.Fatal(err)
		}
		replays++
	}
	time.Sleep(500 * time.Millisecond)

	stats := d.Stats().IKE
	dropped := (stats.OutOfWindow - stats0.OutOfWindow) + (stats.RetransmitsAnswered - stats0.RetransmitsAnswered) + (stats.UnknownSPI - stats0.UnknownSPI)
	t.Logf("%d replays of %d captured messages: out of window +%d, answered from cache +%d, unknown SPI +%d",
		replays, len(msgs), stats.OutOfWindow-stats0.OutOfWindow, stats.RetransmitsAnswered-stats0.RetransmitsAnswered, stats.UnknownSPI-stats0.UnknownSPI)
	if dropped < uint64(replays)*9/10 {
		t.Errorf("%d of %d replays counted", dropped, replays)
	}
	after := waitState(t, d, "s2s", ipsec.StateUp, time.Second)
	if after.RemoteAddr != before.RemoteAddr {
		t.Errorf("a replayed message moved the IKE SA from %s to %s", before.RemoteAddr, after.RemoteAddr)
	}
	if after.IKE == nil || after.IKE.InitiatorSPI != before.IKE.InitiatorSPI || len(after.Children) != 1 || after.Children[0].InboundSPI != before.Children[0].InboundSPI {
		t.Errorf("the SAs changed under the replays: before %+v %+v, after %+v %+v", before.IKE, before.Children, after.IKE, after.Children)
	}
	if n := countEvents(d, "s2s", "CHILD_SA rekeyed"); n != rekeys {
		t.Errorf("%d CHILD_SA rekeys after the replays, %d before", n, rekeys)
	}
	// IKE still reaches strongSwan: a rekey completes.
	if err := d.Rekey("s2s", false); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, d, "s2s", "CHILD_SA rekeyed", rekeys+1, 5*time.Second)
	if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
		t.Fatalf("after the replays: %v", err)
	}
}

func countEvents(d *Daemon, name, text string) int {
	n := 0
	for _, e := range tunnelStatus(d, name).Events {
		if strings.Contains(e.Message, text) {
			n++
		}
	}
	return n
}
