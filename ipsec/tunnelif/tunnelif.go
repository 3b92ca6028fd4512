// Package tunnelif keeps the interfaces of route-based tunnels (ipsecN) for
// both data planes: their MTU, inner addresses and state, and the routes
// through each, which are present only while the tunnel carries at least
// one CHILD_SA. How an interface comes to exist is the plane's business:
// an XFRM interface with an if_id (ipsec/xfrm) or a TUN (ipsec/esp).
//
// Routes are added with protocol RouteProtocol in the main table, so
// `ip route` shows them as iked's and netd, which owns the other static
// routes (protocol static), leaves them alone.
package tunnelif

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/ipsec"
)

// RouteProtocol marks the routes through tunnel interfaces (rtnetlink
// protocol numbers above 4 are free for daemons; 0x9b is unused by
// iproute2's list).
const RouteProtocol = 0x9b

// Table is the set of tunnel interfaces of one data plane, by if_id. It is
// not safe for concurrent use: the plane calls it under its own lock.
type Table struct {
	nl  *netlink.Handle
	ifs map[uint32]*entry
}

type entry struct {
	want   ipsec.TunnelInterface
	link   netlink.Link
	pairs  int                 // installed CHILD_SAs
	routed []ipsec.TunnelRoute // what is in the kernel now
}

// New returns an empty table working through nl (bound to the plane's
// namespace).
func New(nl *netlink.Handle) *Table {
	return &Table{nl: nl, ifs: map[uint32]*entry{}}
}

// Has reports whether an interface with ifID is configured.
func (t *Table) Has(ifID uint32) bool { return t.ifs[ifID] != nil }

// Get returns the interface with ifID as last configured.
func (t *Table) Get(ifID uint32) (ipsec.TunnelInterface, bool) {
	e := t.ifs[ifID]
	if e == nil {
		return ipsec.TunnelInterface{}, false
	}
	return e.want, true
}

// Wanted returns the interfaces of want that are not in the table and the
// if_ids in the table that want leaves out: what the plane creates and
// removes before calling Configure and Remove.
func (t *Table) Wanted(want []ipsec.TunnelInterface) (missing []ipsec.TunnelInterface, gone []uint32) {
	ids := map[uint32]bool{}
	for _, w := range want {
		ids[w.IfID] = true
		if e := t.ifs[w.IfID]; e == nil || e.want.Name != w.Name {
			missing = append(missing, w)
		}
	}
	for id, e := range t.ifs {
		if !ids[id] || slices.ContainsFunc(missing, func(w ipsec.TunnelInterface) bool { return w.IfID == id && w.Name != e.want.Name }) {
			gone = append(gone, id)
		}
	}
	return missing, gone
}

// Check refuses a set of interfaces with a zero or repeated if_id or name.
func Check(want []ipsec.TunnelInterface) error {
	ids, names := map[uint32]bool{}, map[string]bool{}
	for _, w := range want {
		switch {
		case w.IfID == 0:
			return fmt.Errorf("tunnel interface %s: if_id 0", w.Name)
		case w.Name == "" || len(w.Name) >= unix.IFNAMSIZ:
			return fmt.Errorf("tunnel interface %q: bad name", w.Name)
		case ids[w.IfID]:
			return fmt.Errorf("tunnel interface %s: if_id %d used twice", w.Name, w.IfID)
		case names[w.Name]:
			return fmt.Errorf("tunnel interface %s named twice", w.Name)
		}
		ids[w.IfID], names[w.Name] = true, true
	}
	return nil
}

// Configure makes link (the plane's interface for want) match want: MTU,
// addresses, up, and the routes if the tunnel carries an SA.
func (t *Table) Configure(link netlink.Link, want ipsec.TunnelInterface) error {
	var errs []error
	e := t.ifs[want.IfID]
	if e == nil {
		e = &entry{}
		t.ifs[want.IfID] = e
		// An interface taken over from an earlier run (the kernel plane
		// keeps an XFRM interface of the same name and if_id) may still
		// carry that run's routes: with no SA yet they would hold the
		// destinations that another tunnel should carry.
		errs = append(errs, t.flushStale(link))
	}
	e.want, e.link = want, link
	if want.MTU != 0 && link.Attrs().MTU != want.MTU {
		if err := t.nl.LinkSetMTU(link, want.MTU); err != nil {
			errs = append(errs, fmt.Errorf("tunnel interface %s: MTU %d: %w", want.Name, want.MTU, err))
		}
	}
	// No IPv6 link-local address (router solicitations and MLD reports
	// into the tunnel help nobody); kernels without IPv6 refuse, which is
	// then moot.
	_ = t.nl.LinkSetIP6AddrGenMode(link, 1)
	errs = append(errs, t.addresses(e))
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := t.nl.LinkSetUp(link); err != nil {
			errs = append(errs, fmt.Errorf("tunnel interface %s: up: %w", want.Name, err))
		}
	}
	errs = append(errs, t.route(e))
	return errors.Join(errs...)
}

