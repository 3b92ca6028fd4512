package netd

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Ownership, decided once so that a restart of netd converges on the same
// state it would have built from scratch:
//
//   - Addresses: netd is authoritative on the interfaces Desired.Links
//     names. Every address on them that is not desired is removed, except
//     IPv6 link-local addresses (the kernel's own). Interfaces netd does not
//     manage are never touched. On the appliance nothing else configures
//     addresses, and an address left over from an older configuration (or
//     from before a netd restart) would otherwise stay forever.
//   - Routes: netd owns the main-table routes whose protocol is
//     RouteProtocol (RTPROT_STATIC), on any interface, and only those: the
//     kernel's connected routes and routes someone else added with another
//     protocol are left alone.

// RouteProtocol marks the routes netd installs (ip route shows "proto static").
const RouteProtocol = unix.RTPROT_STATIC

// Netlink reconciles links, addresses, routes and forwarding in one network
// namespace.
type Netlink struct {
	h  *netlink.Handle
	ns netns.NsHandle // -1: the namespace netd runs in
}

// NewNetlink opens a netlink handle for the current network namespace.
func NewNetlink() (*Netlink, error) {
	h, err := netlink.NewHandle()
	if err != nil {
		return nil, fmt.Errorf("netlink: open: %w", err)
	}
	return &Netlink{h: h, ns: -1}, nil
}

// NewNetlinkAt opens a netlink handle for another network namespace (tests
// use it to drive a router namespace from outside).
func NewNetlinkAt(ns netns.NsHandle) (*Netlink, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink: open in namespace: %w", err)
	}
	return &Netlink{h: h, ns: ns}, nil
}

// Close releases the handle.
func (n *Netlink) Close() { n.h.Close() }

// Reconcile makes links, addresses, routes and forwarding match d, changing
// only what differs. It does as much as it can: a missing interface does not
// keep the others from being configured. The errors are joined.
func (n *Netlink) Reconcile(d *Desired) error {
	var errs []error
	links := map[string]netlink.Link{}
	for _, want := range d.Links {
		l, err := n.reconcileLink(want)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		links[want.Name] = l
	}
	for _, want := range d.Links {
		l := links[want.Name]
		if l == nil {
			continue
		}
		var addrs []netip.Prefix
		for _, a := range d.Addresses {
			if a.Link == want.Name {
				addrs = append(addrs, a.Prefix)
			}
		}
		if err := n.reconcileAddresses(l, addrs, want.Up); err != nil {
			errs = append(errs, err)
		}
	}
	if err := n.reconcileRoutes(d.Routes, links); err != nil {
		errs = append(errs, err)
	}
	if err := n.setForwarding(d.Forwarding); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (n *Netlink) reconcileLink(want Link) (netlink.Link, error) {
	l, err := n.h.LinkByName(want.Name)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", want.Name, err)
	}
	a := l.Attrs()
	if want.MTU != 0 && a.MTU != want.MTU {
		if err := n.h.LinkSetMTU(l, want.MTU); err != nil {
			return l, fmt.Errorf("link %s: set MTU %d: %w", want.Name, want.MTU, err)
		}
	}
	isUp := a.Flags&net.FlagUp != 0
	switch {
	case want.Up && !isUp:
		if err := n.h.LinkSetUp(l); err != nil {
			return l, fmt.Errorf("link %s: set up: %w", want.Name, err)
		}
	case !want.Up && isUp:
		if err := n.h.LinkSetDown(l); err != nil {
			return l, fmt.Errorf("link %s: set down: %w", want.Name, err)
		}
	}
	return l, nil
}

