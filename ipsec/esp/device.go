package esp

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/tunnelif"
)

// Config says where a Device carries traffic.
type Config struct {
	// TUN is the name of the tunnel interface, created by the Device and
	// gone with it. Default ipsec.UserspaceInterface ("fgesp0"), which
	// netd's firewall trusts as the way out of a tunnel.
	TUN string
	// MTU of the TUN. The default 1400 leaves room for the outer IPv4 and
	// UDP headers and the ESP overhead of every transform on a 1500-byte
	// path.
	MTU int
	// Listen is the local NAT-T address, default 0.0.0.0:4500. IKE
	// shares this socket: see SetIKEHandler.
	Listen netip.AddrPort
	// Workers is the number of TUN queues and UDP sockets, each with its
	// own goroutine per direction. Default GOMAXPROCS.
	Workers int
	// NoRawESP leaves out the raw IP protocol 50 sockets, which carry SAs
	// whose EncapDstPort is 0 (peers without NAT-T). Without them such
	// SAs are refused.
	NoRawESP bool
	// OnMissingSA, if set, is told the destination of packets read from
	// the TUN that no outbound SA covers: traffic for a trap (AddTrap) or
	// for a tunnel whose SA just went. The packet itself is dropped
	// (counted in NoSA); the sender's retransmission or next packet goes
	// through once the SA is up. It is called on a goroutine of its own,
	// never on a packet worker, at most once per MissingSAInterval for a
	// destination, and not at all for destinations that arrive while 16
	// are waiting; it may block and may call into the Device.
	OnMissingSA func(dst netip.Addr)
}

// DeviceCounters are drops and events that belong to no SA.
type DeviceCounters struct {
	UnknownSPI  atomic.Uint64 // ESP with an SPI we do not have
	Truncated   atomic.Uint64 // datagrams too short to be ESP
	Oversized   atomic.Uint64 // datagrams larger than the receive buffer
	NoSA        atomic.Uint64 // packets from the TUN that match no outbound SA
	BadOffload  atomic.Uint64 // malformed packets from the TUN
	EncapErrors atomic.Uint64 // packets an expired or exhausted SA refused
	TxErrors    atomic.Uint64 // packets the kernel refused to send
	RxErrors    atomic.Uint64 // packets the TUN refused to take
	IKE         atomic.Uint64 // IKE messages handed to the IKE handler
	Keepalives  atomic.Uint64 // NAT keepalives (RFC 3948 2.3)
}

// DeviceCounterSnapshot is a copy of DeviceCounters, for status output.
type DeviceCounterSnapshot struct {
	UnknownSPI, Truncated, Oversized, NoSA, BadOffload, EncapErrors uint64
	TxErrors, RxErrors, IKE, Keepalives                             uint64
}

// CounterSnapshot returns the Device's own counters.
func (d *Device) CounterSnapshot() DeviceCounterSnapshot {
	c := &d.Counters
	return DeviceCounterSnapshot{
		UnknownSPI: c.UnknownSPI.Load(), Truncated: c.Truncated.Load(), Oversized: c.Oversized.Load(),
		NoSA: c.NoSA.Load(), BadOffload: c.BadOffload.Load(), EncapErrors: c.EncapErrors.Load(),
		TxErrors: c.TxErrors.Load(), RxErrors: c.RxErrors.Load(), IKE: c.IKE.Load(), Keepalives: c.Keepalives.Load(),
	}
}

