// Package ikedtest holds in-memory twins of what iked drives, so that the
// daemon's whole tunnel lifecycle runs in a test without root, namespaces
// or a kernel with ESP: Plane, a data plane that keeps the installed
// CHILD_SAs and traps in maps and reports trapped traffic and expiries
// when the test makes them happen, and Transport, the IKE sockets of one
// host on an iketest.Network. iked.New takes both; with iketest's clock
// and the daemon's Tick a test steps through minutes of retries and
// rekeys in milliseconds.
//
// They are twins, not mocks: nothing is scripted, the daemon's engine
// negotiates with another real engine over the in-memory wire, and the
// plane refuses what a real one refuses (a duplicate SPI, a pair it does
// not have).
package ikedtest

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/flashgate/flashgate/ipsec"
)

// Plane is a data plane in memory.
type Plane struct {
	mu       sync.Mutex
	pairs    map[uint32][2]*ipsec.ChildSA // by inbound SPI
	spis     map[uint32]bool              // installed SAs of either direction
	traps    map[uint32]ipsec.Trap        // by reqid
	stats    map[uint32]ipsec.SAStats
	addErr   error
	closed   bool
	expires  chan ipsec.Expire
	acquires chan ipsec.Acquire
}

// NewPlane is an empty plane.
func NewPlane() *Plane {
	return &Plane{pairs: map[uint32][2]*ipsec.ChildSA{}, spis: map[uint32]bool{}, traps: map[uint32]ipsec.Trap{},
		stats: map[uint32]ipsec.SAStats{}, expires: make(chan ipsec.Expire, 16), acquires: make(chan ipsec.Acquire, 16)}
}

// Name is "memory".
func (p *Plane) Name() string { return "memory" }

// AddPair installs a pair and zeroes its keys, as the real planes do; it
// refuses an SPI already installed, or any pair after FailAdd.
func (p *Plane) AddPair(in, out *ipsec.ChildSA) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return fmt.Errorf("memory plane: closed")
	case p.addErr != nil:
		return p.addErr
	case in == nil || out == nil || !in.Inbound || out.Inbound:
		return fmt.Errorf("memory plane: a pair is one inbound and one outbound SA")
	case p.spis[in.SPI] || p.spis[out.SPI]:
		return fmt.Errorf("memory plane: SPI %08x or %08x already installed", in.SPI, out.SPI)
	}
	p.pairs[in.SPI] = [2]*ipsec.ChildSA{in, out}
	p.spis[in.SPI], p.spis[out.SPI] = true, true
	in.Zero() // as the real planes do: the caller keeps no keys
	out.Zero()
	return nil
}

// DeletePair removes the pair with the inbound SPI and zeroes its keys.
func (p *Plane) DeletePair(inboundSPI uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	pair, ok := p.pairs[inboundSPI]
	if !ok {
		return fmt.Errorf("memory plane: no pair with inbound SPI %08x", inboundSPI)
	}
	delete(p.pairs, inboundSPI)
	delete(p.spis, pair[0].SPI)
	delete(p.spis, pair[1].SPI)
	delete(p.stats, pair[0].SPI)
	delete(p.stats, pair[1].SPI)
	pair[0].Zero()
	pair[1].Zero()
	return nil
}

// Stats returns what Count recorded for the SA.
func (p *Plane) Stats(spi uint32) (ipsec.SAStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.spis[spi] {
		return ipsec.SAStats{}, fmt.Errorf("memory plane: no SA %08x", spi)
	}
	return p.stats[spi], nil
}

// Expires carries what Expire reports.
func (p *Plane) Expires() <-chan ipsec.Expire { return p.expires }

// AddTrap holds the trap's traffic; one trap per reqid.
func (p *Plane) AddTrap(t ipsec.Trap) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, dup := p.traps[t.ReqID]; dup {
		return fmt.Errorf("memory plane: reqid %d already trapped", t.ReqID)
	}
	p.traps[t.ReqID] = t
	return nil
}

// DeleteTrap lets go of the trap.
func (p *Plane) DeleteTrap(t ipsec.Trap) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.traps[t.ReqID]; !ok {
		return fmt.Errorf("memory plane: no trap for reqid %d", t.ReqID)
	}
	delete(p.traps, t.ReqID)
	return nil
}

// Acquires carries the trapped traffic Send reports.
func (p *Plane) Acquires() <-chan ipsec.Acquire { return p.acquires }

// Close empties the plane.
func (p *Plane) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for spi, pair := range p.pairs {
		pair[0].Zero()
		pair[1].Zero()
		delete(p.pairs, spi)
	}
	clear(p.spis)
	clear(p.traps)
	return nil
}

// Pairs returns the installed pairs (inbound, outbound), by inbound SPI.
func (p *Plane) Pairs() [][2]*ipsec.ChildSA {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out [][2]*ipsec.ChildSA
	for _, pr := range p.pairs {
		out = append(out, pr)
	}
	slices.SortFunc(out, func(a, b [2]*ipsec.ChildSA) int { return int(int64(a[0].SPI) - int64(b[0].SPI)) })
	return out
}

// Traps returns the installed traps.
func (p *Plane) Traps() []ipsec.Trap {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []ipsec.Trap
	for _, t := range p.traps {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b ipsec.Trap) int { return int(int64(a.ReqID) - int64(b.ReqID)) })
	return out
}

// Send is a packet from the protected side for dst: an installed pair
// whose remote selectors hold dst carries it (and counts it, reported
// true); otherwise a trap that holds dst reports it on Acquires, as the
// kernel's acquire does, and the packet is dropped.
func (p *Plane) Send(dst netip.Addr, bytes int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.pairs {
		if slices.ContainsFunc(pr[1].RemoteTS, func(q netip.Prefix) bool { return q.Contains(dst) }) {
			s := p.stats[pr[1].SPI]
			s.Bytes += uint64(bytes)
			s.Packets++
			p.stats[pr[1].SPI] = s
			return true
		}
	}
	for _, t := range p.traps {
		for _, q := range t.RemoteTS {
			if q.Contains(dst) {
				select {
				case p.acquires <- ipsec.Acquire{ReqID: t.ReqID, Remote: q, Dst: dst}:
				default: // as a kernel whose acquire queue is full
				}
				return false
			}
		}
	}
	return false
}

// Expire reports that the SA reached its soft (rekey) or hard (delete)
// lifetime, as a kernel's expire does.
func (p *Plane) Expire(spi uint32, hard bool) {
	p.expires <- ipsec.Expire{SPI: spi, Hard: hard}
}

// FailAdd makes AddPair refuse every pair with err (nil: accept again).
func (p *Plane) FailAdd(err error) {
	p.mu.Lock()
	p.addErr = err
	p.mu.Unlock()
}
