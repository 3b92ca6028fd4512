package ikedtest

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/flashgate/flashgate/ipsec/ike"
	"github.com/flashgate/flashgate/ipsec/ike/iketest"
)

// Transport is one host's IKE sockets on an iketest.Network: what arrives
// at its address is handed to the daemon, datagrams to the NAT-T port
// after the non-ESP marker is taken off (ESP and keepalives are counted
// and go no further), as iked's UDP transport does.
type Transport struct {
	net      *iketest.Network
	addr     netip.Addr
	nattPort uint16

	mu         sync.Mutex
	handle     func(pkt []byte, local, remote netip.AddrPort)
	peers      []netip.AddrPort
	noRoute    bool
	esp, alive int
	closed     bool
}

// NewTransport is the sockets of the host at addr, with the NAT-T port
// nattPort (0: 4500).
func NewTransport(n *iketest.Network, addr netip.Addr, nattPort uint16) *Transport {
	if nattPort == 0 {
		nattPort = 4500
	}
	return &Transport{net: n, addr: addr, nattPort: nattPort}
}

// Run attaches the host to the network.
func (t *Transport) Run(handle func(pkt []byte, local, remote netip.AddrPort)) {
	t.mu.Lock()
	t.handle = handle
	addr := t.addr
	t.mu.Unlock()
	t.net.Attach(addr, func(pkt []byte, local, remote netip.AddrPort) {
		if local.Port() == t.nattPort {
			kind, msg := ike.ClassifyNATT(pkt)
			if kind != ike.NATTIKE {
				t.mu.Lock()
				if kind == ike.NATTKeepalive {
					t.alive++
				} else {
					t.esp++
				}
				t.mu.Unlock()
				return
			}
			pkt = msg
		}
		handle(pkt, local, remote)
	})
}

// Send puts the datagram on the network.
func (t *Transport) Send(pkt []byte, local, remote netip.AddrPort) error {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return fmt.Errorf("send to %v: transport closed", remote)
	}
	return t.net.Send(pkt, local, remote)
}

// SetPeers records the configured peers (Peers).
func (t *Transport) SetPeers(peers []netip.AddrPort) error {
	t.mu.Lock()
	t.peers = append([]netip.AddrPort(nil), peers...)
	t.mu.Unlock()
	return nil
}

// Peers are the configured peers the daemon named last.
func (t *Transport) Peers() []netip.AddrPort {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]netip.AddrPort(nil), t.peers...)
}

// SourceFor is the host's address: it has one, and a route to everyone,
// unless SetAddr took the route away.
func (t *Transport) SourceFor(dst netip.Addr) (netip.Addr, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.noRoute {
		return netip.Addr{}, fmt.Errorf("no route to the peer %s: network is unreachable", dst)
	}
	return t.addr, nil
}

// SetAddr moves the host to addr (a new lease on its WAN), or takes it
// off the network with an invalid addr (the WAN is down: no route).
func (t *Transport) SetAddr(addr netip.Addr) {
	t.mu.Lock()
	old, handle := t.addr, t.handle
	t.noRoute = !addr.IsValid()
	if addr.IsValid() {
		t.addr = addr
	}
	t.mu.Unlock()
	t.net.Detach(old)
	if addr.IsValid() && handle != nil {
		t.Run(handle)
	}
}

// Drops is always zero: the in-memory wire drops nothing by itself.
func (t *Transport) Drops() (send, queue, natIKE uint64) { return 0, 0, 0 }

// Counted returns the ESP datagrams and NAT keepalives that reached the
// NAT-T port.
func (t *Transport) Counted() (esp, keepalives int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.esp, t.alive
}

// Close takes the host off the network.
func (t *Transport) Close() error {
	t.mu.Lock()
	t.closed = true
	addr := t.addr
	t.mu.Unlock()
	t.net.Detach(addr)
	return nil
}
