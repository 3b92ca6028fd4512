package iked

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/flashgate/flashgate/ipsec/esp"
	"github.com/flashgate/flashgate/ipsec/ike"
	"github.com/flashgate/flashgate/ipsec/xfrm"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// maxIKEDatagram bounds what is read from the IKE sockets; larger datagrams
// are truncated by the kernel and then fail to decode (and are counted).
const maxIKEDatagram = 65535

// transport owns the IKE sockets: UDP 500 always, and UDP 4500 either
// itself (kernel data plane: the socket carries the UDP_ENCAP option so the
// kernel takes ESP from it) or through the userspace ESP device, which owns
// 4500 for ESP and hands IKE up.
type transport struct {
	ikePort, nattPort uint16
	sock500           *ipv4.PacketConn
	udp500            *net.UDPConn
	sock4500          *ipv4.PacketConn // nil when dev owns 4500
	udp4500           *net.UDPConn
	dev               *esp.Device
	closers           []func() error
	wg                sync.WaitGroup
	sendDrops         atomic.Uint64 // datagrams the kernel would not take at once
}

// socketBuffer is the receive buffer of the IKE sockets: a burst of
// IKE_SA_INIT (a flood, or many peers after a restart) waits there for the
// reader instead of being dropped by the kernel.
const socketBuffer = 1 << 20

func listenUDP(addr netip.AddrPort) (*ipv4.PacketConn, *net.UDPConn, error) {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, nil, fmt.Errorf("listen on UDP %v: %w", addr, err)
	}
	// Best effort: the kernel caps it at net.core.rmem_max.
	c.SetReadBuffer(socketBuffer)
	pc := ipv4.NewPacketConn(c)
	// The destination address of each datagram is our local address for the
	// IKE SA: we may have several, and the socket is bound to all.
	if err := pc.SetControlMessage(ipv4.FlagDst, true); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("UDP %v: IP_PKTINFO: %w", addr, err)
	}
	return pc, c, nil
}

func newTransport(ikePort, nattPort uint16, dev *esp.Device, encapSocket bool) (*transport, error) {
	t := &transport{ikePort: ikePort, nattPort: nattPort, dev: dev}
	pc, c, err := listenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), ikePort))
	if err != nil {
		return nil, err
	}
	t.sock500, t.udp500 = pc, c
	t.closers = append(t.closers, c.Close)
	if dev == nil {
		pc, c, err := listenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), nattPort))
		if err != nil {
			t.close()
			return nil, err
		}
		if encapSocket {
			if err := xfrm.SetESPInUDP(c); err != nil {
				c.Close()
				t.close()
				return nil, err
			}
		}
		t.sock4500, t.udp4500 = pc, c
		t.closers = append(t.closers, c.Close)
	}
	return t, nil
}

// run delivers received IKE messages to handle until the sockets close.
func (t *transport) run(handle func(pkt []byte, local, remote netip.AddrPort)) {
	read := func(pc *ipv4.PacketConn, port uint16, natt bool) {
		defer t.wg.Done()
		buf := make([]byte, maxIKEDatagram)
		for {
			n, cm, from, err := pc.ReadFrom(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			ua, ok := from.(*net.UDPAddr)
			if !ok {
				continue
			}
			var local netip.AddrPort
			if cm != nil {
				if a, ok := netip.AddrFromSlice(cm.Dst); ok {
					local = netip.AddrPortFrom(a.Unmap(), port)
				}
			}
			remote := ua.AddrPort()
			remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
			pkt := buf[:n]
			if natt {
				kind, msg := ike.ClassifyNATT(pkt)
				if kind != ike.NATTIKE {
					continue // keepalives; ESP is taken by the kernel before us
				}
				pkt = msg
			}
			handle(append([]byte(nil), pkt...), local, remote)
		}
	}
	// Several readers per socket: handle does the Diffie-Hellman of an
	// IKE_SA_INIT, and with one reader a flood kept one core busy while
	// the kernel dropped the rest, legitimate datagrams with it. The
	// engine is safe for concurrent use; IKE's request/response makes the
	// order between readers harmless (a peer sends an SA's next request
	// only after our answer to the last).
	for range ikeReaders() {
		t.wg.Add(1)
		go read(t.sock500, t.ikePort, false)
		if t.sock4500 != nil {
			t.wg.Add(1)
			go read(t.sock4500, t.nattPort, true)
		}
	}
}

// ikeReaders is how many goroutines read each IKE socket: one per CPU,
// at least two.
func ikeReaders() int { return max(2, runtime.NumCPU()) }

// send is the engine's Send hook. Datagrams from the NAT-T port already
// carry the non-ESP marker (or are a one-byte keepalive).
func (t *transport) send(pkt []byte, local, remote netip.AddrPort) error {
	if local.Port() == t.nattPort {
		if t.udp4500 != nil {
			return t.sendNow(t.udp4500, pkt, local.Addr(), remote)
		}
		// The ESP device owns 4500: hand it the message without the
		// marker (it adds it back).
		if len(pkt) == 1 && pkt[0] == 0xff {
			return t.dev.SendKeepalive(remote)
		}
		if len(pkt) < 4 {
			return fmt.Errorf("send to %v: %d-byte datagram on the NAT-T port is neither IKE nor a keepalive", remote, len(pkt))
		}
		return t.dev.SendIKE(pkt[4:], remote)
	}
	return t.sendNow(t.udp500, pkt, local.Addr(), remote)
}

// sendNow sends one datagram from src (when given) without waiting: if the
// socket's send buffer is full the datagram is dropped and counted, and
// IKE's retransmissions recover it. Waiting would stall the reader that
// called us, and the send buffer does fill when many answers go to
// addresses whose link-layer address never resolves (a flood from spoofed
// on-link sources: each queued answer holds buffer space until the
// neighbour entry fails, seconds later).
func (t *transport) sendNow(c *net.UDPConn, pkt []byte, src netip.Addr, dst netip.AddrPort) error {
	to := dst.Addr().Unmap()
	if !to.Is4() {
		return fmt.Errorf("send to %v: the IKE sockets are IPv4 only", dst)
	}
	var oob []byte
	if src.IsValid() && !src.IsUnspecified() {
		oob = (&ipv4.ControlMessage{Src: src.AsSlice()}).Marshal()
	}
	sa := &unix.SockaddrInet4{Port: int(dst.Port()), Addr: to.As4()}
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("send to %v: %w", dst, err)
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), pkt, oob, sa, unix.MSG_DONTWAIT)
		return true // never wait for the socket to become writable
	}); err != nil {
		return fmt.Errorf("send to %v: %w", dst, err)
	}
	if errors.Is(serr, unix.EAGAIN) || errors.Is(serr, unix.ENOBUFS) {
		t.sendDrops.Add(1)
	}
	if serr != nil {
		return fmt.Errorf("send to %v: %w", dst, serr)
	}
	return nil
}

func (t *transport) close() {
	for _, c := range t.closers {
		c()
	}
	t.wg.Wait()
}
