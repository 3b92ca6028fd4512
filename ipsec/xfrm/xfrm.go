// Package xfrm is the kernel data plane: it installs the CHILD_SAs iked
// negotiates as XFRM states and policies over netlink, so that the kernel's
// ESP carries the traffic and the board's crypto engine (whatever driver the
// crypto API picks) does the work. It owns the SAs and policies it installs,
// the translation of negotiated transforms into kernel algorithms, and the
// kernel's expire and acquire events; Probe tells iked whether the kernel has
// ESP at all, so it can fall back to the userspace plane (ipsec/esp).
//
// ESP-in-UDP (NAT-T) needs, besides the SA's encapsulation, a UDP socket on
// port 4500 with the UDP_ENCAP option: iked owns that socket (it also
// carries IKE), and sets the option with SetESPInUDP.
package xfrm

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/tunnelif"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Options configure a Plane.
type Options struct {
	// Netns is the network namespace to work in; zero value or
	// netns.None() means the caller's. Tests use their own namespaces.
	Netns netns.NsHandle
}

// pair is one installed CHILD_SA: what deleting it needs, not the
// ChildSAs it was made from (about 250 bytes a direction and their keys,
// which the kernel holds; AddPair zeroes the ChildSAs' copies).
type pair struct {
	reqID    uint32
	ifID     uint32 // the route tunnel's XFRM interface, 0 for none
	inSA     saKey
	outSA    saKey
	remoteTS []netip.Prefix // the outbound SA's remote selectors: the routes it came with
	policies []policy
}

type saKey struct {
	dst netip.Addr
	spi uint32
}

// Plane implements ipsec.DataPlane with kernel XFRM.
type Plane struct {
	l      layout
	conn   *conn
	routes *routes // remote subnets in RouteTable; guarded by mu

	mu    sync.Mutex
	pairs map[uint32]*pair // by inbound SPI
	sas   map[uint32]saKey // every SPI we installed, in or out
	traps map[uint32]*trap // by reqid
	ifs   *tunnelif.Table  // route tunnels' XFRM interfaces, by if_id

	events   *monitor
	done     chan struct{} // closed by Close: unblocks event delivery
	expires  chan ipsec.Expire
	acquires chan Acquire
}

var (
	_ ipsec.DataPlane  = (*Plane)(nil)
	_ ipsec.Interfaces = (*Plane)(nil)
)

// New opens the netlink sockets (requests, and the expire/acquire events)
// in the namespace of opts.
func New(opts Options) (*Plane, error) {
	ns := opts.Netns
	if ns == 0 {
		ns = netns.None()
	}
	c, err := dial(ns)
	if err != nil {
		return nil, err
	}
	rt, err := newRoutes(ns)
	if err != nil {
		c.close()
		return nil, err
	}
	p := &Plane{
		l: native, conn: c, routes: rt,
		pairs:    map[uint32]*pair{},
		sas:      map[uint32]saKey{},
		traps:    map[uint32]*trap{},
		ifs:      tunnelif.New(rt.h),
		done:     make(chan struct{}),
		expires:  make(chan ipsec.Expire, 64),
		acquires: make(chan Acquire, 64),
	}
	p.events, err = startMonitor(ns, p.l, p.onExpire, p.onAcquire)
	if err != nil {
		c.close()
		rt.close()
		return nil, err
	}
	return p, nil
}

// Name implements ipsec.DataPlane.
func (p *Plane) Name() string { return "xfrm" }

