package config

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// FieldError is one problem with one field. Path uses the element names of
// lists: "tunnels[branch].remote_subnets[0]".
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (e FieldError) Error() string { return e.Path + ": " + e.Message }

// ValidationErrors is every problem Validate found, in schema order.
type ValidationErrors []FieldError

func (v ValidationErrors) Error() string {
	lines := make([]string, len(v))
	for i, e := range v {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Limits enforced by Validate.
const (
	MinPSKLen = 16  // shorter PSKs are guessable offline from one captured exchange
	MaxPSKLen = 256 //
	MaxIDLen  = 255 //
)

// The rules for names. They were regular expressions compiled at start,
// which every process of the multi-call binary paid for in heap and CPU
// (this package is linked into all of them); each is a nameRule now, and
// names_test.go holds them to the expressions they replace.
var (
	nameRE     = nameRule{first: alnum, middle: nameChar, last: nameChar, max: 32}  // [A-Za-z0-9][A-Za-z0-9_-]{0,31}
	ifnameRE   = nameRule{first: letter, middle: nameChar, last: nameChar, max: 15} // [A-Za-z][A-Za-z0-9_-]{0,14}: IFNAMSIZ-1; no dots: paths use them
	hostLabel  = nameRule{first: alnum, middle: hostChar, last: alnum, max: 63}     // [A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?
	validBauds = []int{9600, 19200, 38400, 57600, 115200}
)

// A nameRule is a name of 1 to max bytes whose first byte passes first,
// its last (when it has more than one) last, and the others middle.
type nameRule struct {
	first, middle, last func(c byte) bool
	max                 int
}

// MatchString reports whether s follows the rule.
func (r nameRule) MatchString(s string) bool {
	if len(s) == 0 || len(s) > r.max || !r.first(s[0]) {
		return false
	}
	if len(s) == 1 {
		return true
	}
	for i := 1; i < len(s)-1; i++ {
		if !r.middle(s[i]) {
			return false
		}
	}
	return r.last(s[len(s)-1])
}

func letter(c byte) bool   { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func alnum(c byte) bool    { return letter(c) || '0' <= c && c <= '9' }
func nameChar(c byte) bool { return alnum(c) || c == '_' || c == '-' }
func hostChar(c byte) bool { return alnum(c) || c == '-' }

// PortForwardZones are the zones a port forward may come in on. The
// tunnel zone is not one: it is no set of interfaces but the tunnels'
// remote subnets, and netd matches a forward by the interface it arrives on.
var PortForwardZones = []string{RoleWAN, RoleLAN, RoleOpt, "any"}

type validator struct {
	errs ValidationErrors
	c    *Config
}

func (v *validator) add(path, format string, args ...any) {
	v.errs = append(v.errs, FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// Validate checks c and returns every problem found as ValidationErrors, or
// nil. It checks each field and then the whole: duplicate names,
// references to interfaces that do not exist, overlapping tunnel subnets,
// ValidName reports whether name may name an element of a named list (a
// tunnel, a rule, an admin): 1 to 32 of A-Z a-z 0-9 _ -, not starting
// with _ or -. Names become parts of config paths, so they have no dots.
// (Interfaces' kernel names follow the stricter IFNAMSIZ rule.)
func ValidName(name string) bool { return nameRE.MatchString(name) }

// conflicting port forwards.
func (c *Config) Validate() error {
	v := &validator{c: c}
	v.limits()
	v.system(&c.System)
	v.interfaces()
	v.routes()
	v.firewall()
	v.tunnels()
	v.certificates()
	if len(v.errs) == 0 {
		return nil
	}
	return v.errs
}

func validHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !hostLabel.MatchString(l) {
			return false
		}
	}
	return true
}

// validHost accepts an IP address or a DNS name.
func validHost(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	return validHostname(s)
}

// names checks that each element has a valid, unique name and calls fn with
// the element's path.
func names[T any](v *validator, list string, elems []T, name func(*T) string, re nameRule, fn func(path string, e *T)) {
	seen := map[string]bool{}
	for i := range elems {
		n := name(&elems[i])
		path := fmt.Sprintf("%s[%s]", list, n)
		switch {
		case !re.MatchString(n):
			path = fmt.Sprintf("%s[%d]", list, i)
			v.add(path+".name", "%q is not a valid name (letters, digits, - and _; at most %d characters)", n, maxNameLen(re))
		case seen[n]:
			v.add(path+".name", "duplicate name %q", n)
		}
		seen[n] = true
		fn(path, &elems[i])
	}
}

func maxNameLen(re nameRule) int { return re.max }

func (v *validator) system(s *System) {
	if !validHostname(s.Hostname) {
		v.add("system.hostname", "%q is not a valid host name", s.Hostname)
	}
	if _, ok := TimezoneRule(s.Timezone); !ok {
		v.add("system.timezone", "%q is not a time zone name this firmware knows (an IANA name like UTC, Europe/Berlin, or Etc/GMT-2 for UTC+2)", s.Timezone)
	}
	names(v, "system.admins", s.Admins, func(a *Admin) string { return a.Name }, nameRE, func(path string, a *Admin) {
		if !a.PasswordHash.IsSet() {
			v.add(path+".password_hash", "account has no password")
		} else if _, err := parsePHC(a.PasswordHash.Reveal()); err != nil {
			v.add(path+".password_hash", "not a password hash this firmware can check (%v)", err)
		}
	})
	if s.ConsoleBaud != 0 && !slices.Contains(validBauds, s.ConsoleBaud) {
		v.add("system.console_baud", "%d is not a console speed (one of %v, or 0 for the board's)", s.ConsoleBaud, validBauds)
	}
	for i, n := range s.NTPServers {
		if !validHost(n) {
			v.add(fmt.Sprintf("system.ntp_servers[%d]", i), "%q is not a host name or IP address", n)
		}
	}
	rs := s.RemoteSyslog
	if rs.Host != "" && !validHost(rs.Host) {
		v.add("system.remote_syslog.host", "%q is not a host name or IP address", rs.Host)
	}
	if rs.Port < 0 || rs.Port > 65535 {
		v.add("system.remote_syslog.port", "%d is not a port (1-65535)", rs.Port)
	}
	if rs.Protocol != "" && rs.Protocol != "udp" && rs.Protocol != "tcp" {
		v.add("system.remote_syslog.protocol", "%q is not udp or tcp", rs.Protocol)
	}
}

// checkNetworks reports malformed networks and, when masked is true,
// networks with host bits set (a subnet, not an interface address).
func (v *validator) checkNetworks(path string, ps []Prefix, masked bool) {
	for i, p := range ps {
		ep := fmt.Sprintf("%s[%d]", path, i)
		v.checkNetwork(ep, p, masked)
	}
}

func (v *validator) checkNetwork(path string, p Prefix, masked bool) bool {
	if err := p.check(); err != nil {
		v.add(path, "%v", err)
		return false
	}
	if !p.IsValid() {
		v.add(path, "missing network")
		return false
	}
	if masked && p.Masked() != p.Prefix {
		v.add(path, "%s has host bits set; did you mean %s?", p, p.Masked())
		return false
	}
	return true
}

func (v *validator) checkAddr(path string, a Addr, required bool) bool {
	if err := a.check(); err != nil {
		v.add(path, "%v", err)
		return false
	}
	if !a.IsValid() {
		if required {
			v.add(path, "missing address")
		}
		return false
	}
	return true
}

func (v *validator) interfaces() {
	type owned struct {
		path string
		p    netip.Prefix
	}
	var nets []owned
	names(v, "interfaces", v.c.Interfaces, func(i *Interface) string { return i.Name }, ifnameRE, func(path string, ifc *Interface) {
		if slices.Contains(Zones, ifc.Name) {
			v.add(path+".name", "%q is a zone name; interfaces use their kernel names (eth0)", ifc.Name)
		}
		if ifc.Role != RoleWAN && ifc.Role != RoleLAN && ifc.Role != RoleOpt {
			v.add(path+".role", "%q is not a role (wan, lan or opt)", ifc.Role)
		}
		switch ifc.Addressing {
		case AddressingStatic:
		case AddressingDHCP:
			if len(ifc.Addresses) > 0 {
				v.add(path+".addresses", "addresses are set but addressing is dhcp")
			}
		default:
			v.add(path+".addressing", "%q is not static or dhcp", ifc.Addressing)
		}
		for i, a := range ifc.Addresses {
			ap := fmt.Sprintf("%s.addresses[%d]", path, i)
			if !v.checkNetwork(ap, a, false) {
				continue
			}
			if a.Addr() == a.Masked().Addr() && a.Bits() < a.Addr().BitLen()-1 {
				v.add(ap, "%s is a network address, not an address on it", a)
				continue
			}
			for _, o := range nets {
				if o.p.Overlaps(a.Prefix) {
					v.add(ap, "%s overlaps %s (%s)", a, o.path, o.p)
				}
			}
			nets = append(nets, owned{ap, a.Prefix})
		}
		if ifc.MTU != 0 && (ifc.MTU < 576 || ifc.MTU > 9216) {
			v.add(path+".mtu", "%d is out of range (576-9216, or 0 for the driver's default)", ifc.MTU)
		}
		v.dhcpServer(path+".dhcp_server", ifc)
	})
}

// dhcpServer checks an interface's DHCP server block. An empty block is
// always valid (it is how every configuration written before the block
// existed reads); a block that says anything is checked against the
// interface: a server needs a LAN or opt interface with a static IPv4
// address, and its range and static leases must lie in that address's
// network. On a WAN, settings without enabled false are refused as a
// server; on opt they are kept, unused, until enabled is true.
func (v *validator) dhcpServer(path string, ifc *Interface) {
	s := &ifc.DHCPServer
	if s.IsZero() {
		return
	}
	if s.LeaseTime.IsSet() && v.checkDuration(path+".lease_time", s.LeaseTime) &&
		(s.LeaseTime.Duration < MinLeaseTime || s.LeaseTime.Duration > MaxLeaseTime) {
		v.add(path+".lease_time", "%s is out of range (2m to 168h, which is 7 days)", s.LeaseTime)
	}
	startOK := v.checkDHCPAddr(path+".range_start", s.RangeStart)
	endOK := v.checkDHCPAddr(path+".range_end", s.RangeEnd)
	switch {
	case s.RangeStart.IsSet() && !s.RangeEnd.IsSet():
		v.add(path+".range_end", "missing: give both ends of the range, or neither for the automatic pool")
		endOK = false
	case !s.RangeStart.IsSet() && s.RangeEnd.IsSet():
		v.add(path+".range_start", "missing: give both ends of the range, or neither for the automatic pool")
		startOK = false
	}
	rangeOK := startOK && endOK && s.RangeStart.IsValid()
	if rangeOK && s.RangeEnd.Less(s.RangeStart.Addr) {
		v.add(path+".range_end", "%s comes before range_start %s", s.RangeEnd, s.RangeStart)
		rangeOK = false
	}
	if rangeOK {
		if n := addrU32(s.RangeEnd.Addr) - addrU32(s.RangeStart.Addr) + 1; n > MaxDHCPRange {
			v.add(path+".range_end", "the range %s-%s has %d addresses; at most %d (a /16) are served", s.RangeStart, s.RangeEnd, n, MaxDHCPRange)
		}
	}
	leases := v.staticLeases(path+".static_leases", s.StaticLeases)

	switch {
	case ifc.Role != RoleLAN && ifc.Role != RoleOpt && s.Enabled.Or(true):
		v.add(path+".enabled", "a DHCP server runs only on a lan or opt interface, and %s is %s (set enabled to false, or remove dhcp_server)", ifc.Name, ifc.Role)
		return
	case !s.Enabled.Or(ifc.DHCPServerByDefault()):
		return // kept for later, but off: where it would run does not matter
	case ifc.Addressing != AddressingStatic:
		v.add(path+".enabled", "a DHCP server needs a static address on the interface, and %s gets its address by %s", ifc.Name, ifc.Addressing)
		return
	}
	own, ok := ifc.DHCPAddress()
	if !ok {
		v.add(path+".enabled", "a DHCP server needs an IPv4 address on the interface (addresses, like 192.168.1.1/24)")
		return
	}
	subnet := own.Masked()
	inNet := func(a netip.Addr) string {
		switch {
		case !subnet.Contains(a):
			return fmt.Sprintf("%s is outside %s's network %s", a, ifc.Name, subnet)
		case own.Bits() < 31 && a == subnet.Addr():
			return fmt.Sprintf("%s is the network address of %s", a, subnet)
		case own.Bits() < 31 && a == u32Addr(addrU32(subnet.Addr())|^uint32(0)>>own.Bits()):
			return fmt.Sprintf("%s is the broadcast address of %s", a, subnet)
		}
		return ""
	}
	if rangeOK {
		for _, end := range []struct {
			field string
			a     Addr
		}{{"range_start", s.RangeStart}, {"range_end", s.RangeEnd}} {
			if msg := inNet(end.a.Addr); msg != "" {
				v.add(path+"."+end.field, "%s", msg)
				rangeOK = false
			}
		}
	}
	if rangeOK {
		for i, a := range ifc.Addresses {
			if a.check() == nil && a.IsValid() && a.Addr().Is4() && !a.Addr().Less(s.RangeStart.Addr) && !s.RangeEnd.Less(a.Addr()) {
				v.add(path+".range_start", "the range %s-%s contains the box's own address %s (addresses[%d]); start it above or end it below", s.RangeStart, s.RangeEnd, a.Addr(), i)
			}
		}
	} else if !s.RangeStart.IsSet() && !s.RangeEnd.IsSet() {
		if _, _, ok := DefaultDHCPRange(own); !ok {
			v.add(path+".range_start", "%s is too small for the automatic pool (it needs /29 or larger); give range_start and range_end", own)
		}
	}
	for _, l := range leases {
		if msg := inNet(l.addr); msg != "" {
			v.add(l.path, "%s", msg)
			continue
		}
		for i, a := range ifc.Addresses {
			if a.check() == nil && a.Addr() == l.addr {
				v.add(l.path, "%s is the box's own address (addresses[%d])", l.addr, i)
			}
		}
	}
}

// checkedLease is a static lease whose address is well formed, with its path.
type checkedLease struct {
	path string
	addr netip.Addr
}

// staticLeases checks each lease on its own and for duplicates, and returns
// those with a usable IPv4 address for the checks against the network.
func (v *validator) staticLeases(path string, leases []StaticLease) []checkedLease {
	var out []checkedLease
	macs := map[string]int{}
	addrs := map[netip.Addr]int{}
	for i, l := range leases {
		lp := fmt.Sprintf("%s[%d]", path, i)
		if hw, err := l.HardwareAddr(); err != nil {
			v.add(lp+".mac", "%v", err)
		} else if j, dup := macs[hw.String()]; dup {
			v.add(lp+".mac", "%s already has a static lease (%s[%d])", l.MAC, path, j)
		} else {
			macs[hw.String()] = i
		}
		if v.checkDHCPAddr(lp+".address", l.Address) {
			if !l.Address.IsSet() {
				v.add(lp+".address", "missing address")
			} else if j, dup := addrs[l.Address.Addr]; dup {
				v.add(lp+".address", "%s is already given to %s[%d]", l.Address, path, j)
			} else {
				addrs[l.Address.Addr] = i
				out = append(out, checkedLease{lp + ".address", l.Address.Addr})
			}
		}
		if l.Hostname != "" && !hostLabel.MatchString(l.Hostname) {
			v.add(lp+".hostname", "%q is not a host name (letters, digits and -, at most 63 characters, no dots)", l.Hostname)
		}
	}
	return out
}

// checkDHCPAddr checks an optional IPv4 address of the DHCP server block.
func (v *validator) checkDHCPAddr(path string, a Addr) bool {
	if err := a.check(); err != nil {
		v.add(path, "%v", err)
		return false
	}
	if a.IsValid() && !a.Is4() {
		v.add(path, "%s is not an IPv4 address (the DHCP server is DHCPv4)", a)
		return false
	}
	return true
}

// checkIfRef checks that name is an existing interface, or a zone when
// zones is true. Empty is allowed (any).
func (v *validator) checkIfRef(path, name string, zones bool) {
	if name == "" || v.c.Interface(name) != nil || v.c.RouteTunnelByInterface(name) != nil {
		return
	}
	if zones && slices.Contains(Zones, name) {
		return
	}
	if zones {
		v.add(path, "unknown interface or zone %q", name)
	} else {
		v.add(path, "unknown interface %q", name)
	}
}

func (v *validator) routes() {
	names(v, "routes", v.c.Routes, func(r *Route) string { return r.Name }, nameRE, func(path string, r *Route) {
		dstOK := v.checkNetwork(path+".destination", r.Destination, true)
		gwOK := v.checkAddr(path+".gateway", r.Gateway, false)
		v.checkIfRef(path+".interface", r.Interface, false)
		if !r.Gateway.IsSet() && r.Interface == "" {
			v.add(path, "needs a gateway, an interface or both")
		}
		if dstOK && gwOK && r.Gateway.Is4() != r.Destination.Addr().Is4() {
			v.add(path+".gateway", "%s is not of the same address family as %s", r.Gateway, r.Destination)
		}
		if r.Metric < 0 || r.Metric > 65535 {
			v.add(path+".metric", "%d is out of range (0-65535)", r.Metric)
		}
	})
}

func portsAllowed(proto string) bool { return proto == "tcp" || proto == "udp" }

func (v *validator) checkPorts(path string, ps []PortRange) {
	for i, p := range ps {
		if err := p.check(); err != nil {
			v.add(fmt.Sprintf("%s[%d]", path, i), "%v", err)
		}
	}
}

func (v *validator) firewall() {
	fw := &v.c.Firewall
	names(v, "firewall.rules", fw.Rules, func(r *Rule) string { return r.Name }, nameRE, func(path string, r *Rule) {
		switch r.Chain {
		case ChainInput:
			if r.Out != "" {
				v.add(path+".out", "only forward rules have an outgoing interface")
			}
		case ChainForward:
		default:
			v.add(path+".chain", "%q is not input or forward", r.Chain)
		}
		v.checkIfRef(path+".in", r.In, true)
		v.checkIfRef(path+".out", r.Out, true)
		v.checkNetworks(path+".sources", r.Sources, true)
		v.checkNetworks(path+".destinations", r.Destinations, true)
		if !slices.Contains(Protocols, r.Protocol) {
			v.add(path+".protocol", "%q is not a protocol (%s)", r.Protocol, strings.Join(Protocols, ", "))
		}
		if (len(r.SourcePorts) > 0 || len(r.DestinationPorts) > 0) && !portsAllowed(r.Protocol) {
			v.add(path+".protocol", "ports are given but protocol is %q; ports need tcp or udp", r.Protocol)
		}
		v.checkPorts(path+".source_ports", r.SourcePorts)
		v.checkPorts(path+".destination_ports", r.DestinationPorts)
		if r.Action != ActionAccept && r.Action != ActionDrop && r.Action != ActionReject {
			v.add(path+".action", "%q is not accept, drop or reject", r.Action)
		}
	})
	names(v, "firewall.nat.masquerade", fw.NAT.Masquerade, func(m *Masquerade) string { return m.Name }, nameRE, func(path string, m *Masquerade) {
		if m.Interface == "" {
			v.add(path+".interface", "missing interface")
		}
		v.checkIfRef(path+".interface", m.Interface, false)
		v.checkNetworks(path+".sources", m.Sources, true)
	})
	names(v, "firewall.nat.exemptions", fw.NAT.Exemptions, func(e *NATExemption) string { return e.Name }, nameRE, func(path string, e *NATExemption) {
		v.checkNetworks(path+".sources", e.Sources, true)
		if len(e.Destinations) == 0 {
			v.add(path+".destinations", "at least one destination network is needed")
		}
		v.checkNetworks(path+".destinations", e.Destinations, true)
	})
	type fwd struct {
		path  string
		in    string
		proto string
		ports PortRange
	}
	var seen []fwd
	names(v, "firewall.port_forwards", fw.PortForwards, func(p *PortForward) string { return p.Name }, nameRE, func(path string, p *PortForward) {
		if p.In == "" {
			v.add(path+".in", "missing interface or zone")
		}
		v.checkIfRef(path+".in", p.In, true)
		if v.c.Interface(p.In) == nil && slices.Contains(Zones, p.In) && !slices.Contains(PortForwardZones, p.In) {
			v.add(path+".in", "port forwards take a zone (%s) or an interface, not %q", strings.Join(PortForwardZones, ", "), p.In)
		}
		if !portsAllowed(p.Protocol) {
			v.add(path+".protocol", "%q is not tcp or udp", p.Protocol)
		}
		portsOK := true
		if err := p.ExternalPorts.check(); err != nil {
			v.add(path+".external_ports", "%v", err)
			portsOK = false
		} else if !p.ExternalPorts.IsSet() {
			v.add(path+".external_ports", "missing port")
			portsOK = false
		}
		v.checkAddr(path+".destination", p.Destination, true)
		if portsOK && p.DestinationPort != 0 && int(p.DestinationPort)+p.ExternalPorts.Len()-1 > 65535 {
			v.add(path+".destination_port", "%d plus the %d ports of the range runs past 65535", p.DestinationPort, p.ExternalPorts.Len())
		}
		v.checkNetworks(path+".sources", p.Sources, true)
		if !portsOK || !p.Enabled {
			return
		}
		if p.Protocol == "udp" && (p.In == RoleWAN || v.isRole(p.In, RoleWAN)) &&
			(p.ExternalPorts.Overlaps(Port(500)) || p.ExternalPorts.Overlaps(Port(4500))) {
			v.add(path+".external_ports", "udp 500 and 4500 on the WAN are IKE's; forwarding them would cut the tunnels")
		}
		for _, o := range seen {
			if o.proto == p.Protocol && v.sameIngress(o.in, p.In) && o.ports.Overlaps(p.ExternalPorts) {
				v.add(path+".external_ports", "%s %s on %s conflicts with %s (%s %s on %s)",
					p.Protocol, p.ExternalPorts, p.In, o.path, o.proto, o.ports, o.in)
			}
		}
		seen = append(seen, fwd{path, p.In, p.Protocol, p.ExternalPorts})
	})
}

func (v *validator) isRole(ifname, role string) bool {
	i := v.c.Interface(ifname)
	return i != nil && i.Role == role
}

// sameIngress reports whether traffic arriving on a can also be arriving on
// b: equal names, "any", or a zone and an interface of that role.
func (v *validator) sameIngress(a, b string) bool {
	return a == b || a == "any" || b == "any" || v.isRole(a, b) || v.isRole(b, a)
}

func (v *validator) tunnels() {
	type owned struct {
		path string
		p    netip.Prefix
	}
	var remote []owned
	var local []owned
	for _, ifc := range v.c.Interfaces {
		for i, a := range ifc.Addresses {
			if a.check() == nil && a.IsValid() {
				local = append(local, owned{fmt.Sprintf("interfaces[%s].addresses[%d]", ifc.Name, i), a.Masked()})
			}
		}
	}
	routeIfs := map[string]string{}
	earlier := remoteOverlaps(v.c.Tunnels)
	names(v, "tunnels", v.c.Tunnels, func(t *Tunnel) string { return t.Name }, nameRE, func(path string, t *Tunnel) {
		switch t.Mode {
		case "", ModePolicy, ModeRoute:
		default:
			v.add(path+".mode", "%q is not policy or route", t.Mode)
		}
		v.checkRouteTunnel(path, t, routeIfs)
		v.checkAddr(path+".local_address", t.LocalAddress, false)
		remoteOK := v.checkAddr(path+".remote_address", t.RemoteAddress, false)
		if !t.RemoteAddress.IsSet() && t.StartAction != StartRespond {
			v.add(path+".remote_address", "missing address (only a tunnel that only responds may leave it empty)")
		}
		if remoteOK && t.LocalAddress.IsValid() && t.LocalAddress.Is4() != t.RemoteAddress.Is4() {
			v.add(path+".local_address", "%s and remote address %s are of different address families", t.LocalAddress, t.RemoteAddress)
		}
		for _, id := range []struct{ field, val string }{{"local_id", t.LocalID}, {"remote_id", t.RemoteID}} {
			if len(id.val) > MaxIDLen || strings.ContainsFunc(id.val, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				v.add(path+"."+id.field, "must be at most %d printable characters", MaxIDLen)
			}
		}
		v.tunnelAuth(path, t)
		switch t.IKEVersion {
		case 0, IKEv1, IKEv2:
		default:
			v.add(path+".ike_version", "%d is not 1 or 2 (1 only for peers that cannot speak IKEv2)", int(t.IKEVersion))
		}
		rules := t.Rules()
		v.proposals(path+".ike_proposals", t.IKEProposals, rules.CheckIKE)
		v.proposals(path+".esp_proposals", t.ESPProposals, rules.CheckESP)
		// A route tunnel's subnets are only its selectors, any-to-any
		// when left out: the routes decide what goes into it.
		if len(t.LocalSubnets) == 0 && !t.IsRoute() {
			v.add(path+".local_subnets", "at least one local subnet is needed")
		}
		if len(t.RemoteSubnets) == 0 && !t.IsRoute() {
			v.add(path+".remote_subnets", "at least one remote subnet is needed")
		}
		var mine []owned
		for i, p := range t.LocalSubnets {
			lp := fmt.Sprintf("%s.local_subnets[%d]", path, i)
			if v.checkNetwork(lp, p, true) {
				mine = append(mine, owned{lp, p.Prefix})
			}
		}
		for i, p := range t.RemoteSubnets {
			rp := fmt.Sprintf("%s.remote_subnets[%d]", path, i)
			if !v.checkNetwork(rp, p, true) {
				continue
			}
			// A remote network inside a local one (or a connected one)
			// makes those hosts unreachable one way or the other. A
			// broader remote network is fine: 0.0.0.0/0 sends everything
			// but the more specific local networks through the tunnel.
			if t.IsRoute() {
				// Selectors only: two route tunnels to one peer both
				// carry 0.0.0.0/0, told apart by their interfaces.
				continue
			}
			for _, o := range mine {
				if within(p.Prefix, o.p) {
					v.add(rp, "%s lies within this tunnel's own %s (%s)", p, o.path, o.p)
				}
			}
			if t.Enabled {
				for _, j := range earlier[len(remote)] {
					o := remote[j]
					v.add(rp, "%s overlaps %s (%s); traffic could not tell the tunnels apart", p, o.path, o.p)
				}
				for _, o := range local {
					if within(p.Prefix, o.p) {
						v.add(rp, "%s lies within the directly connected network %s (%s)", p, o.path, o.p)
					}
				}
				remote = append(remote, owned{rp, p.Prefix})
			}
		}
		v.lifetime(path+".ike_lifetime", t.IKELifetime)
		v.lifetime(path+".child_lifetime", t.ChildLifetime)
		if v.checkDuration(path+".dpd_interval", t.DPDInterval) && v.checkDuration(path+".dpd_timeout", t.DPDTimeout) &&
			t.DPDInterval.Duration > 0 && t.DPDTimeout.Duration < t.DPDInterval.Duration {
			v.add(path+".dpd_timeout", "%s is shorter than the DPD interval %s", t.DPDTimeout, t.DPDInterval)
		}
		switch t.StartAction {
		case StartInitiate, StartRespond, StartOnTraffic:
		default:
			v.add(path+".start_action", "%q is not initiate, respond or on-traffic", t.StartAction)
		}
		switch t.DataPlane {
		case DataPlaneAuto, DataPlaneXFRM, DataPlaneUserspace:
		default:
			v.add(path+".data_plane", "%q is not auto, xfrm or userspace", t.DataPlane)
		}
	})
}

// remoteOverlaps looks at the remote subnets that tunnels checks against
// each other: those of enabled policy tunnels that are well-formed
// networks, numbered in configuration order. earlier[k] lists, in order,
// the numbers of the ones before the k-th that overlap it. It sorts them
// and walks them once, keeping the chain of networks that contain the
// current one, instead of comparing every pair: a hub's thousand tunnels
// made the pairwise check the largest part of a commit (issue 22).
func remoteOverlaps(tunnels []Tunnel) (earlier [][]int) {
	type entry struct {
		k int
		p netip.Prefix
	}
	var all []entry
	for i := range tunnels {
		t := &tunnels[i]
		if !t.Enabled || t.IsRoute() {
			continue
		}
		for _, p := range t.RemoteSubnets {
			if p.check() == nil && p.IsValid() && p.Masked() == p.Prefix {
				all = append(all, entry{len(all), p.Prefix})
			}
		}
	}
	earlier = make([][]int, len(all))
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b entry) int {
		// By family and first address, the wider network first.
		if c := a.p.Addr().Compare(b.p.Addr()); c != 0 {
			return c
		}
		if c := cmp.Compare(a.p.Bits(), b.p.Bits()); c != 0 {
			return c
		}
		return cmp.Compare(a.k, b.k)
	})
	// Two networks overlap when one contains the other. In this order,
	// every network that contains e comes before it, and those still on
	// the chain when e comes are exactly the ones containing e.
	var chain []entry
	for _, e := range sorted {
		for len(chain) > 0 && !chain[len(chain)-1].p.Contains(e.p.Addr()) {
			chain = chain[:len(chain)-1]
		}
		for _, o := range chain {
			a, b := min(o.k, e.k), max(o.k, e.k)
			earlier[b] = append(earlier[b], a)
		}
		chain = append(chain, e)
	}
	for _, l := range earlier {
		slices.Sort(l)
	}
	return earlier
}

// within reports whether inner is contained in (or equal to) outer.
func within(inner, outer netip.Prefix) bool {
	return inner.Bits() >= outer.Bits() && outer.Contains(inner.Addr())
}

func (v *validator) proposals(path string, ps []string, check func(string) error) {
	if len(ps) == 0 {
		v.add(path, "at least one proposal is needed")
	}
	for i, p := range ps {
		if err := check(p); err != nil {
			v.add(fmt.Sprintf("%s[%d]", path, i), "%v", err)
		}
	}
}

func (v *validator) checkDuration(path string, d Duration) bool {
	if err := d.check(); err != nil {
		v.add(path, "%v", err)
		return false
	}
	return true
}

func (v *validator) lifetime(path string, d Duration) {
	if !v.checkDuration(path, d) {
		return
	}
	if d.Seconds() < 10 || d.Hours() > 24 {
		v.add(path, "%s is out of range (10s to 24h)", d)
	}
}
