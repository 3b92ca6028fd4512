package iked

import (
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec/ike"
	"github.com/vishvananda/netlink"
)

// peerConfig turns a configured tunnel into the engine's PeerConfig.
// forceEncap is set by the daemon when the data plane is userspace ESP: ESP
// in UDP is its fast path (UDP GSO/GRO), and every NAT-T capable peer
// accepts it.
// sourceFor finds our address towards the peer when none is configured.
func peerConfig(t *config.Tunnel, forceEncap bool, sourceFor func(netip.Addr) (netip.Addr, error)) (*ike.PeerConfig, error) {
	remote := t.RemoteAddress.Addr
	local := t.LocalAddress.Addr
	if !local.IsValid() && remote.IsValid() {
		src, err := sourceFor(remote)
		if err != nil {
			return nil, fmt.Errorf("tunnel %s: no local address given and %w", t.Name, err)
		}
		local = src
	}
	p := &ike.PeerConfig{
		Name:          t.Name,
		Version:       int(t.IKEVersion.Or2()),
		PSK:           []byte(t.PSK.Reveal()),
		ForceEncap:    forceEncap,
		IKELifetime:   t.IKELifetime.Duration,
		ChildLifetime: t.ChildLifetime.Duration,
		DPDDelay:      t.DPDInterval.Duration,
		FragmentSize:  t.IKEFragmentSize,
	}
	if local.IsValid() {
		p.Local = netip.AddrPortFrom(local, 500)
	}
	if remote.IsValid() {
		p.Remote = netip.AddrPortFrom(remote, 500)
	}
	// Identities default to the addresses, as strongSwan's do.
	lid, rid := t.LocalID, t.RemoteID
	if lid == "" && local.IsValid() {
		lid = local.String()
	}
	if rid == "" && remote.IsValid() {
		rid = remote.String()
	}
	var err error
	if lid != "" {
		if p.LocalID, err = ike.ParseIdentity(lid); err != nil {
			return nil, fmt.Errorf("tunnel %s: local_id: %w", t.Name, err)
		}
	}
	if rid != "" {
		if p.RemoteID, err = ike.ParseIdentity(rid); err != nil {
			return nil, fmt.Errorf("tunnel %s: remote_id: %w", t.Name, err)
		}
	}
	for _, s := range t.IKEProposals {
		pr, err := ike.ParseProposal(ike.ProtoIKE, s)
		if err != nil {
			return nil, fmt.Errorf("tunnel %s: ike_proposals %q: %w", t.Name, s, err)
		}
		p.IKEProposals = append(p.IKEProposals, pr)
	}
	for _, s := range t.ESPProposals {
		pr, err := ike.ParseProposal(ike.ProtoESP, s)
		if err != nil {
			return nil, fmt.Errorf("tunnel %s: esp_proposals %q: %w", t.Name, s, err)
		}
		p.ESPProposals = append(p.ESPProposals, pr)
	}
	for _, s := range t.LocalSubnets {
		p.LocalTS = append(p.LocalTS, s.Prefix)
	}
	for _, s := range t.RemoteSubnets {
		p.RemoteTS = append(p.RemoteTS, s.Prefix)
	}
	if t.IsRoute() {
		if len(p.LocalTS) == 0 {
			p.LocalTS = anyToAny
		}
		if len(p.RemoteTS) == 0 {
			p.RemoteTS = anyToAny
		}
	}
	// DPD: the engine declares the peer dead when a liveness check goes
	// unanswered through all retransmissions; spread them over the
	// configured timeout (0.5 s doubling: 5 tries take 15.5 s).
	if to := t.DPDTimeout.Duration; to > 0 {
		p.RetransmitTries = triesWithin(500*time.Millisecond, to)
	}
	return p, nil
}

// triesWithin is how many sends, starting at first and doubling, fit in d
// (at least 2, at most 10).
func triesWithin(first, d time.Duration) int {
	n, total, next := 0, time.Duration(0), first
	for n < 10 && total+next <= d {
		total += next
		next *= 2
		n++
	}
	if n < 2 {
		n = 2
	}
	return n
}

// routes answers route queries in the namespace the daemon was started in:
// its handle's socket was opened there, while the goroutines that ask run
// on threads of any namespace (tests run daemons in several).
type routes struct{ h *netlink.Handle }