func (t *Table) addresses(e *entry) error {
	have, err := t.nl.AddrList(e.link, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("tunnel interface %s: list addresses: %w", e.want.Name, err)
	}
	var errs []error
	present := map[netip.Prefix]bool{}
	for _, a := range have {
		ip, _ := netip.AddrFromSlice(a.IP)
		ones, _ := a.Mask.Size()
		p := netip.PrefixFrom(ip.Unmap(), ones)
		if p.Addr().Is6() && p.Addr().IsLinkLocalUnicast() {
			continue
		}
		if slices.Contains(e.want.Addresses, p) {
			present[p] = true
			continue
		}
		if err := t.nl.AddrDel(e.link, &a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			errs = append(errs, fmt.Errorf("tunnel interface %s: remove address %s: %w", e.want.Name, p, err))
		}
	}
	for _, p := range e.want.Addresses {
		if present[p] {
			continue
		}
		a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if err := t.nl.AddrAdd(e.link, a); err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("tunnel interface %s: add address %s: %w", e.want.Name, p, err))
		}
	}
	return errors.Join(errs...)
}

// Remove forgets the interface with ifID after taking its routes out; the
// plane deletes the link itself.
func (t *Table) Remove(ifID uint32) error {
	e := t.ifs[ifID]
	if e == nil {
		return nil
	}
	e.pairs = 0
	err := t.route(e)
	delete(t.ifs, ifID)
	return err
}

// PairAdded notes a CHILD_SA installed on the interface with ifID; the
// first brings its routes in.
func (t *Table) PairAdded(ifID uint32) error {
	e := t.ifs[ifID]
	if e == nil {
		return fmt.Errorf("no tunnel interface with if_id %d", ifID)
	}
	e.pairs++
	return t.route(e)
}

// PairDeleted notes a CHILD_SA gone; when it was the last, the routes go:
// the destinations fall back on other routes (another tunnel's).
func (t *Table) PairDeleted(ifID uint32) error {
	e := t.ifs[ifID]
	if e == nil {
		return nil
	}
	if e.pairs > 0 {
		e.pairs--
	}
	return t.route(e)
}

// Carrying reports whether the interface with ifID has a CHILD_SA.
func (t *Table) Carrying(ifID uint32) bool {
	e := t.ifs[ifID]
	return e != nil && e.pairs > 0
}

// route makes the kernel's routes through e what they should be: want's
// while e carries an SA, none otherwise.
func (t *Table) route(e *entry) error {
	var want []ipsec.TunnelRoute
	if e.pairs > 0 {
		want = e.want.Routes
	}
	var errs []error
	for _, r := range e.routed {
		if slices.Contains(want, r) {
			continue
		}
		if err := t.nl.RouteDel(t.kernelRoute(e, r)); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("tunnel interface %s: remove route %s: %w", e.want.Name, r.Destination, err))
		}
	}
	var now []ipsec.TunnelRoute
	for _, r := range want {
		if err := t.nl.RouteReplace(t.kernelRoute(e, r)); err != nil {
			errs = append(errs, fmt.Errorf("tunnel interface %s: route %s metric %d: %w", e.want.Name, r.Destination, r.Metric, err))
			continue
		}
		now = append(now, r)
	}
	e.routed = now
	return errors.Join(errs...)
}

func (t *Table) kernelRoute(e *entry, r ipsec.TunnelRoute) *netlink.Route {
	d := r.Destination.Masked()
	kr := &netlink.Route{
		LinkIndex: e.link.Attrs().Index,
		Dst:       &net.IPNet{IP: d.Addr().AsSlice(), Mask: net.CIDRMask(d.Bits(), d.Addr().BitLen())},
		Priority:  r.Metric,
		Protocol:  RouteProtocol,
		Table:     unix.RT_TABLE_MAIN,
	}
	if r.Gateway.IsValid() {
		kr.Gw = r.Gateway.AsSlice()
	} else {
		kr.Scope = netlink.SCOPE_LINK
	}
	return kr
}

// flushStale removes the routes of ours (RouteProtocol) through link.
func (t *Table) flushStale(link netlink.Link) error {
	rs, err := t.nl.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: link.Attrs().Index, Protocol: RouteProtocol},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("tunnel interface %s: list routes: %w", link.Attrs().Name, err)
	}
	var errs []error
	for i := range rs {
		if err := t.nl.RouteDel(&rs[i]); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("tunnel interface %s: remove a stale route: %w", link.Attrs().Name, err))
		}
	}
	return errors.Join(errs...)
}