// reconcileAddresses makes l's addresses want; with announce, the IPv4
// addresses it adds are announced (announce.go).
func (n *Netlink) reconcileAddresses(l netlink.Link, want []netip.Prefix, announce bool) error {
	name := l.Attrs().Name
	have, err := retryDump(func() ([]netlink.Addr, error) { return n.h.AddrList(l, netlink.FAMILY_ALL) })
	if err != nil {
		return fmt.Errorf("link %s: list addresses: %w", name, err)
	}
	var errs []error
	present := map[netip.Prefix]bool{}
	// Remove first: deleting a primary IPv4 address takes its secondaries
	// with it (unless promote_secondaries), so a wanted address must not be
	// added as a secondary of one about to go.
	for _, a := range have {
		p, ok := prefixOf(a.IPNet)
		if !ok {
			continue
		}
		if p.Addr().Is6() && p.Addr().IsLinkLocalUnicast() {
			continue
		}
		if slices.Contains(want, p) {
			present[p] = true
			continue
		}
		if err := n.h.AddrDel(l, &a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			errs = append(errs, fmt.Errorf("link %s: remove address %s: %w", name, p, err))
		}
	}
	var added []netip.Addr
	for _, p := range want {
		if present[p] {
			continue
		}
		if err := n.h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(p)}); err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("link %s: add address %s: %w", name, p, err))
			continue
		}
		if p.Addr().Is4() {
			added = append(added, p.Addr())
		}
	}
	if announce && len(added) > 0 {
		n.announce(name, added)
	}
	return errors.Join(errs...)
}

// routeKey identifies a route for the diff. Link is empty when the desired
// route leaves the choice of interface to the kernel.
type routeKey struct {
	dst    netip.Prefix
	gw     netip.Addr
	link   int
	metric int
}

func (n *Netlink) reconcileRoutes(want []Route, links map[string]netlink.Link) error {
	have, err := retryDump(func() ([]netlink.Route, error) {
		return n.h.RouteListFiltered(netlink.FAMILY_ALL,
			&netlink.Route{Table: unix.RT_TABLE_MAIN, Protocol: RouteProtocol},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
	})
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	var errs []error
	wantKeys := make([]routeKey, 0, len(want))
	for _, r := range want {
		k := routeKey{dst: r.Destination.Masked(), gw: r.Gateway, metric: r.Metric}
		if r.Link != "" {
			l := links[r.Link]
			if l == nil {
				errs = append(errs, fmt.Errorf("route %s: interface %s is not there", r.Destination, r.Link))
				k.link = -1 // never matches: an existing route stays until the link is back
			} else {
				k.link = l.Attrs().Index
			}
		}
		wantKeys = append(wantKeys, k)
	}
	matches := func(k routeKey, r netlink.Route) bool {
		dst := defaultRoute(r.Family)
		if r.Dst != nil {
			if p, ok := prefixOf(r.Dst); ok {
				dst = p
			}
		}
		gw, _ := netip.AddrFromSlice(r.Gw)
		return k.dst == dst && k.gw == gw.Unmap() && k.metric == r.Priority && (k.link == 0 || k.link == r.LinkIndex)
	}
	present := make([]bool, len(wantKeys))
	for _, r := range have {
		found := false
		for i, k := range wantKeys {
			if !present[i] && matches(k, r) {
				present[i], found = true, true
				break
			}
		}
		if !found {
			if err := n.h.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("remove route %s: %w", r.Dst, err))
			}
		}
	}
	for i, k := range wantKeys {
		if present[i] || k.link == -1 {
			continue
		}
		r := &netlink.Route{Dst: ipNet(k.dst), Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN, Priority: k.metric, LinkIndex: k.link}
		if k.gw.IsValid() {
			r.Gw = k.gw.AsSlice()
		} else {
			r.Scope = netlink.SCOPE_LINK
		}
		if err := n.h.RouteAdd(r); err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("add route %s via %s (%s): %w", k.dst, k.gw, want[i].Path, err))
		}
	}
	return errors.Join(errs...)
}

