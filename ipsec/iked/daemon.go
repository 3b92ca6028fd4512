package iked

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/ike"
)

// Options configure a Daemon.
type Options struct {
	// DataPlane is "auto" (XFRM when the kernel has ESP, userspace
	// otherwise), "xfrm" or "userspace".
	DataPlane string
	// TUN names the userspace data plane's interface (default "fgesp0").
	TUN string
	// IKEPort and NATTPort default to 500 and 4500; tests running two
	// daemons in one namespace use others.
	IKEPort, NATTPort uint16
	// TickInterval is how often timers run (default 100 ms); negative:
	// never by themselves, the caller calls Tick (tests with a clock of
	// their own).
	TickInterval time.Duration
	// Now is the clock of the daemon and its IKE engine (default
	// time.Now).
	Now func() time.Time
	// ForceEncap carries ESP in UDP even without a NAT: the userspace
	// data plane's fast path (Open sets it for that plane).
	ForceEncap bool
	// DataPlaneWhy says why the data plane in use was chosen (forced, or
	// what the probe found), for tunnels that ask for another.
	DataPlaneWhy string
	// Ranking puts the proposals the board's crypto engine accelerates
	// first (ipsec/hwcrypto); nil keeps the configured order.
	Ranking ike.Ranking
	Logf    func(format string, args ...any)
	// StateChanged, if set, is called whenever a tunnel's state changes
	// (live updates for the web UI, benchmarks). It is called with the
	// daemon's lock held: it must not block or call into the Daemon.
	StateChanged func(tunnel string, state ipsec.TunnelState)
}

// Daemon runs the tunnels of one configuration.
type Daemon struct {
	opts Options
	ep   *ike.Endpoint
	dp   DataPlane
	tr   Transport
	logf func(string, ...any)
	now  func() time.Time

	// initiate starts an IKE SA: ep.Initiate, which tests wrap to run
	// something while an initiation is under way.
	initiate func(*ike.PeerConfig) (*ike.IKESA, error)

	mu      sync.Mutex
	tunnels map[string]*tunnel
	trapSeq uint32 // numbers the kernel traps (trapReqIDBase+n)
	closed  bool
	done    chan struct{}
	wg      sync.WaitGroup
}

// maxEvents bounds each tunnel's event history.
const maxEvents = 32

// tunnel is the daemon's record of one configured tunnel.
type tunnel struct {
	cfg     config.Tunnel
	peer    *ike.PeerConfig
	sa      *ike.IKESA // the current IKE SA, if any
	state   ipsec.TunnelState
	reason  string
	since   time.Time
	events  []ipsec.TunnelEvent
	retryAt time.Time
	// needChild: the IKE SA is up but its last CHILD_SA is gone; maintain
	// negotiates a new one (start action initiate).
	needChild bool
	// unusable: the tunnel cannot work until it is reconfigured (it asks
	// for a data plane iked is not running); reason says why.
	unusable bool
	backoff  time.Duration
	notify   func(string, ipsec.TunnelState) // Options.StateChanged

	// initiating: a maintain call has picked the tunnel and is starting
	// its IKE SA, which sa does not hold yet. Apply, the timers and the
	// API's up all call maintain; none may start a second one meanwhile.
	initiating bool
	// upOnce: the API's up asked a respond tunnel to initiate, as
	// swanctl --initiate does for any connection. It holds from the
	// request until the attempt ends: maintain initiates once, and a
	// failure puts the tunnel back to waiting for the peer (attemptFailed)
	// instead of into the retries of start action initiate.
	upOnce bool
	// superseded: the established IKE SA that sa replaced without a rekey
	// (the peer initiated anew instead of reusing it). Once sa carries a
	// CHILD_SA, childUp deletes it if it carries none.
	superseded *ike.IKESA

	// Start action on-traffic. trapped: the data plane holds the
	// tunnel's traffic for it (trapping: being installed; trapReqID
	// names the kernel's trap, trapRetryAt delays a refused one).
	// triggered: traffic came, maintain initiates.
	trapped, trapping, triggered bool
	trapReqID                    uint32
	trap                         ipsec.Trap // as installed, for its removal
	trapRetryAt                  time.Time
}