// Device is the userspace ESP data plane: a TUN interface whose routed
// traffic is encrypted into ESP-in-UDP, and the reverse. It implements
// ipsec.DataPlane.
type Device struct {
	cfg   Config
	tun   *tunDevice
	nl    *netlink.Handle // bound to the namespace the Device was made in
	link  netlink.Link
	socks []*udpSocket // ESP-in-UDP and IKE, one per worker
	raws  []*udpSocket // raw ESP: one socket, a handle per worker; raws[0] receives

	table atomic.Pointer[saTable]
	// inbound holds the inbound SAs by SPI for the workers, who read it
	// without a lock (changed under mu). It is not in the table: the
	// table is rebuilt whole when it changes, which a thousand installs
	// made a million entries of garbage (a third of what a hub's setups
	// allocated).
	inbound spiTable
	ike     atomic.Pointer[func(pkt []byte, from netip.AddrPort)]

	mu     sync.Mutex           // serializes AddPair, DeletePair, SetInterfaces, Close
	pairs  map[uint32]*pair     // by inbound SPI
	outSPI map[uint32]*SA       // the outbound SAs by SPI (peers may pick the same; the newest)
	index  *remoteIndex         // the outbound SAs by remote selector (saTable.byRemote)
	tuns   map[uint32]*routeTUN // route tunnels' TUNs by if_id
	ifs    *tunnelif.Table
	routes map[netip.Prefix]int
	added  uint64
	life   lifetimes

	expires chan ipsec.Expire
	closed  atomic.Bool
	wg      sync.WaitGroup

	missing chan netip.Addr // to reportMissing, when Config.OnMissingSA is set
	stop    chan struct{}   // closed by Close: ends reportMissing

	Counters DeviceCounters
}

var (
	_ ipsec.DataPlane  = (*Device)(nil)
	_ ipsec.Interfaces = (*Device)(nil)
)

// routeTUN is the TUN of one route tunnel (ipsecN), with TX workers of its
// own that send from duplicates of the Device's sockets.
type routeTUN struct {
	ifID  uint32
	tun   *tunDevice
	link  netlink.Link
	socks []*udpSocket
	wg    sync.WaitGroup
}

type pair struct {
	in, out *SA
	limits  pairLimits // its time limits (lifetime.go)
	added   uint64     // order of AddPair calls: the newest pair carries outbound traffic
}

// saTable is an immutable snapshot read by the workers without locks and
// replaced whole when the route tunnels' TUNs change. The SAs are not in
// it: Device.inbound and the index of outbound SAs change in place.
type saTable struct {
	tuns map[uint32]*routeTUN // route tunnels' TUNs, by if_id
	// byRemote is the Device's index of the outbound SAs by remote
	// selector (shared by every table, changed in place), so that a
	// packet's SA is found without trying every one; nil: try every one
	// of out, newest first (the search before the index, which its tests
	// and benchmark compare it with).
	byRemote *remoteIndex
	out      []*SA
}

