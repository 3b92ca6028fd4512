package iked

import (
	"log"
	"net/netip"
	"sync"
	"time"

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
	// peers indexes the tunnels by peer address for peerFor, which runs
	// for every IKE_SA_INIT: the first tunnel by name for each address,
	// and the first that accepts any address. nil when d.tunnels or a
	// tunnel's peer changed since it was built.
	peers   *peerIndex
	trapSeq uint32 // numbers the kernel traps (trapReqIDBase+n)
	closed  bool
	done    chan struct{}
	wg      sync.WaitGroup
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
		if t.trap == trapInstalled {
			traps = append(traps, t.trapSpec)
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