// sourceFor asks the kernel which local address it would use to reach dst.
func (r routes) sourceFor(dst netip.Addr) (netip.Addr, error) {
	rs, err := r.h.RouteGet(dst.AsSlice())
	if err != nil || len(rs) == 0 {
		return netip.Addr{}, fmt.Errorf("no route to the peer %s: %v", dst, err)
	}
	a, ok := netip.AddrFromSlice(rs[0].Src)
	if !ok {
		return netip.Addr{}, fmt.Errorf("the route to the peer %s has no source address", dst)
	}
	return a.Unmap(), nil
}

// sameTunnel reports whether a tunnel's configuration is unchanged, so the
// reconciler leaves its SAs alone.
func sameTunnel(a, b *config.Tunnel) bool {
	return string(mustJSON(a)) == string(mustJSON(b))
}

// peerFor is the engine's hook for IKE_SA_INIT from an unknown SA: the
// tunnel whose peer address matches, else one that accepts any address
// (the first by name in either case).
func (d *Daemon) peerFor(local, remote netip.AddrPort) *ike.PeerConfig {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.peers == nil {
		d.peers = newPeerIndex(d.sortedTunnels())
	}
	if t := d.peers.byAddr[remote.Addr()]; t != nil {
		return t.peer
	}
	if d.peers.any != nil {
		return d.peers.any.peer
	}
	return nil
}

// peerIndex is what peerFor looks up (Daemon.peers).
type peerIndex struct {
	byAddr map[netip.Addr]*tunnel
	any    *tunnel
}

// newPeerIndex indexes tunnels, sorted by name.
func newPeerIndex(sorted []*tunnel) *peerIndex {
	x := &peerIndex{byAddr: make(map[netip.Addr]*tunnel, len(sorted))}
	for _, t := range sorted {
		switch {
		case t.peer == nil:
		case t.peer.Remote.IsValid():
			if _, dup := x.byAddr[t.peer.Remote.Addr()]; !dup {
				x.byAddr[t.peer.Remote.Addr()] = t
			}
		case x.any == nil:
			x.any = t
		}
	}
	return x
}

// localFor gives the local address for a datagram from remote, for the
// userspace device's NAT-T socket, which does not report it.
func (d *Daemon) localFor(remote netip.AddrPort) netip.AddrPort {
	d.mu.Lock()
	if d.peers == nil {
		d.peers = newPeerIndex(d.sortedTunnels())
	}
	if t := d.peers.byAddr[remote.Addr()]; t != nil {
		// The index holds the first tunnel by name with this peer; only
		// when it has no local address can another one have it.
		if t.peer.Local.IsValid() {
			d.mu.Unlock()
			return netip.AddrPortFrom(t.peer.Local.Addr(), d.opts.NATTPort)
		}
		for _, t := range d.tunnels {
			if t.peer != nil && t.peer.Remote.Addr() == remote.Addr() && t.peer.Local.IsValid() {
				d.mu.Unlock()
				return netip.AddrPortFrom(t.peer.Local.Addr(), d.opts.NATTPort)
			}
		}
	}
	d.mu.Unlock()
	if a, err := d.tr.SourceFor(remote.Addr()); err == nil {
		return netip.AddrPortFrom(a, d.opts.NATTPort)
	}
	return netip.AddrPortFrom(netip.IPv4Unspecified(), d.opts.NATTPort)
}

// sasOf returns the IKE SAs of the named tunnel, established or not.
func (d *Daemon) sasOf(name string) []*ike.IKESA {
	var peer *ike.PeerConfig
	d.mu.Lock()
	if t := d.tunnels[name]; t != nil {
		peer = t.peer
	}
	d.mu.Unlock()
	if peer == nil {
		return nil
	}
	return d.ep.SAsOf(peer)
}

func (d *Daemon) sortedTunnels() []*tunnel {
	ts := make([]*tunnel, 0, len(d.tunnels))
	for _, t := range d.tunnels {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].cfg.Name < ts[j].cfg.Name })
	return ts
}

// tunnelOf is the tunnel an IKE SA belongs to: nil for an SA negotiated
// under a configuration that has since been replaced or removed.
func (d *Daemon) tunnelOf(sa *ike.IKESA) *tunnel {
	if sa == nil {
		return nil
	}
	t := d.tunnels[sa.Name()]
	if t == nil || t.peer != sa.Config() {
		return nil
	}
	return t
}
