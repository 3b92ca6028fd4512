package xfrm

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// RouteTable is the routing table the kernel plane puts remote subnets in,
// looked up by a rule of the same priority before the main table, as
// strongSwan does with its table 220. A policy only catches a packet that
// the kernel could route: on a box with no default route, traffic for a
// remote subnet would otherwise be dropped as unreachable before the XFRM
// lookup. Keeping the routes in their own table also keeps them apart from
// netd's, which owns the main table.
const RouteTable = 220

// routes keeps the remote-subnet routes of the installed pairs, counted,
// since pairs of a rekey (and several tunnels) can share a subnet.
type routes struct {
	h     *netlink.Handle
	count map[netip.Prefix]int
	rule  bool
}

func newRoutes(ns netns.NsHandle) (*routes, error) {
	var h *netlink.Handle
	var err error
	if ns.IsOpen() {
		h, err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	} else {
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	}
	if err != nil {
		return nil, fmt.Errorf("xfrm routes: netlink: %w", err)
	}
	return &routes{h: h, count: map[netip.Prefix]int{}}, nil
}

// add routes each remote subnet of a pair towards its peer, through the
// same interface and gateway as the peer itself, with a source address of
// ours inside the local subnets when there is one (so that the box's own
// traffic to the far side is protected too).
func (r *routes) add(peer netip.Addr, local, remote []netip.Prefix) error {
	if err := r.ensureRule(); err != nil {
		return err
	}
	via, err := r.h.RouteGet(peer.AsSlice())
	if err != nil || len(via) == 0 {
		return fmt.Errorf("xfrm routes: no route to the peer %v: %v", peer, err)
	}
	src := r.sourceWithin(local)
	for _, ts := range remote {
		ts = ts.Masked()
		if r.count[ts] == 0 {
			rt := &netlink.Route{
				Dst:       &net.IPNet{IP: ts.Addr().AsSlice(), Mask: net.CIDRMask(ts.Bits(), ts.Addr().BitLen())},
				Gw:        via[0].Gw,
				LinkIndex: via[0].LinkIndex,
				Table:     RouteTable,
			}
			if src.IsValid() {
				rt.Src = src.AsSlice()
			}
			if err := r.h.RouteReplace(rt); err != nil {
				return fmt.Errorf("xfrm routes: route %v via the peer %v: %w", ts, peer, err)
			}
		}
		r.count[ts]++
	}
	return nil
}

// del drops one pair's hold on its remote subnets; the last one removes
// the route.
func (r *routes) del(remote []netip.Prefix) error {
	var errs []error
	for _, ts := range remote {
		ts = ts.Masked()
		if r.count[ts] == 0 {
			continue
		}
		r.count[ts]--
		if r.count[ts] > 0 {
			continue
		}
		delete(r.count, ts)
		rt := &netlink.Route{
			Dst:   &net.IPNet{IP: ts.Addr().AsSlice(), Mask: net.CIDRMask(ts.Bits(), ts.Addr().BitLen())},
			Table: RouteTable,
		}
		if err := r.h.RouteDel(rt); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("xfrm routes: remove %v: %w", ts, err))
		}
	}
	return errors.Join(errs...)
}

func (r *routes) ensureRule() error {
	if r.rule {
		return nil
	}
	rule := netlink.NewRule()
	rule.Table = RouteTable
	rule.Priority = RouteTable
	rule.Family = unix.AF_INET
	if err := r.h.RuleAdd(rule); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("xfrm routes: rule for table %d: %w", RouteTable, err)
	}
	r.rule = true
	return nil
}

// sourceWithin returns an address of this box inside one of the prefixes.
func (r *routes) sourceWithin(ps []netip.Prefix) netip.Addr {
	addrs, err := r.h.AddrList(nil, unix.AF_INET)
	if err != nil {
		return netip.Addr{}
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		for _, p := range ps {
			if p.Contains(ip) {
				return ip
			}
		}
	}
	return netip.Addr{}
}

func (r *routes) close() {
	for ts := range r.count {
		r.count[ts] = 1
		r.del([]netip.Prefix{ts})
	}
	r.h.Close()
}