// AddPair installs the inbound SA, then the outbound SA, then the policies
// (updating them if a rekey already installed them), so that no packet is
// steered to an SA that does not exist yet. On failure, what was installed
// is removed again.
func (p *Plane) AddPair(in, out *ipsec.ChildSA) error {
	if !in.Inbound || out.Inbound {
		return fmt.Errorf("xfrm add pair %08x/%08x: directions swapped", in.SPI, out.SPI)
	}
	if in.Src != out.Dst || in.Dst != out.Src {
		return fmt.Errorf("xfrm add pair %08x/%08x: inbound %v->%v is not the reverse of outbound %v->%v", in.SPI, out.SPI, in.Src, in.Dst, out.Src, out.Dst)
	}
	inSt, err := buildState(in)
	if err != nil {
		return fmt.Errorf("xfrm add pair: %w", err)
	}
	outSt, err := buildState(out)
	if err != nil {
		return fmt.Errorf("xfrm add pair: %w", err)
	}
	pols, err := buildPolicies(in, out)
	if err != nil {
		return fmt.Errorf("xfrm add pair: %w", err)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if _, dup := p.pairs[in.SPI]; dup {
		return fmt.Errorf("xfrm add pair: inbound SPI %08x already installed", in.SPI)
	}
	if out.IfID != 0 && !p.ifs.Has(out.IfID) {
		return fmt.Errorf("xfrm add pair %08x/%08x: no tunnel interface with if_id %d", in.SPI, out.SPI, out.IfID)
	}
	if tr := p.trapOver(pols); tr != nil && tr.acquireSeq != 0 && tr.peer == outSt.Dst {
		// The kernel holds a larval SA for the trap's acquire; the
		// outbound SA that answers it replaces it (matched by sequence
		// number, since the pair's reqid is not the trap's). Left alone
		// it would swallow the trap's traffic without a new acquire for
		// up to 30 s (net.core.xfrm_acq_expires) after this pair goes.
		outSt.Seq, tr.acquireSeq = tr.acquireSeq, 0
	}
	if err := p.addSA(inSt); err != nil {
		return err
	}
	if err := p.addSA(outSt); err != nil {
		p.delSA(saKey{inSt.Dst, inSt.SPI})
		return err
	}
	for i := range pols {
		if err := p.updatePolicy(&pols[i]); err != nil {
			if !p.reqidInUse(in.ReqID) {
				for j := range i {
					p.releasePolicy(&pols[j])
				}
			}
			p.delSA(saKey{inSt.Dst, inSt.SPI})
			p.delSA(saKey{outSt.Dst, outSt.SPI})
			return err
		}
	}
	if out.IfID != 0 {
		// A route tunnel: its interface's routes steer the traffic (the
		// policies carry its if_id), and come in with the first pair.
		err = p.ifs.PairAdded(out.IfID)
	} else {
		err = p.routes.add(out.Dst, out.LocalTS, out.RemoteTS)
	}
	if err != nil {
		// Without a route to the peer the SAs could carry nothing:
		// undo them and say why.
		err = fmt.Errorf("xfrm add pair %08x/%08x: %w", in.SPI, out.SPI, err)
		if !p.reqidInUse(in.ReqID) {
			for i := range pols {
				p.releasePolicy(&pols[i])
			}
		}
		p.delSA(saKey{inSt.Dst, inSt.SPI})
		p.delSA(saKey{outSt.Dst, outSt.SPI})
		return err
	}
	pr := &pair{
		reqID:    in.ReqID,
		ifID:     out.IfID,
		inSA:     saKey{inSt.Dst, inSt.SPI},
		outSA:    saKey{outSt.Dst, outSt.SPI},
		remoteTS: out.RemoteTS,
		policies: pols,
	}
	p.pairs[in.SPI] = pr
	p.sas[in.SPI] = pr.inSA
	p.sas[out.SPI] = pr.outSA
	// The kernel holds the keys now; the states built for it shared
	// the ChildSAs' key slices.
	in.Zero()
	out.Zero()
	return nil
}

func (p *Plane) addSA(st *state) error {
	msg := p.l.encodeNewSA(st)
	_, err := p.conn.request(msgNewSA, true, msg)
	clear(msg)
	if err != nil {
		return fmt.Errorf("xfrm add SA %08x %v->%v: %w", st.SPI, st.Src, st.Dst, err)
	}
	return nil
}

func (p *Plane) delSA(k saKey) error {
	_, err := p.conn.request(msgDelSA, true, encodeUsersaID(k.dst, k.spi))
	if err != nil && !errors.Is(err, unix.ESRCH) { // ESRCH: already gone (hard expire)
		return fmt.Errorf("xfrm delete SA %08x: %w", k.spi, err)
	}
	return nil
}

func (p *Plane) updatePolicy(pol *policy) error {
	if _, err := p.conn.request(msgUpdPolicy, true, p.l.encodePolicy(pol)); err != nil {
		return fmt.Errorf("xfrm policy %s %v->%v reqid %d: %w", dirName(pol.Dir), pol.Sel.Src, pol.Sel.Dst, pol.ReqID, err)
	}
	return nil
}

func (p *Plane) delPolicy(pol *policy) error {
	_, err := p.conn.request(msgDelPolicy, true, encodePolicyID(pol))
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("xfrm delete policy %s %v->%v: %w", dirName(pol.Dir), pol.Sel.Src, pol.Sel.Dst, err)
	}
	return nil
}

func dirName(d uint8) string {
	switch d {
	case policyIn:
		return "in"
	case policyOut:
		return "out"
	case policyFwd:
		return "fwd"
	}
	return fmt.Sprintf("dir%d", d)
}