// Open opens the data plane and the IKE sockets the options ask for, in
// the caller's network namespace, and makes a Daemon on them: what Main
// runs. Call Run to start, Apply to give it tunnels, Close to stop.
func Open(opts Options) (*Daemon, error) {
	opts.defaults()
	dp, why, err := OpenDataPlane(opts.DataPlane, opts.TUN, opts.NATTPort)
	if err != nil {
		return nil, err
	}
	opts.Logf("iked: data plane %s (%s)", dp.Name(), why)
	tr, err := OpenTransport(opts.IKEPort, opts.NATTPort, dp)
	if err != nil {
		dp.Close()
		return nil, err
	}
	opts.DataPlaneWhy = why
	// ESP in UDP is the userspace plane's fast path (UDP GSO/GRO), and
	// every NAT-T capable peer accepts it.
	_, opts.ForceEncap = dp.(*userspacePlane)
	d, err := New(opts, dp, tr)
	if err != nil {
		tr.Close()
		dp.Close()
		return nil, err
	}
	return d, nil
}

func (opts *Options) defaults() {
	if opts.IKEPort == 0 {
		opts.IKEPort = 500
	}
	if opts.NATTPort == 0 {
		opts.NATTPort = 4500
	}
	if opts.TUN == "" {
		opts.TUN = ipsec.UserspaceInterface
	}
	if opts.TickInterval == 0 {
		opts.TickInterval = 100 * time.Millisecond
	}
	if opts.Logf == nil {
		opts.Logf = log.Printf
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
}

// New makes a Daemon that installs SAs into dp and speaks IKE over tr;
// it takes both over (Close closes them). Open passes the real ones;
// tests pass ikedtest's memory plane and in-memory network.
func New(opts Options, dp DataPlane, tr Transport) (*Daemon, error) {
	opts.defaults()
	d := &Daemon{opts: opts, dp: dp, tr: tr, logf: opts.Logf, now: opts.Now, tunnels: map[string]*tunnel{}, done: make(chan struct{})}
	ep, err := ike.NewEndpoint(ike.EndpointConfig{
		Send:     tr.Send,
		Now:      opts.Now,
		PeerFor:  d.peerFor,
		NATTPort: opts.NATTPort,
		Events: ike.Events{
			ChildUp:   d.childUp,
			ChildDown: d.childDown,
			IKEUp:     d.ikeUp,
			IKEDown:   d.ikeDown,
			Failure:   d.failure,
		},
	})
	if err != nil {
		return nil, err
	}
	d.ep = ep
	d.initiate = ep.Initiate
	return d, nil
}

// DataPlane names the data plane in use.
func (d *Daemon) DataPlane() string { return d.dp.Name() }

// Run starts receiving and the timers. It returns at once.
func (d *Daemon) Run() {
	d.tr.Run(d.receive)
	d.wg.Add(2)
	go d.acquires()
	go d.expires()
	if d.opts.TickInterval > 0 {
		d.wg.Add(1)
		go d.timers()
	}
}

// receive hands one IKE datagram to the engine. A datagram whose local
// address the transport could not tell (the userspace data plane's NAT-T
// port) is for the tunnel of its sender.
func (d *Daemon) receive(pkt []byte, local, remote netip.AddrPort) {
	if !local.IsValid() {
		local = d.localFor(remote)
	}
	d.ep.HandleMessage(pkt, local, remote)
}

// Tick runs the timers once: the engine's (retransmissions, rekeys, dead
// peer detection) and the daemon's (retries with backoff, new CHILD_SAs,
// traps to install). Run calls it every TickInterval.
func (d *Daemon) Tick() {
	d.ep.Tick()
	d.maintain()
}

func (d *Daemon) timers() {
	defer d.wg.Done()
	t := time.NewTicker(d.opts.TickInterval)
	defer t.Stop()
	var watch attackWatch
	for {
		select {
		case <-d.done:
			return
		case <-t.C:
			d.Tick()
			if line := watch.check(d.now(), d.ep.Stats.Snapshot(), d.ep.HalfOpen()); line != "" {
				d.logf("%s", line)
			}
		}
	}
}

// attackWatch turns the engine's refusal counters into at most one log
// line per attackReportEvery, and only while something is refused: the
// box says when it is under attack without letting the attack flood the
// log ring. The counters themselves are in iked's status (Stats.IKE).
type attackWatch struct {
	last     time.Time
	lastSeen ike.StatsSnapshot
}

const attackReportEvery = 10 * time.Second

func (w *attackWatch) check(now time.Time, s ike.StatsSnapshot, halfOpen int) string {
	if w.last.IsZero() {
		w.last, w.lastSeen = now, s
		return ""
	}
	if now.Sub(w.last) < attackReportEvery {
		return ""
	}
	p := w.lastSeen
	w.last, w.lastSeen = now, s
	full, source, large, early := s.HalfOpenRefused-p.HalfOpenRefused, s.SourceLimited-p.SourceLimited,
		s.InitTooLarge-p.InitTooLarge, s.EarlyRequests-p.EarlyRequests
	if full+source+large+early == 0 {
		return ""
	}
	return fmt.Sprintf("IKE under attack? in the last %s: %d IKE_SA_INIT refused at the half-open limit, %d at the per-source limit, "+
		"%d too large, %d requests before IKE_AUTH; %d cookies sent, %d SAs half-open now (configured peers are not refused)",
		attackReportEvery, full, source, large, early, s.CookiesSent-p.CookiesSent, halfOpen)
}

// expires turns the data plane's lifetime events into rekeys: a soft
// expiry rekeys the CHILD_SA, a hard one deletes it (the data plane has
// already stopped using it).
func (d *Daemon) expires() {
	defer d.wg.Done()
	for {
		select {
		case <-d.done:
			return
		case e, ok := <-d.dp.Expires():
			if !ok {
				return
			}
			sa, in := d.findChild(e.SPI)
			if sa == nil {
				continue
			}
			var err error
			if e.Hard {
				err = sa.DeleteChild(in)
			} else {
				err = sa.RekeyChild(in)
			}
			if err != nil {
				d.logf("iked: %s: expiry of SA %08x: %v", sa.Name(), e.SPI, err)
			}
		}
	}
}

// findChild finds the IKE SA and inbound SPI of the pair that has spi in
// either direction.
func (d *Daemon) findChild(spi uint32) (*ike.IKESA, uint32) {
	for _, sa := range d.ep.SAs() {
		for _, c := range sa.Status().Children {
			if c.InSPI == spi || c.OutSPI == spi {
				return sa, c.InSPI
			}
		}
	}
	return nil, 0
}

// Apply reconciles the running tunnels with cfg: new tunnels start, removed
// ones are deleted (their SAs too), changed ones restart, and unchanged
// ones are not touched.
func (d *Daemon) Apply(cfg *config.Config) error {
	want := map[string]*config.Tunnel{}
	var errs []error
	for i := range cfg.Tunnels {
		t := &cfg.Tunnels[i]
		want[t.Name] = t
	}
	var stop []*ike.IKESA
	var untrap []*tunnel
	d.mu.Lock()
	for name, t := range d.tunnels {
		if w, ok := want[name]; !ok || !sameTunnel(&t.cfg, w) || !w.Enabled {
			for _, sa := range d.ep.SAs() {
				if sa.Config() == t.peer {
					stop = append(stop, sa)
				}
			}
			if t.trapped {
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
			d.tunnels[name] = &tunnel{cfg: *w, state: ipsec.StateFailed, reason: err.Error(), since: now, notify: d.opts.StateChanged, unusable: true}
			continue
		}
		peer, err := peerConfig(w, d.opts.ForceEncap, d.tr.SourceFor)
		if err != nil {
			errs = append(errs, err)
			d.tunnels[name] = &tunnel{cfg: *w, state: ipsec.StateFailed, reason: err.Error(), since: now, notify: d.opts.StateChanged}
			continue
		}
		peer.Ranking = d.opts.Ranking
		t := &tunnel{cfg: *w, peer: peer, state: ipsec.StateDown, since: now, notify: d.opts.StateChanged}
		switch w.StartAction {
		case config.StartRespond:
			t.reason = waitingForPeer
		case config.StartOnTraffic:
			t.reason = waitingForTraffic
		}
		t.event(now, "configured")
		d.tunnels[name] = t
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
		if err := d.dp.DeleteTrap(t.trap); err != nil {
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
		if t.needChild && t.sa != nil && !now.Before(t.retryAt) {
			// One CREATE_CHILD_SA at a time: the next try waits 5 s, then
			// longer, so a slow answer does not make two.
			t.backoff = min(max(2*t.backoff, 5*time.Second), time.Minute)
			t.retryAt = now.Add(t.backoff)
			children = append(children, t.sa)
			continue
		}
		// Tunnels without a PeerConfig (no route to the peer yet: the
		// WAN is not up) are retried like failed initiations.
		if t.unusable || t.sa != nil || t.initiating || t.peer != nil && (t.respondOnly() || !t.peer.Remote.IsValid()) {
			continue
		}
		if t.onTraffic() && !t.triggered {
			continue // the trap's first packet, or the API's up, says when
		}
		if now.Before(t.retryAt) {
			continue
		}
		t.backoff = min(max(2*t.backoff, time.Second), time.Minute)
		t.retryAt = now.Add(t.backoff)
		t.initiating, t.triggered = true, false
		start = append(start, t)
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
			t.initiating = false
			t.attemptFailed(now, err.Error())
			d.mu.Unlock()
			continue
		}
		d.mu.Lock()
		if t.respondOnly() || !peer.Remote.IsValid() {
			t.initiating, t.upOnce = false, false
			if t.state == ipsec.StateFailed {
				t.setState(now, ipsec.StateDown, waitingForPeer)
			}
			d.mu.Unlock()
			continue
		}
		d.mu.Unlock()
		sa, err := d.initiate(peer)
		d.mu.Lock()
		t.initiating = false
		current := d.tunnels[t.cfg.Name] == t && !d.closed
		if err != nil {
			t.attemptFailed(now, err.Error())
		} else if !current {
			// Apply replaced or removed the tunnel (or Close ran) while
			// the IKE_SA_INIT went out: its look for the tunnel's SAs
			// came before this one existed, and nothing else would ever
			// delete it.
			d.mu.Unlock()
			d.logf("iked: %s: deleting the IKE SA started for a configuration that was replaced meanwhile", t.cfg.Name)
			sa.Delete()
			continue
		} else if t.sa == nil {
			t.sa = sa
			switch t.state {
			case ipsec.StateUp, ipsec.StateConnecting:
			case ipsec.StateFailed:
				// Keep saying why: a tunnel that keeps retrying is
				// otherwise shown as merely "connecting".
				t.setState(now, ipsec.StateConnecting, "retrying; last failure: "+strings.TrimPrefix(t.reason, "retrying; last failure: "))
			default:
				t.setState(now, ipsec.StateConnecting, "")
			}
		}
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
	if peer != nil && p.Local == peer.Local {
		return peer, nil
	}
	p.Ranking = d.opts.Ranking
	d.mu.Lock()
	defer d.mu.Unlock()
	if t.peer != peer || d.tunnels[t.cfg.Name] != t {
		return nil, fmt.Errorf("tunnel %s was reconfigured meanwhile", t.cfg.Name)
	}
	if peer != nil {
		t.event(d.now(), fmt.Sprintf("local address is now %v (was %v)", p.Local.Addr(), peer.Local.Addr()))
	}
	t.peer = p
	return p, nil
}

// peerFor is the engine's hook for IKE_SA_INIT from an unknown SA: the
// tunnel whose peer address matches, else one that accepts any address.
func (d *Daemon) peerFor(local, remote netip.AddrPort) *ike.PeerConfig {
	d.mu.Lock()
	defer d.mu.Unlock()
	var any *ike.PeerConfig
	for _, t := range d.sortedTunnels() {
		if t.peer == nil {
			continue
		}
		if t.peer.Remote.Addr() == remote.Addr() {
			return t.peer
		}
		if !t.peer.Remote.IsValid() && any == nil {
			any = t.peer
		}
	}
	return any
}

// localFor gives the local address for a datagram from remote, for the
// userspace device's NAT-T socket, which does not report it.
func (d *Daemon) localFor(remote netip.AddrPort) netip.AddrPort {
	d.mu.Lock()
	for _, t := range d.tunnels {
		if t.peer != nil && t.peer.Remote.Addr() == remote.Addr() && t.peer.Local.IsValid() {
			d.mu.Unlock()
			return netip.AddrPortFrom(t.peer.Local.Addr(), d.opts.NATTPort)
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
	d.mu.Lock()
	t := d.tunnels[name]
	d.mu.Unlock()
	var out []*ike.IKESA
	for _, sa := range d.ep.SAs() {
		if t != nil && t.peer != nil && sa.Config() == t.peer {
			out = append(out, sa)
		}
	}
	return out
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

// The engine's events. They run without engine locks held and may call
// into the engine; they must not call it with d.mu held.

func (d *Daemon) childUp(c ike.ChildUp) {
	d.markRoute(c.In, c.Out, c.SA.Name())
	err := d.dp.AddPair(c.In, c.Out)
	now := d.now()
	var replaced *ike.IKESA
	defer func() {
		// Runs after the unlock below. An IKE SA the tunnel no longer
		// uses, left without CHILD_SAs (the peer initiated anew instead
		// of reusing it), would otherwise live on at both ends, checked
		// by DPD forever and carrying nothing.
		if replaced != nil && replaced != c.SA && replaced.State() == ike.StateEstablished && len(replaced.Status().Children) == 0 {
			replaced.Delete()
		}
	}()
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tunnelOf(c.SA)
	if err != nil {
		d.logf("iked: %s: install CHILD_SA %08x/%08x: %v", c.SA.Name(), c.In.SPI, c.Out.SPI, err)
		if t != nil {
			t.setState(now, ipsec.StateFailed, fmt.Sprintf("the negotiated CHILD_SA could not be installed in the %s data plane: %v", d.dp.Name(), err))
		}
		go c.SA.DeleteChild(c.In.SPI)
		return
	}
	if t == nil {
		return
	}
	if t.sa != c.SA {
		// An SA the peer initiated, or a rekeyed IKE SA.
		t.superseded, t.sa = t.sa, c.SA
	}
	// The new SA carries a CHILD_SA now: the one it superseded (here, or
	// in ikeUp, which comes first) may go if it carries none.
	replaced, t.superseded = t.superseded, nil
	what := "CHILD_SA up"
	if c.Replaces != 0 {
		what = fmt.Sprintf("CHILD_SA rekeyed (replaces %08x)", c.Replaces)
	}
	t.event(now, fmt.Sprintf("%s: %s, SPIs %08x_i %08x_o, %s === %s", what, c.Proposal.String(), c.In.SPI, c.Out.SPI,
		prefixes(c.In.LocalTS), prefixes(c.In.RemoteTS)))
	t.backoff, t.needChild, t.upOnce = 0, false, false
	t.setState(now, ipsec.StateUp, "")
}

func (d *Daemon) childDown(sa *ike.IKESA, in uint32, reason error) {
	if err := d.dp.DeletePair(in); err != nil {
		d.logf("iked: %s: remove CHILD_SA %08x: %v", sa.Name(), in, err)
	}
	// A CHILD_SA that went away on its own (the peer deleted it, its
	// hard lifetime ran out after failed rekeys) may leave an established
	// IKE SA that carries nothing. One replaced by a rekey leaves its
	// successor; one of an IKE SA being deleted leaves no established SA.
	left := -1
	if sa.State() == ike.StateEstablished {
		left = len(sa.Status().Children)
	}
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tunnelOf(sa)
	if t == nil {
		return
	}
	if reason != nil {
		t.event(now, fmt.Sprintf("CHILD_SA %08x down: %v", in, reason))
	}
	if left != 0 || t.sa != sa {
		return
	}
	if reason == nil {
		reason = fmt.Errorf("CHILD_SA %08x closed at the end of its lifetime", in)
		t.event(now, reason.Error())
	}
	if t.cfg.StartAction == config.StartRespond {
		t.setState(now, ipsec.StateDown, reason.Error()+"; waiting for the peer to negotiate a new CHILD_SA")
		return
	}
	if t.onTraffic() {
		// The trap takes the traffic again; its next packet negotiates
		// a new CHILD_SA on the IKE SA we keep.
		t.waitForTraffic(now, reason.Error())
		return
	}
	// Keep the tunnel up: a new CHILD_SA on the same IKE SA (maintain).
	t.needChild, t.retryAt, t.backoff = true, now.Add(time.Second), 0
	t.setState(now, ipsec.StateConnecting, reason.Error()+"; negotiating a new CHILD_SA")
}

func (d *Daemon) ikeUp(sa *ike.IKESA) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tunnelOf(sa)
	if t == nil {
		return
	}
	what := "IKE_SA up"
	if t.sa != nil && t.sa != sa {
		switch t.sa.State() {
		case ike.StateRekeyed:
			what = "IKE_SA rekeyed"
		case ike.StateEstablished:
			// The peer negotiated a new IKE SA beside ours (strongSwan
			// with reuse_ikesa = no does for a new CHILD_SA): the
			// tunnel moves to it, and childUp deletes the old one if it
			// is left without CHILD_SAs.
			t.superseded = t.sa
		}
	}
	t.sa = sa
	st := sa.Status()
	t.event(now, fmt.Sprintf("%s: %s, SPIs %016x_i %016x_r, %v <-> %v", what, st.Proposal, st.SPIi, st.SPIr, st.Local, st.Remote))
}

func (d *Daemon) ikeDown(sa *ike.IKESA, reason error) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tunnelOf(sa)
	if t == nil || t.sa != sa {
		return // a rekeyed-away SA, or one of a tunnel that was removed
	}
	t.sa, t.needChild = nil, false
	if reason == nil {
		t.event(now, "IKE_SA closed")
		switch {
		case t.onTraffic():
			t.waitForTraffic(now, "the IKE_SA was closed")
		case t.cfg.StartAction == config.StartRespond:
			t.upOnce = false
			t.setState(now, ipsec.StateDown, waitingForPeer+"; the IKE_SA was closed")
		default:
			t.setState(now, ipsec.StateDown, "closed")
		}
		return
	}
	why := reason.Error()
	var f *ike.Failure
	if errors.As(reason, &f) && f.DeadPeer() {
		why = "the peer is dead (dead peer detection): " + why
	}
	t.event(now, "IKE_SA down: "+why)
	if t.onTraffic() {
		t.waitForTraffic(now, why)
		return
	}
	if t.upOnce {
		t.attemptFailed(now, why)
		return
	}
	t.setState(now, ipsec.StateFailed, why)
}

func (d *Daemon) failure(peer *ike.PeerConfig, reason error) {
	if peer == nil || reason == nil {
		return
	}
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tunnels[peer.Name]
	if t == nil || t.peer != peer {
		return
	}
	t.event(now, reason.Error())
	if t.onTraffic() {
		// The IKE SA's end (ikeDown) puts it back to waiting.
		return
	}
	if t.upOnce && t.state != ipsec.StateUp {
		// The IKE SA stays (its CHILD_SA was refused); the peer may
		// negotiate one on it, or a new IKE SA.
		t.attemptFailed(now, reason.Error())
		return
	}
	if t.state != ipsec.StateUp {
		t.setState(now, ipsec.StateFailed, reason.Error())
	}
}

// waitingForPeer is the reason of a tunnel with start action respond that
// is not up: nothing is wrong, the peer starts it.
const waitingForPeer = "waiting for the peer to connect (start action: respond)"

// respondOnly reports whether maintain leaves the tunnel to the peer: start
// action respond, and no up asked for.
func (t *tunnel) respondOnly() bool {
	return t.cfg.StartAction == config.StartRespond && !t.upOnce
}

// attemptFailed records a failed initiation: an on-traffic tunnel waits for
// traffic again, a respond tunnel that was asked up once waits for the peer
// again (no retry), and an initiate tunnel shows failed until maintain's
// retry.
func (t *tunnel) attemptFailed(now time.Time, why string) {
	switch {
	case t.onTraffic():
		t.waitForTraffic(now, "the last attempt failed: "+why)
	case t.upOnce:
		t.upOnce = false
		t.event(now, "up failed: "+why)
		t.setState(now, ipsec.StateDown, waitingForPeer+"; up failed: "+why)
	default:
		t.setState(now, ipsec.StateFailed, why)
	}
}

func (t *tunnel) setState(now time.Time, s ipsec.TunnelState, reason string) {
	changed := t.state != s
	if changed {
		t.since = now
	}
	t.state, t.reason = s, reason
	if changed && t.notify != nil {
		t.notify(t.cfg.Name, s)
	}
}

func (t *tunnel) event(now time.Time, msg string) {
	t.events = append(t.events, ipsec.TunnelEvent{Time: now, Message: msg})
	if len(t.events) > maxEvents {
		t.events = append(t.events[:0], t.events[len(t.events)-maxEvents:]...)
	}
}

// Close deletes every IKE SA (telling the peers), removes the SAs and
// traps from the data plane and closes it and the transport.
func (d *Daemon) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	for _, sa := range d.ep.SAs() {
		sa.Delete()
	}
	// Give the DELETEs a moment on the wire, then stop.
	time.Sleep(50 * time.Millisecond)
	close(d.done)
	d.tr.Close()
	d.wg.Wait()
	// Kernel traps would outlive us and swallow the traffic with nobody
	// to answer their acquires. (The TUN's routes go with it.)
	d.mu.Lock()
	var traps []ipsec.Trap
	for _, t := range d.tunnels {
		if t.trapped {
			traps = append(traps, t.trap)
		}
	}
	d.mu.Unlock()
	for _, tr := range traps {
		if err := d.dp.DeleteTrap(tr); err != nil {
			d.logf("iked: %v", err)
		}
	}
	for _, sa := range d.ep.SAs() {
		for _, c := range sa.Status().Children {
			d.dp.DeletePair(c.InSPI)
		}
		sa.Close()
	}
	return d.dp.Close()
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
