package xfrm

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/tunnelif"
)

// SetInterfaces implements ipsec.Interfaces with XFRM interfaces (Linux
// 4.19 and later, CONFIG_XFRM_INTERFACE): `ip link add ipsecN type xfrm
// if_id N+1`, not tied to a lower device, so the SAs' outer packets follow
// the main table to the peer. An interface of that name left by an earlier
// run is taken over if its if_id matches, else replaced. The pairs of a
// route tunnel carry the if_id on their SAs and policies, so the kernel
// sends what is routed into the interface through them and hands what
// they decrypt to it.
func (p *Plane) SetInterfaces(want []ipsec.TunnelInterface) error {
	if err := tunnelif.Check(want); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.routes.h
	missing, gone := p.ifs.Wanted(want)
	var errs []error
	for _, id := range gone {
		w, _ := p.ifs.Get(id)
		errs = append(errs, p.ifs.Remove(id))
		if l, err := h.LinkByName(w.Name); err == nil {
			if err := h.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("tunnel interface %s: delete: %w", w.Name, err))
			}
		}
	}
	links := map[uint32]netlink.Link{}
	for _, w := range missing {
		l, err := p.xfrmInterface(w)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		links[w.IfID] = l
	}
	for _, w := range want {
		l := links[w.IfID]
		if l == nil {
			if !p.ifs.Has(w.IfID) {
				continue // creating it failed
			}
			var err error
			if l, err = h.LinkByName(w.Name); err != nil {
				errs = append(errs, fmt.Errorf("tunnel interface %s: %w", w.Name, err))
				continue
			}
		}
		errs = append(errs, p.ifs.Configure(l, w))
	}
	return errors.Join(errs...)
}

// xfrmInterface creates (or takes over) the XFRM interface for w.
func (p *Plane) xfrmInterface(w ipsec.TunnelInterface) (netlink.Link, error) {
	h := p.routes.h
	if l, err := h.LinkByName(w.Name); err == nil {
		if x, ok := l.(*netlink.Xfrmi); ok && x.Ifid == w.IfID {
			return l, nil
		}
		if err := h.LinkDel(l); err != nil {
			return nil, fmt.Errorf("tunnel interface %s: replace the %s interface of that name: %w", w.Name, l.Type(), err)
		}
	}
	x := &netlink.Xfrmi{LinkAttrs: netlink.LinkAttrs{Name: w.Name, MTU: w.MTU}, Ifid: w.IfID}
	if err := h.LinkAdd(x); err != nil {
		return nil, fmt.Errorf("tunnel interface %s: add xfrm interface if_id %d: %w", w.Name, w.IfID, err)
	}
	l, err := h.LinkByName(w.Name)
	if err != nil {
		return nil, fmt.Errorf("tunnel interface %s: %w", w.Name, err)
	}
	return l, nil
}
