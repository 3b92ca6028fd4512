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
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/xfrm"
)

// waitingForTraffic is the reason an on-traffic tunnel without a CHILD_SA
// shows.
const waitingForTraffic = ipsec.WaitingForTraffic

// trapRetry is how long a trap that could not be installed (no route to
// the peer yet: the WAN is not up) waits before the next try.
const trapRetry = 5 * time.Second

// trapReqIDBase numbers the kernel traps: one reqid per on-traffic tunnel,
// far above those the IKE engine hands out to CHILD_SAs (counting from 1),
// so that an acquire names the tunnel and never a negotiated pair.
const trapReqIDBase = 0x40000000

func (t *tunnel) onTraffic() bool { return t.cfg.StartAction == config.StartOnTraffic }

// waitForTraffic puts an on-traffic tunnel back to waiting, saying what
// ended its last attempt or SA. Called with d.mu held.
func (t *tunnel) waitForTraffic(now time.Time, what string) {
	t.triggered, t.needChild = false, false
	reason := waitingForTraffic
	if what != "" {
		reason += "; " + what
	}
	t.setState(now, ipsec.StateDown, reason)
}

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

// installTrap puts t's trap into the data plane. peer is t's PeerConfig
// (the kernel's policy template needs both outer addresses).
func (d *Daemon) installTrap(t *tunnel, reqid uint32, local, remote netip.Addr) error {
	if d.dev != nil {
		return d.dev.AddTrap(t.trapPrefixes())
	}
	if d.kernel != nil {
		return d.kernel.Trap(reqid, local, remote, t.localPrefixes(), t.trapPrefixes())
	}
	return errors.New("the data plane has no traps")
}

// removeTrap takes t's trap out of the data plane.
func (d *Daemon) removeTrap(t *tunnel, reqid uint32) error {
	if d.dev != nil {
		return d.dev.DeleteTrap(t.trapPrefixes())
	}
	if d.kernel != nil {
		return d.kernel.Untrap(reqid)
	}
	return nil
}

// trapsToInstall picks the on-traffic tunnels whose trap is not in the
// data plane yet and can be (the peer's address is known). Called with
// d.mu held; the caller installs them with installTraps after unlocking.
func (d *Daemon) trapsToInstall(now time.Time) []*tunnel {
	var out []*tunnel
	for _, t := range d.tunnels {
		if !t.onTraffic() || t.trapped || t.trapping || t.unusable || t.peer == nil || !t.peer.Remote.IsValid() || now.Before(t.trapRetryAt) {
			continue
		}
		if t.trapReqID == 0 {
			d.trapSeq++
			t.trapReqID = trapReqIDBase + d.trapSeq
		}
		t.trapping = true
		out = append(out, t)
	}
	return out
}

// installTraps installs the traps trapsToInstall picked.
func (d *Daemon) installTraps(ts []*tunnel) {
	for _, t := range ts {
		d.mu.Lock()
		peer := t.peer
		d.mu.Unlock()
		err := d.installTrap(t, t.trapReqID, peer.Local.Addr(), peer.Remote.Addr())
		now := time.Now()
		d.mu.Lock()
		t.trapping = false
		current := d.tunnels[t.cfg.Name] == t && !d.closed
		switch {
		case err != nil:
			t.trapRetryAt = now.Add(trapRetry)
			msg := fmt.Sprintf("cannot wait for traffic: the %s data plane refused the trap: %v", d.dp.Name(), err)
			if len(t.events) == 0 || t.events[len(t.events)-1].Message != msg {
				t.event(now, msg)
			}
		case current:
			t.trapped = true
			t.event(now, fmt.Sprintf("waiting for traffic to %s", prefixes(t.trapPrefixes())))
		}
		d.mu.Unlock()
		if err == nil && !current {
			// Apply replaced or removed the tunnel meanwhile.
			d.removeTrap(t, t.trapReqID)
		}
	}
}

// trafficFor is the userspace Device's OnMissingSA: a packet for dst found
// no SA. It starts the on-traffic tunnel whose remote subnets hold dst.
func (d *Daemon) trafficFor(dst netip.Addr) {
	d.mu.Lock()
	var hit *tunnel
	for _, t := range d.sortedTunnels() {
		if !t.onTraffic() || !t.trapped {
			continue
		}
		for _, p := range t.trapPrefixes() {
			if p.Contains(dst) {
				hit = t
				break
			}
		}
		if hit != nil {
			break
		}
	}
	started := hit != nil && d.trigger(hit, "traffic to "+dst.String())
	d.mu.Unlock()
	if started {
		d.maintain()
	}
}

// acquires turns the kernel's acquire events into initiations.
func (d *Daemon) acquires() {
	defer d.wg.Done()
	for {
		select {
		case <-d.done:
			return
		case a, ok := <-d.kernel.Acquires():
			if !ok {
				return
			}
			d.acquired(a)
		}
	}
}

func (d *Daemon) acquired(a xfrm.Acquire) {
	d.mu.Lock()
	var hit *tunnel
	for _, t := range d.tunnels {
		if t.trapped && t.trapReqID == a.ReqID {
			hit = t
		}
	}
	started := hit != nil && d.trigger(hit, fmt.Sprintf("traffic for %v (kernel acquire, reqid %d)", a.Remote, a.ReqID))
	d.mu.Unlock()
	if started {
		d.maintain()
	}
}

// trigger marks an on-traffic tunnel as wanted: maintain negotiates its
// IKE SA, or a CHILD_SA on the IKE SA it kept. It reports whether there is
// anything for maintain to do: not while an initiation is under way or the
// tunnel is up, nor before the retry delay after a failed attempt. Called
// with d.mu held.
func (d *Daemon) trigger(t *tunnel, why string) bool {
	if t.initiating || t.triggered || t.needChild || t.state == ipsec.StateUp || t.state == ipsec.StateConnecting {
		return false
	}
	now := time.Now()
	if now.Before(t.retryAt) {
		return false
	}
	t.event(now, why+": starting the tunnel")
	if t.sa != nil {
		t.needChild, t.retryAt = true, now
	} else {
		t.triggered = true
	}
	t.setState(now, ipsec.StateConnecting, why)
	return true
}