// retryDump repeats a netlink dump the kernel interrupted because the
// table changed meanwhile (a DHCP lease arriving, a link flapping): a
// partial list would make the diff remove or re-add the wrong things.
func retryDump[T any](dump func() ([]T, error)) ([]T, error) {
	for range 4 {
		out, err := dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return dump()
}

func defaultRoute(family int) netip.Prefix {
	if family == unix.AF_INET6 {
		return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
}

// setForwarding writes the forwarding sysctls in netd's namespace (the
// files under /proc/sys/net belong to the namespace of the writer).
func (n *Netlink) setForwarding(on bool) error {
	v := []byte("0\n")
	if on {
		v = []byte("1\n")
	}
	write := func() error {
		for _, f := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"} {
			cur, err := os.ReadFile(f)
			if err == nil && string(cur) == string(v) {
				continue
			}
			if err := os.WriteFile(f, v, 0o644); err != nil {
				return fmt.Errorf("forwarding: %w", err)
			}
		}
		return nil
	}
	if n.ns == -1 {
		return write()
	}
	return inNetNS(n.ns, write)
}

// inNetNS runs f on a thread that entered ns, then moves the thread back.
// Should moving back fail, the thread stays locked and exits with the
// goroutine rather than returning to the scheduler in the wrong namespace.
// Moving back matters: if the goroutine ran on the main thread, which
// never exits, the whole process would stay listed in ns (ip netns pids).
func inNetNS(ns netns.NsHandle, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("current network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("enter network namespace: %w", err)
			return
		}
		err = f()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// Status reads the state and counters of the given links.
func (n *Netlink) Status(want []Link) []netdapi.LinkStatus {
	out := make([]netdapi.LinkStatus, 0, len(want))
	for _, w := range want {
		st := netdapi.LinkStatus{Name: w.Name, Role: w.Role, Addresses: []string{}}
		if l, err := n.h.LinkByName(w.Name); err == nil {
			n.fillStatus(&st, l)
		}
		out = append(out, st)
	}
	return out
}

// Links reads every link of the namespace, configured or not, sorted by
// name; roles gives the configured ones' roles.
func (n *Netlink) Links(roles map[string]string) ([]netdapi.LinkStatus, error) {
	links, err := retryDump(n.h.LinkList)
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	out := make([]netdapi.LinkStatus, 0, len(links))
	for _, l := range links {
		st := netdapi.LinkStatus{Name: l.Attrs().Name, Role: roles[l.Attrs().Name], Addresses: []string{}}
		n.fillStatus(&st, l)
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b netdapi.LinkStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// fillStatus sets what the kernel says of l: state, MTU, counters,
// addresses, and whether it is a port.
func (n *Netlink) fillStatus(st *netdapi.LinkStatus, l netlink.Link) {
	a := l.Attrs()
	st.Present = true
	st.Port = isPort(a)
	st.Up = a.Flags&net.FlagUp != 0
	st.Operstate = a.OperState.String()
	st.MTU = a.MTU
	if len(a.HardwareAddr) > 0 {
		st.MAC = a.HardwareAddr.String()
	}
	if s := a.Statistics; s != nil {
		st.RxBytes, st.TxBytes = s.RxBytes, s.TxBytes
		st.RxPackets, st.TxPackets = s.RxPackets, s.TxPackets
		st.RxErrors, st.TxErrors = s.RxErrors, s.TxErrors
		st.RxDropped, st.TxDropped = s.RxDropped, s.TxDropped
	}
	if addrs, err := n.h.AddrList(l, netlink.FAMILY_ALL); err == nil {
		for _, ad := range addrs {
			if p, ok := prefixOf(ad.IPNet); ok {
				st.Addresses = append(st.Addresses, p.String())
			}
		}
	}
}

// isPort says whether a link is a network port: one with a device behind
// it, a NIC on the PCI bus, USB or virtio (the kernel's
// IFLA_PARENT_DEV_NAME, what /sys/class/net/NAME/device links to).
// Loopback, tunnels, bridges, veths and ipsecN have none.
func isPort(a *netlink.LinkAttrs) bool {
	return a.ParentDev != "" && a.Flags&net.FlagLoopback == 0
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}

func ipNet(p netip.Prefix) *net.IPNet {
	a := p.Addr()
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(p.Bits(), a.BitLen())}
}
