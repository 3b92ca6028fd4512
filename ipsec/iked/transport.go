package iked

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/flashgate/flashgate/ipsec/esp"
	"github.com/flashgate/flashgate/ipsec/ike"
	"github.com/flashgate/flashgate/ipsec/xfrm"
	"golang.org/x/net/ipv4"
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
	sock4500          *ipv4.PacketConn // nil when dev owns 4500
	dev               *esp.Device
	closers           []func() error
	wg                sync.WaitGroup
}

func listenUDP(addr netip.AddrPort) (*ipv4.PacketConn, net.PacketConn, error) {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, nil, fmt.Errorf("listen on UDP %v: %w", addr, err)
	}
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
	t.sock500 = pc
	t.closers = append(t.closers, c.Close)
	if dev == nil {
		pc, c, err := listenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), nattPort))
		if err != nil {
			t.close()
			return nil, err
		}
		if encapSocket {
			if err := xfrm.SetESPInUDP(c.(*net.UDPConn)); err != nil {
				c.Close()
				t.close()
				return nil, err
			}
		}
		t.sock4500 = pc
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
	t.wg.Add(1)
	go read(t.sock500, t.ikePort, false)
	if t.sock4500 != nil {
		t.wg.Add(1)
		go read(t.sock4500, t.nattPort, true)
	}
}

// send is the engine's Send hook. Datagrams from the NAT-T port already
// carry the non-ESP marker (or are a one-byte keepalive).
func (t *transport) send(pkt []byte, local, remote netip.AddrPort) error {
	dst := net.UDPAddrFromAddrPort(remote)
	var cm *ipv4.ControlMessage
	if local.Addr().IsValid() && !local.Addr().IsUnspecified() {
		cm = &ipv4.ControlMessage{Src: local.Addr().AsSlice()}
	}
	if local.Port() == t.nattPort {
		if t.sock4500 != nil {
			_, err := t.sock4500.WriteTo(pkt, cm, dst)
			return err
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
	_, err := t.sock500.WriteTo(pkt, cm, dst)
	return err
}

func (t *transport) close() {
	for _, c := range t.closers {
		c()
	}
	t.wg.Wait()
}
