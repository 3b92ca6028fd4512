// Package iketest is an in-memory network for IKE endpoints: a settable
// clock and a wire that queues datagrams in order and hands them, when the
// test says so, to whoever is attached at the destination address. It is
// an honest twin of UDP between hosts (loss, reordering by a test's drop
// rule, a NAT box in front of one host), not a mock: nothing is scripted,
// the endpoints' own datagrams are what travels.
//
// It knows nothing of IKE itself, so both ipsec/ike's own tests and the
// daemon's (ipsec/iked/ikedtest) use it: a receiver of datagrams on the
// NAT-T port separates IKE from ESP and keepalives itself, as the real
// sockets' readers do.
package iketest

import (
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// Clock is a clock that moves only when told: the engine's and the
// daemon's Now.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts at a fixed date, so that runs are reproducible.
func NewClock() *Clock { return &Clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Datagram is one UDP datagram on the wire.
type Datagram struct {
	Pkt      []byte
	From, To netip.AddrPort
}

// Receiver takes the datagrams for one host: pkt arrived at local (the
// host's address and port) from remote. pkt is the receiver's to keep.
type Receiver func(pkt []byte, local, remote netip.AddrPort)

// NAT translates the private address Private to Public for datagrams that
// leave, one public port per private port (the private port + 40000), and
// back for the answers: a NAT box in front of one host.
type NAT struct {
	Private, Public netip.Addr
}

func (n *NAT) out(ap netip.AddrPort) netip.AddrPort {
	if ap.Addr() == n.Private {
		return netip.AddrPortFrom(n.Public, ap.Port()+40000)
	}
	return ap
}

func (n *NAT) in(ap netip.AddrPort) netip.AddrPort {
	if ap.Addr() == n.Public {
		return netip.AddrPortFrom(n.Private, ap.Port()-40000)
	}
	return ap
}

// MaxDeliveries bounds one Run: endpoints that keep answering each other
// past it have a loop, and Run says so instead of spinning.
const MaxDeliveries = 10000

// Network is the wire between the attached hosts. Set Drop and NAT before
// traffic flows (or between Runs); they are read under the network's lock.
type Network struct {
	Clock *Clock

	mu    sync.Mutex
	hosts map[netip.Addr]Receiver
	queue []Datagram
	wire  []Datagram
	drop  func(Datagram) bool
	nat   *NAT
}

// NewNetwork is an empty network with its own clock.
func NewNetwork() *Network {
	return &Network{Clock: NewClock(), hosts: map[netip.Addr]Receiver{}}
}

// Attach makes r the receiver of every datagram to addr (any port).
func (n *Network) Attach(addr netip.Addr, r Receiver) {
	n.mu.Lock()
	n.hosts[addr] = r
	n.mu.Unlock()
}

// Detach takes addr off the network: its datagrams are lost, as a host
// that went away.
func (n *Network) Detach(addr netip.Addr) {
	n.mu.Lock()
	delete(n.hosts, addr)
	n.mu.Unlock()
}

// SetDrop decides which datagrams are lost (nil: none). A dropped datagram
// is still on the wire (Wire).
func (n *Network) SetDrop(drop func(Datagram) bool) {
	n.mu.Lock()
	n.drop = drop
	n.mu.Unlock()
}

// SetNAT puts a NAT box in front of one host (nil: none).
func (n *Network) SetNAT(nat *NAT) {
	n.mu.Lock()
	n.nat = nat
	n.mu.Unlock()
}

// Send puts a copy of one datagram on the wire: the shape of the engine's
// Send hook (ike.EndpointConfig.Send). It never blocks.
func (n *Network) Send(pkt []byte, local, remote netip.AddrPort) error {
	d := Datagram{append([]byte(nil), pkt...), local, remote}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.nat != nil {
		d.From = n.nat.out(d.From)
	}
	n.wire = append(n.wire, d)
	if n.drop != nil && n.drop(d) {
		return nil
	}
	n.queue = append(n.queue, d)
	return nil
}

// Run delivers queued datagrams, in the order they were sent, until the
// network is quiet; what the receivers send meanwhile is delivered too.
// A datagram to an address nobody is attached at is lost.
func (n *Network) Run() error {
	for range MaxDeliveries {
		n.mu.Lock()
		if len(n.queue) == 0 {
			n.mu.Unlock()
			return nil
		}
		d := n.queue[0]
		n.queue = n.queue[1:]
		if n.nat != nil {
			d.To = n.nat.in(d.To)
		}
		r := n.hosts[d.To.Addr()]
		n.mu.Unlock()
		if r != nil {
			r(d.Pkt, d.To, d.From)
		}
	}
	return fmt.Errorf("iketest: the network did not go quiet after %d datagrams", MaxDeliveries)
}

// Pending is how many datagrams wait for Run.
func (n *Network) Pending() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.queue)
}

// Wire returns every datagram sent since the last ResetWire, dropped ones
// included, in order.
func (n *Network) Wire() []Datagram {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Datagram(nil), n.wire...)
}

// WireLen is len(Wire()) without the copy.
func (n *Network) WireLen() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.wire)
}

// ResetWire forgets the datagrams sent so far (long runs keep memory
// bounded).
func (n *Network) ResetWire() {
	n.mu.Lock()
	n.wire = nil
	n.mu.Unlock()
}

// Discard forgets the datagrams waiting for Run: they are lost.
func (n *Network) Discard() {
	n.mu.Lock()
	n.queue = nil
	n.mu.Unlock()
}