// NewDevice creates the TUN interface, brings it up and starts the workers,
// in the network namespace of the calling thread.
func NewDevice(cfg Config) (*Device, error) {
	if cfg.TUN == "" {
		cfg.TUN = ipsec.UserspaceInterface
	}
	if cfg.MTU == 0 {
		cfg.MTU = 1400
	}
	if !cfg.Listen.IsValid() {
		cfg.Listen = netip.AddrPortFrom(netip.IPv4Unspecified(), 4500)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	d := &Device{
		cfg:     cfg,
		pairs:   make(map[uint32]*pair),
		outSPI:  make(map[uint32]*SA),
		index:   newRemoteIndex(),
		tuns:    make(map[uint32]*routeTUN),
		routes:  make(map[netip.Prefix]int),
		expires: make(chan ipsec.Expire, 64),
		stop:    make(chan struct{}),
		life:    lifetimes{epoch: time.Now()},
	}
	if cfg.OnMissingSA != nil {
		d.missing = make(chan netip.Addr, missingQueue)
	}
	d.table.Store(&saTable{byRemote: d.index})
	var err error
	if d.nl, err = netlink.NewHandle(); err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	d.ifs = tunnelif.New(d.nl)
	if d.tun, err = openTUN(cfg.TUN, cfg.Workers); err != nil {
		d.nl.Close()
		return nil, err
	}
	fail := func(err error) (*Device, error) {
		for _, s := range append(d.socks, d.raws...) {
			s.close()
		}
		d.tun.close()
		d.nl.Close()
		return nil, err
	}
	if d.link, err = d.nl.LinkByName(cfg.TUN); err != nil {
		return fail(fmt.Errorf("TUN %s: %w", cfg.TUN, err))
	}
	if err := d.nl.LinkSetMTU(d.link, cfg.MTU); err != nil {
		return fail(fmt.Errorf("TUN %s: MTU %d: %w", cfg.TUN, cfg.MTU, err))
	}
	// No IPv6 link-local address: the TUN is point to point and the
	// kernel would only send router solicitations and MLD reports into
	// the tunnel, where no SA takes them. Kernels without IPv6 refuse the
	// setting, which is then moot.
	_ = d.nl.LinkSetIP6AddrGenMode(d.link, 1) // IN6_ADDR_GEN_MODE_NONE
	if err := d.nl.LinkSetUp(d.link); err != nil {
		return fail(fmt.Errorf("TUN %s: up: %w", cfg.TUN, err))
	}
	for i := 0; i < cfg.Workers; i++ {
		s, err := listenUDP(cfg.Listen)
		if err != nil {
			return fail(err)
		}
		d.socks = append(d.socks, s)
		if !cfg.NoRawESP {
			var r *udpSocket
			if i == 0 {
				r, err = listenRawESP(cfg.Listen.Addr())
			} else {
				r, err = d.raws[0].dupRaw()
			}
			if err != nil {
				return fail(err)
			}
			d.raws = append(d.raws, r)
		}
	}
	for i := 0; i < cfg.Workers; i++ {
		var raw *udpSocket
		if !cfg.NoRawESP {
			raw = d.raws[i]
		}
		d.wg.Add(2)
		go d.encryptLoop(d.tun.queues[i], d.socks[i], raw, 0, &d.wg)
		go d.decryptLoop(d.socks[i], d.tun.queues[i], i)
	}
	if !cfg.NoRawESP {
		d.wg.Add(1)
		go d.decryptLoop(d.raws[0], d.tun.queues[0], 0)
	}
	if d.missing != nil {
		// Not in wg: the hook may call AddTrap or AddPair, which wait
		// for the lock Close holds while it waits for wg.
		go d.reportMissing()
	}
	return d, nil
}

// Name implements ipsec.DataPlane.
func (d *Device) Name() string { return "userspace" }

// Expires implements ipsec.DataPlane. Soft and hard limits by bytes and
// sequence numbers report the SPI of the SA that reached them; limits by
// time report the inbound SPI of the pair.
func (d *Device) Expires() <-chan ipsec.Expire { return d.expires }

// SetIKEHandler installs the receiver of IKE messages that arrive on the
// NAT-T socket, which IKE and ESP share on port 4500. pkt is the IKE
// message with the four-byte non-ESP marker removed; it is valid only
// during the call, so the handler copies what it keeps. The handler runs
// on a packet worker and must not block.
func (d *Device) SetIKEHandler(h func(pkt []byte, from netip.AddrPort)) {
	d.ike.Store(&h)
}

// SendIKE sends an IKE message from the NAT-T port, prepending the
// non-ESP marker (RFC 3948 2.2). Safe for concurrent use.
func (d *Device) SendIKE(pkt []byte, to netip.AddrPort) error {
	b := make([]byte, 4+len(pkt))
	copy(b[4:], pkt)
	if err := d.socks[0].sendTo(b, to); err != nil {
		return fmt.Errorf("send IKE to %v: %w", to, err)
	}
	return nil
}

// AddPair implements ipsec.DataPlane: it keys both SAs, routes the remote
// traffic selectors into the TUN and makes the new outbound SA the one
// used for its traffic. Once the pair is installed it zeroes the key
// material of in and out, as the kernel plane's install leaves the keys
// to the kernel: the SAs' ciphers hold them, and a hub kept a copy of
// every pair's keys for as long as the pair lived.
func (d *Device) AddPair(in, out *ipsec.ChildSA) error {
	if !in.Inbound || out.Inbound {
		return fmt.Errorf("AddPair %08x/%08x: directions swapped", in.SPI, out.SPI)
	}
	if out.EncapDstPort == 0 && len(d.raws) == 0 {
		return fmt.Errorf("AddPair %08x/%08x: raw ESP is disabled (Config.NoRawESP)", in.SPI, out.SPI)
	}
	if !out.Dst.Is4() {
		return fmt.Errorf("AddPair %08x/%08x: outer address %v: only IPv4 is implemented", in.SPI, out.SPI, out.Dst)
	}
	inSA, err := NewSA(in, d.onExpire)
	if err != nil {
		return fmt.Errorf("AddPair inbound: %w", err)
	}
	outSA, err := NewSA(out, d.onExpire)
	if err != nil {
		return fmt.Errorf("AddPair outbound: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return errors.New("AddPair: device closed")
	}
	if _, dup := d.pairs[in.SPI]; dup {
		return fmt.Errorf("AddPair: inbound SPI %08x already installed", in.SPI)
	}
	if in.IfID != out.IfID {
		return fmt.Errorf("AddPair %08x/%08x: if_ids differ (%d, %d)", in.SPI, out.SPI, in.IfID, out.IfID)
	}
	if out.IfID != 0 {
		// A route tunnel's pair: its interface's routes steer the
		// traffic, and come in with the first pair.
		if d.tuns[out.IfID] == nil {
			return fmt.Errorf("AddPair %08x/%08x: no tunnel interface with if_id %d", in.SPI, out.SPI, out.IfID)
		}
		d.install(inSA, outSA, in, out)
		if err := d.ifs.PairAdded(out.IfID); err != nil {
			return fmt.Errorf("AddPair %08x/%08x: %w", in.SPI, out.SPI, err)
		}
		return nil
	}
	var added []netip.Prefix
	for _, p := range out.RemoteTS {
		p = p.Masked()
		if d.routes[p] == 0 && !slices.Contains(added, p) {
			if err := d.routeAdd(p); err != nil {
				for _, q := range added {
					d.routeDel(q)
				}
				return fmt.Errorf("AddPair %08x: %w", in.SPI, err)
			}
			added = append(added, p)
		}
	}
	for _, p := range out.RemoteTS {
		d.routes[p.Masked()]++
	}
	d.install(inSA, outSA, in, out)
	return nil
}

// install makes a pair the newest and hands it to the workers, and zeroes
// the keys of the ChildSAs it was made from. Called with d.mu held.
func (d *Device) install(in, out *SA, cin, cout *ipsec.ChildSA) {
	d.added++
	pr := &pair{in: in, out: out, added: d.added}
	d.scheduleLifetimes(pr, cin)
	d.pairs[in.SPI] = pr
	d.outSPI[out.SPI] = out
	d.index.add(out, d.added)
	d.inbound.store(in)
	cin.Zero()
	cout.Zero()
}

func (d *Device) onExpire(sa *SA, hard bool) { d.sendExpire(ipsec.Expire{SPI: sa.SPI, Hard: hard}) }

// sendExpire never blocks a packet worker: if iked is slow to read, the
// event waits in its own goroutine.
func (d *Device) sendExpire(e ipsec.Expire) {
	select {
	case d.expires <- e:
	default:
		go func() { d.expires <- e }()
	}
}

// DeletePair implements ipsec.DataPlane.
func (d *Device) DeletePair(inboundSPI uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	pr := d.pairs[inboundSPI]
	if pr == nil {
		return fmt.Errorf("DeletePair %08x: no such SA", inboundSPI)
	}
	delete(d.pairs, inboundSPI)
	d.inbound.remove(inboundSPI)
	if d.outSPI[pr.out.SPI] == pr.out {
		delete(d.outSPI, pr.out.SPI)
	}
	d.index.remove(pr.out)
	d.unscheduleLifetimes(pr)
	var errs []error
	if pr.out.IfID != 0 {
		errs = append(errs, d.ifs.PairDeleted(pr.out.IfID))
	}
	for _, p := range pr.out.RemoteTS {
		if pr.out.IfID != 0 {
			break
		}
		p = p.Masked()
		if d.routes[p]--; d.routes[p] <= 0 {
			delete(d.routes, p)
			if err := d.routeDel(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	pr.in.Zero()
	pr.out.Zero()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("DeletePair %08x: %w", inboundSPI, err)
	}
	return nil
}

// publish rebuilds the snapshot the workers read. Called with d.mu held.
func (d *Device) publish() {
	d.table.Store(&saTable{tuns: maps.Clone(d.tuns), byRemote: d.index})
}

// Stats implements ipsec.DataPlane for an SA of either direction.
func (d *Device) Stats(spi uint32) (ipsec.SAStats, error) {
	sa := d.lookupSPI(spi)
	if sa == nil {
		return ipsec.SAStats{}, fmt.Errorf("stats %08x: no such SA", spi)
	}
	s := sa.Snapshot()
	return ipsec.SAStats{Bytes: s.Bytes, Packets: s.Packets, ReplayDrops: s.ReplayDrops,
		AuthFailures: s.AuthFailures, LastUsed: s.LastUsed}, nil
}

// SACounters returns all counters of an SA, including those ipsec.SAStats
// has no field for (bad padding, policy drops).
func (d *Device) SACounters(spi uint32) (CounterSnapshot, error) {
	sa := d.lookupSPI(spi)
	if sa == nil {
		return CounterSnapshot{}, fmt.Errorf("counters %08x: no such SA", spi)
	}
	return sa.Snapshot(), nil
}

func (d *Device) lookupSPI(spi uint32) *SA {
	if sa := d.inbound.load(spi); sa != nil {
		return sa
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if sa := d.outSPI[spi]; sa != nil {
		return sa
	}
	// An outbound SPI that two peers picked, whose newer pair is gone.
	var found *pair
	for _, pr := range d.pairs {
		if pr.out.SPI == spi && (found == nil || pr.added > found.added) {
			found = pr
		}
	}
	if found != nil {
		return found.out
	}
	return nil
}

// Close implements ipsec.DataPlane: it stops the workers, removes the TUN
// (and with it the routes) and zeroes every key.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Swap(true) {
		return nil
	}
	close(d.stop)
	var errs []error
	for _, s := range append(d.socks, d.raws...) {
		errs = append(errs, s.close())
	}
	errs = append(errs, d.tun.close())
	for id, rt := range d.tuns {
		errs = append(errs, d.closeRouteTUN(rt))
		delete(d.tuns, id)
	}
	d.wg.Wait()
	if d.life.timer != nil {
		d.life.timer.Stop()
	}
	d.life.due = nil
	for spi, pr := range d.pairs {
		pr.in.Zero()
		pr.out.Zero()
		delete(d.pairs, spi)
		d.inbound.remove(spi)
		d.index.remove(pr.out)
	}
	clear(d.outSPI)
	d.table.Store(&saTable{byRemote: d.index})
	d.nl.Close()
	return errors.Join(errs...)
}

func (d *Device) routeAdd(p netip.Prefix) error {
	r := &netlink.Route{LinkIndex: d.link.Attrs().Index, Dst: prefixNet(p), Scope: netlink.SCOPE_LINK}
	if err := d.nl.RouteReplace(r); err != nil {
		return fmt.Errorf("route %v dev %s: %w", p, d.cfg.TUN, err)
	}
	return nil
}

func (d *Device) routeDel(p netip.Prefix) error {
	r := &netlink.Route{LinkIndex: d.link.Attrs().Index, Dst: prefixNet(p), Scope: netlink.SCOPE_LINK}
	if err := d.nl.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("delete route %v dev %s: %w", p, d.cfg.TUN, err)
	}
	return nil
}

func prefixNet(p netip.Prefix) *net.IPNet {
	p = p.Masked()
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// outbound picks the newest live outbound SA of the route tunnel ifID (0:
// of no route tunnel) whose selectors cover the inner packet.
func (t *saTable) outbound(pkt []byte, ifID uint32) *SA {
	var src, dst netip.Addr
	switch pkt[0] >> 4 {
	case 4:
		src, dst = netip.AddrFrom4([4]byte(pkt[12:16])), netip.AddrFrom4([4]byte(pkt[16:20]))
	case 6:
		if len(pkt) < 40 {
			return nil
		}
		src, dst = netip.AddrFrom16([16]byte(pkt[8:24])), netip.AddrFrom16([16]byte(pkt[24:40]))
	default:
		return nil
	}
	if t.byRemote != nil {
		return t.byRemote.find(src, dst, ifID)
	}
	for _, sa := range t.out {
		if sa.IfID == ifID && !sa.dead.Load() && matchAny(sa.RemoteTS, dst) && matchAny(sa.LocalTS, src) {
			return sa
		}
	}
	return nil
}

// SetInterfaces implements ipsec.Interfaces: a route tunnel's interface is
// a TUN of its own (ipsecN), with as many queues and TX workers as the
// Device has workers. Its routes are present while it carries a pair.
func (d *Device) SetInterfaces(want []ipsec.TunnelInterface) error {
	if err := tunnelif.Check(want); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return errors.New("SetInterfaces: device closed")
	}
	missing, gone := d.ifs.Wanted(want)
	var errs []error
	for _, id := range gone {
		errs = append(errs, d.ifs.Remove(id))
		if rt := d.tuns[id]; rt != nil {
			delete(d.tuns, id)
			d.publish()
			errs = append(errs, d.closeRouteTUN(rt))
		}
	}
	for _, w := range missing {
		if w.Name == d.cfg.TUN {
			errs = append(errs, fmt.Errorf("tunnel interface %s: that is the policy TUN's name", w.Name))
			continue
		}
		rt, err := d.openRouteTUN(w)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d.tuns[w.IfID] = rt
	}
	d.publish()
	for _, w := range want {
		if rt := d.tuns[w.IfID]; rt != nil {
			errs = append(errs, d.ifs.Configure(rt.link, w))
		}
	}
	return errors.Join(errs...)
}

// openRouteTUN creates the TUN of a route tunnel and starts its TX
// workers. Called with d.mu held.
func (d *Device) openRouteTUN(w ipsec.TunnelInterface) (*routeTUN, error) {
	rt := &routeTUN{ifID: w.IfID}
	var err error
	if rt.tun, err = openTUN(w.Name, len(d.socks)); err != nil {
		return nil, fmt.Errorf("tunnel interface %s: %w", w.Name, err)
	}
	fail := func(err error) (*routeTUN, error) {
		for _, s := range rt.socks {
			s.close()
		}
		rt.tun.close()
		return nil, fmt.Errorf("tunnel interface %s: %w", w.Name, err)
	}
	if rt.link, err = d.nl.LinkByName(w.Name); err != nil {
		return fail(err)
	}
	var raws []*udpSocket
	for i := range d.socks {
		s, err := d.socks[i].dup()
		if err != nil {
			return fail(err)
		}
		rt.socks = append(rt.socks, s)
		if len(d.raws) > 0 {
			r, err := d.raws[0].dup()
			if err != nil {
				return fail(err)
			}
			rt.socks = append(rt.socks, r)
			raws = append(raws, r)
		} else {
			raws = append(raws, nil)
		}
	}
	for i, q := range rt.tun.queues {
		udp := rt.socks[i]
		if len(d.raws) > 0 {
			udp = rt.socks[2*i]
		}
		rt.wg.Add(1)
		go d.encryptLoop(q, udp, raws[i], w.IfID, &rt.wg)
	}
	return rt, nil
}

// closeRouteTUN stops a route tunnel's TX workers; closing its queues
// removes the interface, and the kernel its routes.
func (d *Device) closeRouteTUN(rt *routeTUN) error {
	err := rt.tun.close()
	rt.wg.Wait()
	for _, s := range rt.socks {
		s.close()
	}
	return err
}