// reqidInUse reports whether another installed pair or a trap still needs
// the policies of reqid. Called with p.mu held.
func (p *Plane) reqidInUse(reqid uint32) bool {
	for _, pr := range p.pairs {
		if pr.reqID == reqid {
			return true
		}
	}
	_, trapped := p.traps[reqid]
	return trapped
}

// DeletePair removes both SAs of the pair with the given inbound SPI, and
// its policies unless a newer pair (a rekey) or a trap of the same reqid
// still uses them. (The pair's keys were zeroed when it was installed.)
func (p *Plane) DeletePair(inboundSPI uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, ok := p.pairs[inboundSPI]
	if !ok {
		return fmt.Errorf("xfrm delete pair: no pair with inbound SPI %08x", inboundSPI)
	}
	delete(p.pairs, inboundSPI)
	delete(p.sas, pr.inSA.spi)
	delete(p.sas, pr.outSA.spi)
	var errs []error
	if !p.reqidInUse(pr.reqID) {
		for i := range pr.policies {
			errs = append(errs, p.releasePolicy(&pr.policies[i]))
		}
	}
	errs = append(errs, p.delSA(pr.outSA), p.delSA(pr.inSA))
	if pr.ifID != 0 {
		errs = append(errs, p.ifs.PairDeleted(pr.ifID))
	} else {
		errs = append(errs, p.routes.del(pr.remoteTS))
	}
	return errors.Join(errs...)
}

// Stats reads the kernel's counters of one SA (either direction).
func (p *Plane) Stats(spi uint32) (ipsec.SAStats, error) {
	p.mu.Lock()
	k, ok := p.sas[spi]
	p.mu.Unlock()
	if !ok {
		return ipsec.SAStats{}, fmt.Errorf("xfrm stats: SPI %08x not installed by us", spi)
	}
	replies, err := p.conn.request(msgGetSA, false, encodeUsersaID(k.dst, spi))
	if err != nil {
		return ipsec.SAStats{}, fmt.Errorf("xfrm stats SA %08x: %w", spi, err)
	}
	if len(replies) == 0 {
		return ipsec.SAStats{}, fmt.Errorf("xfrm stats SA %08x: empty answer", spi)
	}
	info, err := p.l.decodeUsersaInfo(replies[0])
	if err != nil {
		return ipsec.SAStats{}, fmt.Errorf("xfrm stats SA %08x: %w", spi, err)
	}
	st := ipsec.SAStats{
		Bytes: info.Bytes, Packets: info.Packets,
		ReplayDrops: uint64(info.ReplayDrops), AuthFailures: uint64(info.IntegrityFailed),
	}
	if info.UseTime != 0 {
		st.LastUsed = time.Unix(int64(info.UseTime), 0)
	}
	return st, nil
}

// Expires implements ipsec.DataPlane: soft and hard expiries of the SAs
// installed through this Plane, as the kernel reports them.
func (p *Plane) Expires() <-chan ipsec.Expire { return p.expires }

// Acquires delivers the kernel's requests for SAs on trapped policies.
func (p *Plane) Acquires() <-chan Acquire { return p.acquires }

// Close stops the event monitor and closes the sockets. Installed SAs and
// policies stay in the kernel: iked decides whether a restart keeps them.
func (p *Plane) Close() error {
	close(p.done)
	p.events.stop()
	p.conn.close()
	p.routes.close()
	return nil
}

func (p *Plane) onExpire(e expireMsg) {
	p.mu.Lock()
	_, ours := p.sas[e.SA.SPI]
	p.mu.Unlock()
	if !ours {
		return
	}
	// Block rather than drop: a lost soft expire is a missed rekey. While
	// we block, the kernel queues events in the socket buffer.
	select {
	case p.expires <- ipsec.Expire{SPI: e.SA.SPI, Hard: e.Hard}:
	case <-p.done:
	}
}

func (p *Plane) onAcquire(a Acquire) {
	p.mu.Lock()
	tr, ours := p.traps[a.ReqID]
	if ours {
		tr.acquireSeq = a.Seq
	}
	p.mu.Unlock()
	if !ours {
		return
	}
	select {
	case p.acquires <- a:
	case <-p.done:
	}
}

// trap is a tunnel waiting for traffic: its outbound policies, with a
// template but no SA, and its remote subnets' routes.
type trap struct {
	policies   []policy
	peer       netip.Addr
	remote     []netip.Prefix
	acquireSeq uint32 // of the kernel's last acquire: the larval SA to replace
}

