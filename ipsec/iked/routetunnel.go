package iked

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec"
)

// Route-based tunnels (config mode route): iked owns their interfaces
// (ipsecN) and the routes through them, because only iked knows whether
// a tunnel carries a CHILD_SA, and the userspace plane's TUN lives in its
// process. The data plane makes the interface (ipsec.Interfaces) and
// withdraws the routes while the tunnel has no CHILD_SA, so a second
// tunnel's route with a higher metric takes over (docs/tunnels.md).

// anyToAny are the selectors a route tunnel proposes when it names no
// subnets: everything, as AWS and Azure expect; the routes choose.
var anyToAny = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}

// tunnelInterfaces returns the interfaces of cfg's enabled route tunnels,
// each with the enabled routes that name it.
func tunnelInterfaces(cfg *config.Config) []ipsec.TunnelInterface {
	var ifs []ipsec.TunnelInterface
	for i := range cfg.Tunnels {
		t := &cfg.Tunnels[i]
		if !t.Enabled || t.IfID() == 0 {
			continue
		}
		ti := ipsec.TunnelInterface{Name: t.Interface, IfID: t.IfID(), MTU: t.RouteMTU()}
		for _, a := range t.InnerAddresses {
			ti.Addresses = append(ti.Addresses, a.Prefix)
		}
		for _, r := range cfg.Routes {
			if r.Enabled && r.Interface == t.Interface {
				ti.Routes = append(ti.Routes, ipsec.TunnelRoute{Destination: r.Destination.Prefix.Masked(),
					Gateway: r.Gateway.Addr, Metric: r.Metric})
			}
		}
		ifs = append(ifs, ti)
	}
	slices.SortFunc(ifs, func(a, b ipsec.TunnelInterface) int { return int(a.IfID) - int(b.IfID) })
	return ifs
}

// setInterfaces hands the route tunnels' interfaces to the data plane.
func (d *Daemon) setInterfaces(cfg *config.Config) error {
	ifs := tunnelInterfaces(cfg)
	p, ok := d.dp.(ipsec.Interfaces)
	if !ok {
		if len(ifs) == 0 {
			return nil
		}
		return fmt.Errorf("the %s data plane has no tunnel interfaces: route tunnels cannot run", d.dp.Name())
	}
	if err := p.SetInterfaces(ifs); err != nil {
		return fmt.Errorf("tunnel interfaces: %w", err)
	}
	return nil
}

// markRoute gives the pair of a route tunnel's CHILD_SA the tunnel's
// if_id, so the data plane ties it to the tunnel's interface.
func (d *Daemon) markRoute(in, out *ipsec.ChildSA, name string) {
	d.mu.Lock()
	t := d.tunnels[name]
	var id uint32
	if t != nil {
		id = t.cfg.IfID()
	}
	d.mu.Unlock()
	in.IfID, out.IfID = id, id
}

// Both real planes carry route tunnels.
var (
	_ ipsec.Interfaces = (*kernelPlane)(nil)
	_ ipsec.Interfaces = (*userspacePlane)(nil)
)
