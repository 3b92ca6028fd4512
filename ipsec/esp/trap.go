package esp

// Traps: remote subnets routed into the TUN before any SA carries them, so
// that the first packet for a tunnel started on traffic reaches the Device
// and tells iked to negotiate, as the kernel's acquire does for XFRM.

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// MissingSAInterval is how often OnMissingSA is called at most for one
// destination: a ping every second reports each time, a flood of packets
// to an address that is still being negotiated once a second.
const MissingSAInterval = time.Second

// missingQueue bounds the destinations waiting for the OnMissingSA
// goroutine; more are dropped, and the next packet reports them again.
const missingQueue = 16

// AddTrap routes the prefixes into the TUN although no SA covers them yet:
// packets for them are dropped (counted in NoSA) and reported to
// Config.OnMissingSA. The routes are shared with the SAs' own (counted per
// prefix), so the route stays while a trap or a pair needs it.
func (d *Device) AddTrap(prefixes []netip.Prefix) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return errors.New("add trap: device closed")
	}
	var added []netip.Prefix
	for _, p := range prefixes {
		p = p.Masked()
		if d.routes[p] == 0 && !slices.Contains(added, p) {
			if err := d.routeAdd(p); err != nil {
				for _, q := range added {
					d.routeDel(q)
				}
				return fmt.Errorf("add trap: %w", err)
			}
			added = append(added, p)
		}
	}
	for _, p := range prefixes {
		d.routes[p.Masked()]++
	}
	return nil
}

// DeleteTrap drops a trap's hold on its prefixes; a route no pair or other
// trap needs goes.
func (d *Device) DeleteTrap(prefixes []netip.Prefix) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, p := range prefixes {
		p = p.Masked()
		if d.routes[p] == 0 {
			continue
		}
		if d.routes[p]--; d.routes[p] == 0 {
			delete(d.routes, p)
			if !d.closed.Load() {
				errs = append(errs, d.routeDel(p))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete trap: %w", err)
	}
	return nil
}

// missingReporter is a TX worker's filter in front of the OnMissingSA
// queue: the same destination again within MissingSAInterval is not
// queued, so a burst for one address costs a comparison per packet.
type missingReporter struct {
	last netip.Addr
	at   time.Time
}

// report queues the destination of pkt, an IPv4 or IPv6 packet at least 20
// bytes long, for OnMissingSA. It never blocks and does not allocate.
func (r *missingReporter) report(d *Device, pkt []byte) {
	var dst netip.Addr
	switch pkt[0] >> 4 {
	case 4:
		dst = netip.AddrFrom4([4]byte(pkt[16:20]))
	case 6:
		if len(pkt) < 40 {
			return
		}
		dst = netip.AddrFrom16([16]byte(pkt[24:40]))
	default:
		return
	}
	now := time.Now()
	if dst == r.last && now.Sub(r.at) < MissingSAInterval {
		return
	}
	r.last, r.at = dst, now
	select {
	case d.missing <- dst:
	default:
	}
}

// reportMissing calls OnMissingSA for the queued destinations, each at
// most once per MissingSAInterval across all workers. It runs on its own
// goroutine so that a slow hook (iked starting an IKE SA) never holds up a
// packet worker.
func (d *Device) reportMissing() {
	last := map[netip.Addr]time.Time{}
	for {
		select {
		case <-d.stop:
			return
		case dst := <-d.missing:
			now := time.Now()
			if at, ok := last[dst]; ok && now.Sub(at) < MissingSAInterval {
				continue
			}
			if len(last) >= 256 {
				// A scan of many addresses: forget them all rather than
				// grow; the workers' filters still damp the bursts.
				clear(last)
			}
			last[dst] = now
			d.cfg.OnMissingSA(dst)
		}
	}
}
