package netd

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
)

// FieldError is one problem with the desired state, located by the field
// path of the configuration it came from.
type FieldError struct {
	Path string // "firewall.rules[ssh].in"
	Msg  string // `unknown interface "eth9"`
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Msg }

// ValidationError lists every problem found, so the admin sees them all at
// once. Nothing is applied when Validate returns one.
type ValidationError struct{ Problems []*FieldError }

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return "invalid network configuration: " + strings.Join(msgs, "; ")
}

type problems struct{ list []*FieldError }

func (p *problems) add(path, format string, args ...any) {
	p.list = append(p.list, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &ValidationError{Problems: p.list}
}

// Validate checks the desired state as a whole: names that must exist,
// values the kernel would refuse, and combinations that cannot work
// (overlapping networks, two port forwards on the same port). It returns a
// *ValidationError or nil.
func (d *Desired) Validate() error {
	var p problems
	links := map[string]bool{}
	for _, l := range d.Links {
		switch {
		case !validIfName(l.Name):
			p.add(l.Path+".name", "%q is not an interface name (1 to 15 characters, no '/', ':' or spaces)", l.Name)
		case links[l.Name]:
			p.add(l.Path+".name", "interface %q is listed twice", l.Name)
		}
		links[l.Name] = true
		if l.MTU != 0 && (l.MTU < 576 || l.MTU > 9216) {
			p.add(l.Path+".mtu", "%d is out of range (576 to 9216, or 0 for the driver's default)", l.MTU)
		}
	}
	for i, a := range d.Addresses {
		if !links[a.Link] {
			p.add(a.Path, "unknown interface %q", a.Link)
		}
		if !a.Prefix.IsValid() {
			p.add(a.Path, "not an address with a prefix length")
			continue
		}
		// Two interfaces on overlapping networks make routing ambiguous.
		for _, b := range d.Addresses[:i] {
			if b.Link != a.Link && b.Prefix.IsValid() && a.Prefix.Masked().Overlaps(b.Prefix.Masked()) {
				p.add(a.Path, "%s overlaps %s on %s (%s)", a.Prefix, b.Prefix, b.Link, b.Path)
			}
		}
	}
	for _, r := range d.Routes {
		if !r.Destination.IsValid() {
			p.add(r.Path+".destination", "not a network")
		}
		if r.Link != "" && !links[r.Link] {
			p.add(r.Path+".interface", "unknown interface %q", r.Link)
		}
		if !r.Gateway.IsValid() && r.Link == "" {
			p.add(r.Path, "needs a gateway, an interface or both")
		}
		if r.Gateway.IsValid() && r.Destination.IsValid() && r.Gateway.Is4() != r.Destination.Addr().Is4() {
			p.add(r.Path+".gateway", "%s is not of the destination's address family", r.Gateway)
		}
	}
	served := map[string]bool{}
	for _, sc := range d.DHCPServers {
		switch {
		case !links[sc.Link]:
			p.add(sc.Path, "DHCP server on %q, which is not a managed interface", sc.Link)
		case served[sc.Link]:
			p.add(sc.Path, "a second DHCP server on %s", sc.Link)
		}
		served[sc.Link] = true
		if err := sc.check(); err != nil {
			p.add(sc.Path, "%v", err)
		}
	}
	d.Firewall.validate(&p, d.Addresses)
	return p.err()
}

// Validate checks the firewall alone (Desired.Validate includes it).
func (f *Firewall) Validate() error {
	var p problems
	f.validate(&p, nil)
	return p.err()
}

func (f *Firewall) validate(p *problems, addrs []Address) {
	known := map[string]string{} // name -> role
	for _, ifc := range f.Interfaces {
		known[ifc.Name] = ifc.Role
	}
	for _, t := range f.Tunnels {
		if t.Interface != "" {
			known[t.Interface] = ZoneTunnel
		}
	}
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	sort.Strings(names)
	checkIf := func(path, v string) {
		if v == "" || known[v] != "" || isZone(v) {
			return
		}
		p.add(path, "unknown interface %q (interfaces: %s; zones: any, wan, lan, opt, tunnel)", v, strings.Join(names, ", "))
	}

	// Remote tunnel subnets must not overlap each other nor a local
	// interface network: the NAT exemption and the routes would be ambiguous.
	type netAt struct {
		n    netip.Prefix
		path string
	}
	var seen []netAt
	for _, a := range addrs {
		if a.Prefix.IsValid() {
			seen = append(seen, netAt{a.Prefix.Masked(), a.Path})
		}
	}
	for _, t := range f.Tunnels {
		if t.Peer.IsValid() && t.Peer.IsUnspecified() {
			p.add(t.Path+".remote_address", "%s cannot be a peer address", t.Peer)
		}
		for i, n := range t.RemoteSubnets {
			path := fmt.Sprintf("%s.remote_subnets[%d]", t.Path, i)
			if !n.IsValid() {
				p.add(path, "not a network")
				continue
			}
			for _, s := range seen {
				if s.n.Overlaps(n) {
					p.add(path, "%s overlaps %s (%s)", n, s.n, s.path)
				}
			}
			seen = append(seen, netAt{n.Masked(), path})
		}
		for i, n := range t.LocalSubnets {
			if !n.IsValid() {
				p.add(fmt.Sprintf("%s.local_subnets[%d]", t.Path, i), "not a network")
			}
		}
	}

	ruleNames := map[string]bool{}
	for _, r := range f.Rules {
		if r.Name == "" {
			p.add(r.Path+".name", "a rule needs a name")
		} else if ruleNames[r.Name] {
			p.add(r.Path+".name", "rule name %q is used twice", r.Name)
		}
		ruleNames[r.Name] = true
		switch r.Chain {
		case ChainInput:
			if r.Out != "" && r.Out != ZoneAny {
				p.add(r.Path+".out", "an input rule has no outgoing interface (traffic is for the box itself)")
			}
		case ChainForward:
		default:
			p.add(r.Path+".chain", "%q is not a chain (input or forward)", r.Chain)
		}
		checkIf(r.Path+".in", r.In)
		checkIf(r.Path+".out", r.Out)
		if _, ok := protocols[r.Protocol]; !ok {
			p.add(r.Path+".protocol", "%q is not a protocol (any, tcp, udp, icmp, icmpv6, esp, gre)", r.Protocol)
		}
		if (len(r.SourcePorts) > 0 || len(r.DestinationPorts) > 0) && r.Protocol != "tcp" && r.Protocol != "udp" {
			p.add(r.Path+".protocol", "ports need protocol tcp or udp, not %q", r.Protocol)
		}
		checkPorts(p, r.Path+".source_ports", r.SourcePorts)
		checkPorts(p, r.Path+".destination_ports", r.DestinationPorts)
		checkNets(p, r.Path+".sources", r.Sources)
		checkNets(p, r.Path+".destinations", r.Destinations)
		if (r.Protocol == "icmp" && allOfFamily(r, false)) || (r.Protocol == "icmpv6" && allOfFamily(r, true)) {
			p.add(r.Path+".protocol", "%s never matches the address family of the rule's networks", r.Protocol)
		}
		if len(r.Sources) > 0 && len(r.Destinations) > 0 && !familiesMeet(r.Sources, r.Destinations) {
			p.add(r.Path+".destinations", "no destination is of the same address family as a source")
		}
		switch r.Action {
		case ActionAccept, ActionDrop, ActionReject:
		default:
			p.add(r.Path+".action", "%q is not an action (accept, drop or reject)", r.Action)
		}
	}

	for _, m := range f.Masquerade {
		if known[m.Interface] == "" {
			p.add(m.Path+".interface", "unknown interface %q (interfaces: %s)", m.Interface, strings.Join(names, ", "))
		}
		checkNets(p, m.Path+".sources", m.Sources)
	}
	for _, e := range f.Exemptions {
		if len(e.Destinations) == 0 {
			p.add(e.Path+".destinations", "an exemption needs at least one destination")
		}
		checkNets(p, e.Path+".sources", e.Sources)
		checkNets(p, e.Path+".destinations", e.Destinations)
	}

	for i, pf := range f.PortForwards {
		checkIf(pf.Path+".in", pf.In)
		if pf.In == ZoneTunnel {
			p.add(pf.Path+".in", "port forwards take a zone (wan, lan, opt, any) or an interface, not %q", pf.In)
		}
		if pf.Protocol != "tcp" && pf.Protocol != "udp" {
			p.add(pf.Path+".protocol", "%q: a port forward is tcp or udp", pf.Protocol)
		}
		if pf.External.Lo == 0 || pf.External.Hi < pf.External.Lo {
			p.add(pf.Path+".external_ports", "%s is not a port range", pf.External)
		}
		if !pf.Destination.IsValid() || pf.Destination.IsUnspecified() || pf.Destination.IsMulticast() {
			p.add(pf.Path+".destination", "%q is not a host address", pf.Destination)
		}
		if pf.DestinationPort != 0 && pf.External.Hi > pf.External.Lo && pf.DestinationPort != pf.External.Lo {
			// nftables' dnat to a port range picks any port of it; a
			// shifted range would silently not do what was written.
			p.add(pf.Path+".destination_port", "a port range is forwarded to the same ports; leave destination_port empty or equal to %d", pf.External.Lo)
		}
		checkNets(p, pf.Path+".sources", pf.Sources)
		for _, q := range f.PortForwards[:i] {
			if q.Protocol == pf.Protocol && q.External.overlaps(pf.External) && f.zonesMeet(q.In, pf.In) {
				p.add(pf.Path+".external_ports", "%s %s on %s conflicts with %s (%s %s on %s)",
					pf.Protocol, pf.External, orAny(pf.In), q.Path, q.Protocol, q.External, orAny(q.In))
			}
		}
		// IKE must reach the box itself when tunnels exist.
		if pf.Protocol == "udp" && len(f.Tunnels) > 0 && (pf.External.overlaps(PortRange{500, 500}) || pf.External.overlaps(PortRange{4500, 4500})) && f.zonesMeet(pf.In, RoleWAN) {
			p.add(pf.Path+".external_ports", "udp %s takes IKE's ports (500, 4500) away from the tunnels", pf.External)
		}
	}
}

// zonesMeet reports whether two In values (zone, interface or empty) can
// match the same interface.
func (f *Firewall) zonesMeet(a, b string) bool {
	ia, ib := f.expandIf(a), f.expandIf(b)
	if ia == nil || ib == nil { // any
		return true
	}
	for _, x := range ia {
		if slices.Contains(ib, x) {
			return true
		}
	}
	return false
}

func orAny(s string) string {
	if s == "" {
		return ZoneAny
	}
	return s
}

func checkPorts(p *problems, path string, rs []PortRange) {
	for i, r := range rs {
		if r.Lo == 0 || r.Hi < r.Lo {
			p.add(fmt.Sprintf("%s[%d]", path, i), "%s is not a port range (1-65535)", r)
		}
	}
}

func checkNets(p *problems, path string, ns []netip.Prefix) {
	for i, n := range ns {
		if !n.IsValid() {
			p.add(fmt.Sprintf("%s[%d]", path, i), "not a network")
		}
	}
}

// allOfFamily reports whether the rule names networks and all of them are
// IPv4 (is4) or all IPv6 (!is4). An icmp rule whose networks are all IPv6,
// or an icmpv6 rule whose networks are all IPv4, can never match.
func allOfFamily(r Rule, is4 bool) bool {
	nets := append(append([]netip.Prefix{}, r.Sources...), r.Destinations...)
	if len(nets) == 0 {
		return false
	}
	for _, n := range nets {
		if n.Addr().Is4() != is4 {
			return false
		}
	}
	return true
}

func familiesMeet(a, b []netip.Prefix) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Addr().Is4() == y.Addr().Is4() {
				return true
			}
		}
	}
	return false
}

func isZone(s string) bool {
	switch s {
	case ZoneAny, RoleWAN, RoleLAN, RoleOpt, ZoneTunnel:
		return true
	}
	return false
}

// validIfName mirrors the kernel's dev_valid_name.
func validIfName(s string) bool {
	if s == "" || len(s) > 15 || s == "." || s == ".." {
		return false
	}
	return !strings.ContainsAny(s, "/: \t\n")
}
