package iked

// Tunnels with start action on-traffic, the way strongSwan's
// start_action=trap works: until the tunnel has a CHILD_SA its remote
// subnets are routed into the data plane anyway (a trap), and the first
// packet for them starts the negotiation. In the kernel plane the trap is
// an outbound XFRM policy without an SA, whose first packet makes the
// kernel send an acquire; in the userspace plane it is a route into the
// TUN, whose first packet finds no SA and is reported by the Device. Either
// way that first packet is dropped; the sender's retransmission (or next
// ping) goes through once the tunnel is up. When the tunnel goes down
// again, the trap is still there: the tunnel waits for traffic again and
// does not re-initiate by itself.

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/flashgate/flashgate/ipsec"
)

// trapRetry is how long a trap that could not be installed (no route to
// the peer yet: the WAN is not up) waits before the next try.
const trapRetry = 5 * time.Second

// trapReqIDBase numbers the kernel traps: one reqid per on-traffic tunnel,
// far above those the IKE engine hands out to CHILD_SAs (counting from 1),
// so that an acquire names the tunnel and never a negotiated pair.
const trapReqIDBase = 0x40000000

// trapPrefixes are the remote subnets the trap routes.
func (t *tunnel) trapPrefixes() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range t.cfg.RemoteSubnets {
		ps = append(ps, s.Prefix.Masked())
	}
	return ps
}

func (t *tunnel) localPrefixes() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range t.cfg.LocalSubnets {
		ps = append(ps, s.Prefix.Masked())
	}
	return ps
}

// trapOf is the trap that holds t's traffic: its remote subnets, and for
// the kernel's policy template both outer addresses and its reqid.
func (t *tunnel) trapOf(local, remote netip.Addr) ipsec.Trap {
	return ipsec.Trap{ReqID: t.trapReqID, Local: local, Remote: remote, LocalTS: t.localPrefixes(), RemoteTS: t.trapPrefixes()}
}

// trapsToInstall picks the on-traffic tunnels whose trap is not in the
// data plane yet and can be (the peer's address is known). Called with
// d.mu held; the caller installs them with installTraps after unlocking.
func (d *Daemon) trapsToInstall(now time.Time) []*tunnel {
	var out []*tunnel
	seq := func() uint32 {
		d.trapSeq++
		return trapReqIDBase + d.trapSeq
	}
	for _, t := range d.tunnels {
		if t.trapDue(now, seq) {
			out = append(out, t)
		}
	}
	return out
}

// installTraps installs the traps trapsToInstall picked.
func (d *Daemon) installTraps(ts []*tunnel) {
	for _, t := range ts {
		d.mu.Lock()
		spec := t.trapOf(t.peer.Local.Addr(), t.peer.Remote.Addr())
		d.mu.Unlock()
		err := d.dp.AddTrap(spec)
		now := d.now()
		d.mu.Lock()
		current := d.tunnels[t.cfg.Name] == t && !d.closed
		t.trapResult(now, spec, err, current, d.dp.Name())
		d.mu.Unlock()
		if err == nil && !current {
			// Apply replaced or removed the tunnel meanwhile.
			d.dp.DeleteTrap(spec)
		}
	}
}

// acquires turns the data plane's reports of trapped traffic into
// initiations.
func (d *Daemon) acquires() {
	defer d.wg.Done()
	for {
		select {
		case <-d.done:
			return
		case a, ok := <-d.dp.Acquires():
			if !ok {
				return
			}
			d.acquired(a)
		}
	}
}

// acquired starts the on-traffic tunnel the traffic is for: the kernel
// names its trap by reqid; the userspace plane gives the destination, in
// the remote subnets of the tunnel (the first by name) it is for.
func (d *Daemon) acquired(a ipsec.Acquire) {
	d.mu.Lock()
	var hit *tunnel
	for _, t := range d.sortedTunnels() {
		if !t.onTraffic() || t.trap != trapInstalled {
			continue
		}
		if a.ReqID != 0 && t.trapReqID == a.ReqID {
			hit = t
			break
		}
		if a.ReqID == 0 && slices.ContainsFunc(t.trapPrefixes(), func(p netip.Prefix) bool { return p.Contains(a.Dst) }) {
			hit = t
			break
		}
	}
	why := "traffic to " + a.Dst.String()
	if a.ReqID != 0 {
		why = fmt.Sprintf("traffic for %v (kernel acquire, reqid %d)", a.Remote, a.ReqID)
	}
	started := hit != nil && hit.trafficCame(d.now(), why)
	d.mu.Unlock()
	if started {
		d.maintain()
	}
}