// Trap installs the outbound policies of a tunnel that is negotiated on
// traffic, and the routes of its remote subnets in RouteTable, as for an
// installed pair. No SA exists yet, so the kernel drops the first packet
// (net.core.xfrm_larval_drop, the default) and sends an acquire for
// reqid, delivered on Acquires. AddPair later installs the policies of the
// negotiated pair, whatever its reqid, over the trap; when the last pair
// on them goes, DeletePair puts the trap's policies back.
func (p *Plane) Trap(reqid uint32, local, remote netip.Addr, localTS, remoteTS []netip.Prefix) error {
	if reqid == 0 {
		return fmt.Errorf("xfrm trap: reqid 0")
	}
	out := &ipsec.ChildSA{ReqID: reqid, Src: local, Dst: remote, LocalTS: localTS, RemoteTS: remoteTS}
	in := &ipsec.ChildSA{ReqID: reqid, Src: remote, Dst: local, Inbound: true}
	all, err := buildPolicies(in, out)
	if err != nil {
		return fmt.Errorf("xfrm trap reqid %d: %w", reqid, err)
	}
	var pols []policy
	for _, pol := range all {
		if pol.Dir == policyOut {
			pols = append(pols, pol)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, dup := p.traps[reqid]; dup {
		return fmt.Errorf("xfrm trap: reqid %d already trapped", reqid)
	}
	var done []policy
	undo := func() {
		for i := range done {
			if !p.pairUses(&done[i]) {
				p.delPolicy(&done[i])
			}
		}
	}
	for i := range pols {
		if p.pairUses(&pols[i]) {
			continue // an installed pair carries the traffic; DeletePair restores the trap
		}
		if err := p.updatePolicy(&pols[i]); err != nil {
			undo()
			return fmt.Errorf("xfrm trap reqid %d: %w", reqid, err)
		}
		done = append(done, pols[i])
	}
	if err := p.routes.add(remote, localTS, remoteTS); err != nil {
		undo()
		return fmt.Errorf("xfrm trap reqid %d: %w", reqid, err)
	}
	p.traps[reqid] = &trap{policies: pols, peer: remote.Unmap(), remote: remoteTS}
	return nil
}

// Untrap removes a trap and its hold on the routes. Policies an installed
// pair uses stay, and go with the pair.
func (p *Plane) Untrap(reqid uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	tr, ok := p.traps[reqid]
	if !ok {
		return fmt.Errorf("xfrm untrap: no trap for reqid %d", reqid)
	}
	delete(p.traps, reqid)
	var errs []error
	for i := range tr.policies {
		if !p.pairUses(&tr.policies[i]) && p.trapPolicy(&tr.policies[i]) == nil {
			errs = append(errs, p.delPolicy(&tr.policies[i]))
		}
	}
	errs = append(errs, p.routes.del(tr.remote))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("xfrm untrap reqid %d: %w", reqid, err)
	}
	return nil
}

// Trapped reports whether reqid has a trap installed.
func (p *Plane) Trapped(reqid uint32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.traps[reqid]
	return ok
}

// releasePolicy removes a pair's policy that no pair needs any more, or
// puts back the trap it replaced, so that the next packet asks for an SA
// again. Called with p.mu held.
func (p *Plane) releasePolicy(pol *policy) error {
	if tp := p.trapPolicy(pol); tp != nil {
		return p.updatePolicy(tp)
	}
	return p.delPolicy(pol)
}

// samePolicy: the kernel names a policy by selector, direction and if_id.
func samePolicy(a, b *policy) bool { return a.Sel == b.Sel && a.Dir == b.Dir && a.IfID == b.IfID }

// trapPolicy returns a trap's policy with pol's selector and direction.
// Called with p.mu held.
func (p *Plane) trapPolicy(pol *policy) *policy {
	for _, tr := range p.traps {
		for i := range tr.policies {
			if samePolicy(&tr.policies[i], pol) {
				return &tr.policies[i]
			}
		}
	}
	return nil
}

// pairUses reports whether an installed pair has a policy with pol's
// selector and direction. Called with p.mu held.
func (p *Plane) pairUses(pol *policy) bool {
	for _, pr := range p.pairs {
		for i := range pr.policies {
			if samePolicy(&pr.policies[i], pol) {
				return true
			}
		}
	}
	return false
}

// trapOver returns the trap whose outbound policy a pair with pols
// replaces, if any. Called with p.mu held.
func (p *Plane) trapOver(pols []policy) *trap {
	for _, tr := range p.traps {
		for i := range tr.policies {
			for j := range pols {
				if samePolicy(&tr.policies[i], &pols[j]) {
					return tr
				}
			}
		}
	}
	return nil
}
