package iked

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec/ike"
)

// Apply reconciles the running tunnels with cfg: new tunnels start, removed
// ones are deleted (their SAs too), changed ones restart, and unchanged
// ones are not touched.
func (d *Daemon) Apply(cfg *config.Config) error {
	want := map[string]*config.Tunnel{}
	creds := map[string]*tunnelCreds{}
	credErrs := map[string]error{}
	var errs []error
	for i := range cfg.Tunnels {
		t := &cfg.Tunnels[i]
		want[t.Name] = t
		creds[t.Name], credErrs[t.Name] = credsFor(cfg, t)
	}
	var stop []*ike.IKESA
	var untrap []*tunnel
	// The SAs by configuration, once: looking through every SA for each
	// removed tunnel made replacing a thousand tunnels a million steps.
	byPeer := map[*ike.PeerConfig][]*ike.IKESA{}
	for _, sa := range d.ep.SAs() {
		byPeer[sa.Config()] = append(byPeer[sa.Config()], sa)
	}
	d.mu.Lock()
	d.peers = nil
	for name, t := range d.tunnels {
		if w, ok := want[name]; !ok || !sameTunnel(&t.cfg, w) || !w.Enabled || !t.creds.sameAs(creds[name]) || credErrs[name] != nil {
			if t.peer != nil {
				stop = append(stop, byPeer[t.peer]...)
			}
			if t.trap == trapInstalled {
				untrap = append(untrap, t)
			}
			delete(d.tunnels, name) // a changed one is re-added below
		}
	}
	now := d.now()
	for name, w := range want {
		if !w.Enabled {
			continue
		}
		if _, ok := d.tunnels[name]; ok {
			continue
		}
		if w.DataPlane != "" && w.DataPlane != config.DataPlaneAuto && w.DataPlane != d.dp.Name() {
			err := fmt.Errorf("tunnel %s asks for the %s data plane, but iked runs %s (%s) and uses one for every tunnel: set data_plane auto, or start iked with -dataplane %s",
				name, w.DataPlane, d.dp.Name(), d.opts.DataPlaneWhy, w.DataPlane)
			errs = append(errs, err)
			d.tunnels[name] = newTunnel(now, *w, nil, err, d.opts.StateChanged)
			d.tunnels[name].phase = unusable
			continue
		}
		peer, err := peerConfig(w, d.opts.ForceEncap, d.tr.SourceFor)
		if err == nil {
			err = credErrs[name]
		}
		if err != nil {
			errs = append(errs, err)
			d.tunnels[name] = newTunnel(now, *w, nil, err, d.opts.StateChanged)
			continue
		}
		creds[name].apply(peer, w)
		peer.Ranking = d.opts.Ranking
		peer.Rank()
		d.tunnels[name] = newTunnel(now, *w, peer, nil, d.opts.StateChanged)
		d.tunnels[name].creds = creds[name]
	}
	var peers []netip.AddrPort
	for _, t := range d.tunnels {
		if t.peer != nil && t.peer.Remote.IsValid() && !t.peer.Remote.Addr().IsUnspecified() {
			peers = append(peers, t.peer.Remote)
		}
	}
	d.mu.Unlock()
	// Configured peers' IKE gets sockets of its own, which a flood on
	// the IKE port cannot overflow (Transport.SetPeers).
	if err := d.tr.SetPeers(peers); err != nil {
		d.logf("iked: %v (their IKE shares the port's socket with everyone)", err)
	}
	for _, sa := range stop {
		sa.Delete()
	}
	for _, t := range untrap {
		if err := d.dp.DeleteTrap(t.trapSpec); err != nil {
			d.logf("iked: %s: remove the trap of the old configuration: %v", t.cfg.Name, err)
		}
	}
	if err := d.setInterfaces(cfg); err != nil {
		errs = append(errs, err)
	}
	d.maintain()
	return errors.Join(errs...)
}

// maintain starts tunnels that should be up and are not, with backoff
// after failures: 1 s doubling to 60 s.
func (d *Daemon) maintain() {
	now := d.now()
	var start []*tunnel
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	var children []*ike.IKESA
	for _, t := range d.tunnels {
		switch t.due(now) {
		case negotiateChild:
			children = append(children, t.sa)
		case negotiateIKE:
			start = append(start, t)
		}
	}
	traps := d.trapsToInstall(now)
	d.mu.Unlock()
	d.installTraps(traps)
	for _, sa := range children {
		if err := sa.CreateChild(); err != nil {
			d.logf("iked: %s: new CHILD_SA: %v", sa.Name(), err)
		}
	}
	for _, t := range start {
		peer, err := d.refreshPeer(t)
		if err != nil {
			d.mu.Lock()
			t.initiated(now, nil, err)
			d.mu.Unlock()
			continue
		}
		d.mu.Lock()
		if t.respondOnly() || !peer.Remote.IsValid() {
			t.initiateSkipped(now)
			d.mu.Unlock()
			continue
		}
		d.mu.Unlock()
		sa, err := d.initiate(peer)
		d.mu.Lock()
		if err == nil && (d.tunnels[t.cfg.Name] != t || d.closed) {
			// Apply replaced or removed the tunnel (or Close ran) while
			// the IKE_SA_INIT went out: its look for the tunnel's SAs
			// came before this one existed, and nothing else would ever
			// delete it.
			t.initiationAbandoned()
			d.mu.Unlock()
			d.logf("iked: %s: deleting the IKE SA started for a configuration that was replaced meanwhile", t.cfg.Name)
			sa.Delete()
			continue
		}
		t.initiated(now, sa, err)
		d.mu.Unlock()
	}
}

// refreshPeer returns the tunnel's PeerConfig for a new IKE SA. Without a
// configured local address it is made anew when the kernel's source address
// for the peer changed (a new DHCP lease on the WAN) or could not be found
// before (the WAN was not up when the tunnel was configured).
func (d *Daemon) refreshPeer(t *tunnel) (*ike.PeerConfig, error) {
	d.mu.Lock()
	peer := t.peer
	d.mu.Unlock()
	if peer != nil && t.cfg.LocalAddress.IsSet() {
		return peer, nil
	}
	p, err := peerConfig(&t.cfg, d.opts.ForceEncap, d.tr.SourceFor)
	if err != nil {
		return nil, err
	}
	t.creds.apply(p, &t.cfg)
	if peer != nil && p.Local == peer.Local {
		return peer, nil
	}
	p.Ranking = d.opts.Ranking
	p.Rank()
	d.mu.Lock()
	defer d.mu.Unlock()
	if t.peer != peer || d.tunnels[t.cfg.Name] != t {
		return nil, fmt.Errorf("tunnel %s was reconfigured meanwhile", t.cfg.Name)
	}
	t.peerMoved(d.now(), p)
	d.peers = nil
	return p, nil
}

func prefixes(ps []netip.Prefix) string {
	b, _ := json.Marshal(ps)
	return string(b)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // config types always marshal
	}
	return b
}
