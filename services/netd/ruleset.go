package netd

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/flashgate/flashgate/ipsec"
)

// The NAT chains of table inet flashgate; the filter chains, with policy
// drop, are ChainInput and ChainForward.
const (
	chainPrerouting  = "prerouting"
	chainPostrouting = "postrouting"
)

// Verdicts a Spec may end with.
const (
	VerdictAccept     = "accept"
	VerdictDrop       = "drop"
	VerdictReject     = "reject"
	VerdictMasquerade = "masquerade"
	VerdictDNAT       = "dnat"
	// VerdictLog is a rule that only logs (rate-limited) and falls
	// through to the next rule, which carries the real verdict.
	VerdictLog = "log"
	// VerdictClampMSS lowers the MSS option of a TCP SYN to what the
	// route's MTU allows (the kernel never raises it) and falls through.
	VerdictClampMSS = "clamp-mss"
)

// Conntrack states a Spec may match (the kernel's NF_CT_STATE_* bits).
const (
	CtInvalid     uint32 = 1
	CtEstablished uint32 = 1 << 1
	CtRelated     uint32 = 1 << 2
	CtNew         uint32 = 1 << 3
)

// IP protocol numbers used by the policy.
const (
	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoGRE    = 47
	protoESP    = 50
	protoICMPv6 = 58
)

var protocols = map[string]uint8{
	"any": 0, "": 0, "tcp": protoTCP, "udp": protoUDP, "icmp": protoICMP,
	"icmpv6": protoICMPv6, "esp": protoESP, "gre": protoGRE,
}

// Spec is one nftables rule, as plain data: every match is optional, and
// the rule always counts what it matches. Comment names the policy element
// the rule comes from ("builtin:established", "rule:ssh", "forward:web",
// "masquerade:lan-out"); one element may expand into several Specs, whose
// hit counters are added up under its Comment.
type Spec struct {
	Chain    string
	Comment  string
	IIf, OIf string       // interface names (meta iifname / oifname)
	Src, Dst netip.Prefix // one network each; the family follows from them
	Family   int          // 4 or 6 to match one family without networks; 0 otherwise
	Proto    uint8        // IP protocol, 0 for any
	SPort    PortRange    // zero: any
	DPort    PortRange    // zero: any
	ICMP     *ICMPTypes   // ICMP (or ICMPv6, after Proto) type range
	CtState  uint32       // bits of Ct*: match if any is set
	CtDNAT   bool         // the connection was destination-NATed
	ToLocal  bool         // the destination is one of the box's addresses (fib daddr type local)
	TCPSyn   bool         // TCP with the SYN flag (SYN and SYN-ACK)
	// Decrypted matches whether kernel IPsec decrypted the packet (meta
	// secpath); Encrypted whether its route leads into a kernel IPsec SA
	// (rt ipsec), in forward and output only.
	Decrypted, Encrypted IPsecMatch
	Verdict              string
	Log                  string     // log prefix, for VerdictLog
	DNAT                 netip.Addr // for VerdictDNAT
	DNATPort             uint16     // for VerdictDNAT; 0 keeps the port
}

// IPsecMatch is a match on kernel IPsec: any packet, only those it
// handled, or only those it did not.
type IPsecMatch uint8

const (
	IPsecAny IPsecMatch = iota
	IPsecExists
	IPsecMissing
)

func (m IPsecMatch) String() string {
	switch m {
	case IPsecExists:
		return "exists"
	case IPsecMissing:
		return "missing"
	}
	return "any"
}

// ICMPTypes is an inclusive range of ICMP types.
type ICMPTypes struct{ Lo, Hi uint8 }

// family is 4 or 6 when the Spec matches one address family only, else 0.
func (s Spec) family() int {
	if s.Family != 0 {
		return s.Family
	}
	for _, a := range []netip.Addr{s.Src.Addr(), s.Dst.Addr(), s.DNAT} {
		if a.IsValid() {
			if a.Is4() {
				return 4
			}
			return 6
		}
	}
	return 0
}

// String renders the Spec in nft's syntax (as `nft list` would show it,
// give or take quoting), for tests, logs and the status API.
func (s Spec) String() string {
	var b strings.Builder
	b.WriteString(s.Chain)
	w := func(format string, args ...any) { fmt.Fprintf(&b, " "+format, args...) }
	if s.IIf != "" {
		w("iifname %q", s.IIf)
	}
	if s.OIf != "" {
		w("oifname %q", s.OIf)
	}
	if s.Decrypted != IPsecAny {
		w("meta secpath %s", s.Decrypted)
	}
	if s.Encrypted != IPsecAny {
		w("rt ipsec %s", s.Encrypted)
	}
	ip := "ip"
	if s.family() == 6 {
		ip = "ip6"
	}
	if f := s.family(); f != 0 {
		w("meta nfproto ipv%d", f)
	}
	if s.Src.IsValid() {
		w("%s saddr %s", ip, s.Src)
	}
	if s.Dst.IsValid() {
		w("%s daddr %s", ip, s.Dst)
	}
	if s.Proto != 0 {
		w("meta l4proto %s", protoName(s.Proto))
	}
	if s.SPort.Lo != 0 {
		w("th sport %s", s.SPort)
	}
	if s.DPort.Lo != 0 {
		w("th dport %s", s.DPort)
	}
	if s.ICMP != nil {
		if s.ICMP.Lo == s.ICMP.Hi {
			w("%s type %d", protoName(s.Proto), s.ICMP.Lo)
		} else {
			w("%s type %d-%d", protoName(s.Proto), s.ICMP.Lo, s.ICMP.Hi)
		}
	}
	if s.TCPSyn {
		w("tcp flags syn / syn")
	}
	if s.ToLocal {
		w("fib daddr type local")
	}
	if s.CtState != 0 {
		var st []string
		for _, x := range []struct {
			bit  uint32
			name string
		}{{CtInvalid, "invalid"}, {CtEstablished, "established"}, {CtRelated, "related"}, {CtNew, "new"}} {
			if s.CtState&x.bit != 0 {
				st = append(st, x.name)
			}
		}
		w("ct state %s", strings.Join(st, ","))
	}
	if s.CtDNAT {
		w("ct status dnat")
	}
	switch s.Verdict {
	case VerdictLog:
		w("limit rate 10/second burst 20 packets counter log prefix %q", s.Log)
	case VerdictClampMSS:
		w("counter tcp option maxseg size set rt mtu")
	case VerdictDNAT:
		to := s.DNAT.String()
		if s.DNATPort != 0 {
			to = netip.AddrPortFrom(s.DNAT, s.DNATPort).String()
		}
		w("counter dnat to %s", to)
	default:
		w("counter %s", s.Verdict)
	}
	w("comment %q", s.Comment)
	return b.String()
}

func protoName(p uint8) string {
	for name, n := range protocols {
		if n == p && name != "" && name != "any" {
			return name
		}
	}
	return fmt.Sprint(p)
}

// Build turns the firewall into the ordered list of rules of table inet
// flashgate. It is a pure function: the same Firewall always gives the same
// list, in the same order. The Firewall must have passed Validate.
//
// Order within the filter chains: in forward, the drop of unencrypted
// traffic for the tunnels' remote subnets leaving by the WAN (no user rule
// and no running connection may leak a tunnel's traffic in clear); the
// established/related shortcut (so replacing the ruleset never touches any
// other running connection), invalid packets dropped; in input, loopback
// and the tunnels' IKE and ESP; then the user's rules in their order, then
// the rest of the built-in policy, then a counted drop.
func Build(f *Firewall) []Spec {
	b := builder{f: f}
	b.input()
	b.forward()
	b.prerouting()
	b.postrouting()
	return b.out
}

type builder struct {
	f   *Firewall
	out []Spec
}

func (b *builder) add(s Spec) { b.out = append(b.out, s) }

// ifaces returns the interfaces of a role, in the configuration's order.
func (b *builder) ifaces(role string) []string {
	var out []string
	for _, i := range b.f.Interfaces {
		if i.Role == role {
			out = append(out, i.Name)
		}
	}
	return out
}

// expandIf returns the interface names a rule's In or Out stands for: nil
// for any (no match on the interface), the interfaces of a zone (possibly
// none: the rule then matches nothing), or the one interface named. The
// tunnel zone is no set of interfaces: it is "any" here, and zoneWays
// matches it by the data planes' marks, next to the remote subnets.
func (f *Firewall) expandIf(v string) []string {
	switch v {
	case "", ZoneAny, ZoneTunnel:
		return nil
	case RoleWAN, RoleLAN, RoleOpt:
		out := []string{}
		for _, i := range f.Interfaces {
			if i.Role == v {
				out = append(out, i.Name)
			}
		}
		return out
	}
	return []string{v}
}

// remoteSubnets lists every tunnel's remote subnets, deduplicated, in order.
func (f *Firewall) remoteSubnets() []netip.Prefix {
	var out []netip.Prefix
	seen := map[netip.Prefix]bool{}
	for _, t := range f.Tunnels {
		for _, n := range t.RemoteSubnets {
			n = n.Masked()
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// routeTunnelInterfaces lists the route tunnels' interfaces, in order.
func (f *Firewall) routeTunnelInterfaces() []string {
	var out []string
	for _, t := range f.Tunnels {
		if t.Interface != "" && !slices.Contains(out, t.Interface) {
			out = append(out, t.Interface)
		}
	}
	return out
}

// routeTunnelRoutes lists the destinations routed through route tunnels,
// deduplicated, in order.
func (f *Firewall) routeTunnelRoutes() []netip.Prefix {
	var out []netip.Prefix
	for _, t := range f.Tunnels {
		for _, r := range t.Routes {
			if !slices.Contains(out, r.Masked()) {
				out = append(out, r.Masked())
			}
		}
	}
	return out
}

// tunnelWay is one way a packet passes a tunnel: through the userspace
// data plane's TUN interface (name), or through kernel IPsec (ipsec
// exists, on whatever interface).
type tunnelWay struct {
	name  string
	ipsec IPsecMatch
}

// tunnelWays are the ways into or out of a tunnel. netd does not know which
// data plane iked uses (kernel XFRM where the kernel has ESP, else
// userspace), so the tunnel zone allows both.
func tunnelWays() []tunnelWay {
	return []tunnelWay{{name: ipsec.UserspaceInterface}, {ipsec: IPsecExists}}
}

// zoneWays returns how a rule's In or Out is matched: the tunnel ways for
// the tunnel zone, otherwise one way per interface expandIf names.
func (f *Firewall) zoneWays(v string) []tunnelWay {
	if v == ZoneTunnel {
		return tunnelWays()
	}
	var out []tunnelWay
	for _, name := range orAnyIf(f.expandIf(v)) {
		out = append(out, tunnelWay{name: name})
	}
	return out
}

// orAnyIf turns "no restriction" (nil) into one empty name, so that loops
// over interfaces run once without a match on the interface.
func orAnyIf(names []string) []string {
	if names == nil {
		return []string{""}
	}
	return names
}

func orAnyNet(nets []netip.Prefix) []netip.Prefix {
	if len(nets) == 0 {
		return []netip.Prefix{{}}
	}
	return nets
}

func orAnyPort(ports []PortRange) []PortRange {
	if len(ports) == 0 {
		return []PortRange{{}}
	}
	return ports
}

// sameFamily reports whether two optional networks can match one packet.
func sameFamily(a, b netip.Prefix) bool {
	return !a.IsValid() || !b.IsValid() || a.Addr().Is4() == b.Addr().Is4()
}

// narrow restricts a rule's networks to the tunnel zone's: the result holds
// the more specific of every overlapping pair. Nets empty means any, so the
// zone's networks are the result; a result of nil with zone networks given
// means the rule cannot match.
func narrow(nets, zone []netip.Prefix) []netip.Prefix {
	if len(nets) == 0 {
		return zone
	}
	var out []netip.Prefix
	for _, n := range nets {
		for _, z := range zone {
			if n.Overlaps(z) {
				if n.Bits() >= z.Bits() {
					out = append(out, n.Masked())
				} else {
					out = append(out, z)
				}
			}
		}
	}
	return out
}

func (b *builder) conntrack(chain string) {
	b.add(Spec{Chain: chain, Comment: "builtin:established", CtState: CtEstablished | CtRelated, Verdict: VerdictAccept})
	b.add(Spec{Chain: chain, Comment: "builtin:invalid", CtState: CtInvalid, Verdict: VerdictDrop})
}

func (b *builder) input() {
	c := ChainInput
	b.conntrack(c)
	b.add(Spec{Chain: c, Comment: "builtin:loopback", IIf: "lo", Verdict: VerdictAccept})

	// IKE and ESP from the tunnels' peers, before the user's rules so that
	// a broad user drop cannot cut the tunnels by accident.
	var peers []netip.Prefix
	anyPeer := false
	seen := map[netip.Addr]bool{}
	for _, t := range b.f.Tunnels {
		switch {
		case !t.Peer.IsValid():
			anyPeer = true
		case !seen[t.Peer]:
			seen[t.Peer] = true
			peers = append(peers, netip.PrefixFrom(t.Peer, t.Peer.BitLen()))
		}
	}
	if anyPeer {
		peers = []netip.Prefix{{}}
	}
	for _, p := range peers {
		b.add(Spec{Chain: c, Comment: "builtin:ike", Src: p, Proto: protoUDP, DPort: PortRange{500, 500}, Verdict: VerdictAccept})
		b.add(Spec{Chain: c, Comment: "builtin:ike", Src: p, Proto: protoUDP, DPort: PortRange{4500, 4500}, Verdict: VerdictAccept})
		b.add(Spec{Chain: c, Comment: "builtin:esp", Src: p, Proto: protoESP, Verdict: VerdictAccept})
	}

	b.userRules(c)

	// IPv6 neighbour discovery (router solicitation to redirect) is
	// needed on every link for IPv6 to work at all.
	b.add(Spec{Chain: c, Comment: "builtin:ipv6-nd", Proto: protoICMPv6, ICMP: &ICMPTypes{133, 137}, Verdict: VerdictAccept})
	// DHCP answers to our client: broadcast replies are not tracked.
	for _, wan := range b.ifaces(RoleWAN) {
		b.add(Spec{Chain: c, Comment: "builtin:dhcp-client", IIf: wan, Proto: protoUDP, SPort: PortRange{67, 67}, DPort: PortRange{68, 68}, Verdict: VerdictAccept})
	}
	for _, lan := range b.ifaces(RoleLAN) {
		b.add(Spec{Chain: c, Comment: "builtin:lan-webui", IIf: lan, Proto: protoTCP, DPort: PortRange{443, 443}, Verdict: VerdictAccept})
		b.add(Spec{Chain: c, Comment: "builtin:lan-webui", IIf: lan, Proto: protoTCP, DPort: PortRange{80, 80}, Verdict: VerdictAccept})
		b.add(Spec{Chain: c, Comment: "builtin:lan-ping", IIf: lan, Proto: protoICMP, ICMP: &ICMPTypes{8, 8}, Verdict: VerdictAccept})
		b.add(Spec{Chain: c, Comment: "builtin:lan-ping", IIf: lan, Proto: protoICMPv6, ICMP: &ICMPTypes{128, 128}, Verdict: VerdictAccept})
		if slices.Contains(b.f.DHCPServers, lan) {
			b.add(Spec{Chain: c, Comment: "builtin:lan-dhcp", IIf: lan, Proto: protoUDP, DPort: PortRange{67, 67}, Verdict: VerdictAccept})
		}
	}
	// An opt network (a guest Wi-Fi, a DMZ) gets nothing by default, and
	// serving it DHCP opens only that: UDP 67 on its link, not the web UI
	// or ping. The server's answers need no rule (the table has no output
	// chain); the DNS servers it hands out are the WAN's upstream
	// ones (the box runs no resolver), which opt hosts reach only through
	// forward rules of the admin's, like everything else beyond the link.
	for _, opt := range b.ifaces(RoleOpt) {
		if slices.Contains(b.f.DHCPServers, opt) {
			b.add(Spec{Chain: c, Comment: "builtin:opt-dhcp", IIf: opt, Proto: protoUDP, DPort: PortRange{67, 67}, Verdict: VerdictAccept})
		}
	}
	b.add(Spec{Chain: c, Comment: "builtin:drop", Verdict: VerdictDrop})
}

func (b *builder) forward() {
	c := ChainForward
	// Traffic for a tunnel's remote subnet never leaves by the WAN in
	// clear: while a tunnel is down its routes are gone and the default
	// route would take it there, unencrypted and (tunnel-no-nat) with the
	// LAN's private source. Kernel IPsec's packets leave by the WAN too,
	// routed into their SA (rt ipsec exists), and pass. The drop comes
	// first: before the user's rules, so that a broad LAN-to-WAN accept
	// cannot reopen the leak, and before the established shortcut, so
	// that a connection started while the tunnel was up does not carry on
	// in clear once it goes down.
	for _, wan := range b.ifaces(RoleWAN) {
		for _, r := range append(b.f.remoteSubnets(), b.f.routeTunnelRoutes()...) {
			b.add(Spec{Chain: c, Comment: "builtin:tunnel-no-leak", OIf: wan, Dst: r, Encrypted: IPsecMissing, Verdict: VerdictDrop})
		}
	}
	// TCP through a route tunnel fits its MTU (1438, or the cloud's 1399
	// or 1400) even when the hosts' path MTU discovery does not work: the
	// SYN and SYN-ACK leaving by the tunnel carry at most the route's MTU
	// less the headers as their MSS. It only lowers the option and lets
	// the packet on to the rules below (before the established shortcut,
	// which the SYN-ACK would take).
	for _, ifc := range b.f.routeTunnelInterfaces() {
		b.add(Spec{Chain: c, Comment: "builtin:tunnel-mss", OIf: ifc, Proto: protoTCP, TCPSyn: true, Verdict: VerdictClampMSS})
	}
	b.conntrack(c)
	b.userRules(c)

	// Port forwards: the DNAT in prerouting rewrote the destination, so the
	// accept matches the inside address and port, and only connections that
	// were really forwarded (ct status dnat).
	for _, pf := range b.f.PortForwards {
		dport := pf.External
		if pf.DestinationPort != 0 {
			dport = PortRange{pf.DestinationPort, pf.DestinationPort + (pf.External.Hi - pf.External.Lo)}
		}
		for _, in := range orAnyIf(b.f.expandIf(pf.In)) {
			for _, src := range orAnyNet(pf.Sources) {
				if !sameFamily(src, netip.PrefixFrom(pf.Destination, pf.Destination.BitLen())) {
					continue
				}
				b.add(Spec{Chain: c, Comment: "forward:" + pf.Name, IIf: in, Src: src,
					Dst: netip.PrefixFrom(pf.Destination, pf.Destination.BitLen()), Proto: protocols[pf.Protocol],
					DPort: dport, CtDNAT: true, Verdict: VerdictAccept})
			}
		}
	}
	lans, wans := b.ifaces(RoleLAN), b.ifaces(RoleWAN)
	remote := b.f.remoteSubnets()
	for _, lan := range lans {
		for _, wan := range wans {
			b.add(Spec{Chain: c, Comment: "builtin:lan-to-wan", IIf: lan, OIf: wan, Verdict: VerdictAccept})
		}
	}
	for _, lan := range lans {
		for _, r := range remote {
			for _, w := range tunnelWays() {
				b.add(Spec{Chain: c, Comment: "builtin:lan-to-tunnel", IIf: lan, OIf: w.name, Dst: r, Encrypted: w.ipsec, Verdict: VerdictAccept})
			}
		}
	}
	// A route tunnel is a site-to-site link like the others: the LAN
	// reaches what is routed through it, and what comes out of it reaches
	// the LAN.
	for _, lan := range lans {
		for _, ifc := range b.f.routeTunnelInterfaces() {
			b.add(Spec{Chain: c, Comment: "builtin:lan-to-tunnel", IIf: lan, OIf: ifc, Verdict: VerdictAccept})
			b.add(Spec{Chain: c, Comment: "builtin:tunnel-to-lan", IIf: ifc, OIf: lan, Verdict: VerdictAccept})
		}
	}
	// A remote subnet's source address is only believed when the packet
	// came out of a tunnel: anyone on the WAN can send a packet from such
	// an address.
	for _, lan := range lans {
		for _, r := range remote {
			for _, w := range tunnelWays() {
				b.add(Spec{Chain: c, Comment: "builtin:tunnel-to-lan", IIf: w.name, OIf: lan, Src: r, Decrypted: w.ipsec, Verdict: VerdictAccept})
			}
		}
	}
	b.add(Spec{Chain: c, Comment: "builtin:drop", Verdict: VerdictDrop})
}

// userRules expands the user's rules of one chain: one Spec for every
// combination of interface, network and port range the rule names, in the
// rule's order, each preceded by a rate-limited log Spec when the rule logs.
func (b *builder) userRules(chain string) {
	for _, r := range b.f.Rules {
		if r.Chain != chain {
			continue
		}
		verdict := r.Action
		comment := "rule:" + r.Name
		for _, in := range b.f.ruleSides(r.In, r.Sources) {
			for _, out := range b.f.ruleSides(r.Out, r.Destinations) {
				for _, src := range orAnyNet(in.nets) {
					for _, dst := range orAnyNet(out.nets) {
						if !sameFamily(src, dst) {
							continue
						}
						for _, sp := range orAnyPort(r.SourcePorts) {
							for _, dp := range orAnyPort(r.DestinationPorts) {
								s := Spec{Chain: chain, Comment: comment, IIf: in.way.name, OIf: out.way.name, Src: src, Dst: dst,
									Decrypted: in.way.ipsec, Encrypted: out.way.ipsec,
									Proto: protocols[r.Protocol], SPort: sp, DPort: dp, Verdict: verdict}
								if r.Log {
									l := s
									l.Verdict, l.Log, l.Comment = VerdictLog, logPrefix(r.Name, r.Action), comment+logSuffix
									b.add(l)
								}
								b.add(s)
							}
						}
					}
				}
			}
		}
	}
}

// ruleSide is one way a rule's In or Out matches, with the networks
// (sources for In, destinations for Out) it matches there.
type ruleSide struct {
	way  tunnelWay
	nets []netip.Prefix
}

// ruleSides expands a rule's In or Out with its networks. The tunnel zone
// is the policy tunnels' ways with the networks narrowed to their remote
// subnets (none when they do not overlap), and every route tunnel's
// interface with the networks as given.
func (f *Firewall) ruleSides(zone string, nets []netip.Prefix) []ruleSide {
	if zone != ZoneTunnel {
		var out []ruleSide
		for _, w := range f.zoneWays(zone) {
			out = append(out, ruleSide{w, nets})
		}
		return out
	}
	var out []ruleSide
	if remote := f.remoteSubnets(); len(remote) > 0 {
		if n := narrow(nets, remote); len(n) > 0 {
			for _, w := range tunnelWays() {
				out = append(out, ruleSide{w, n})
			}
		}
	}
	for _, ifc := range f.routeTunnelInterfaces() {
		out = append(out, ruleSide{tunnelWay{name: ifc}, nets})
	}
	return out
}

// logSuffix marks the comment of a log Spec, whose counter Hits leaves out
// (the rule it precedes counts the same packets).
const logSuffix = "/log"

// logPrefix is what the kernel log line starts with: "fg rule ssh drop: ".
// The kernel takes at most 127 bytes.
func logPrefix(name, what string) string {
	p := "fg " + name + " " + what + ": "
	if len(p) > 127 {
		p = p[:125] + ": "
	}
	return p
}

func (b *builder) prerouting() {
	for _, pf := range b.f.PortForwards {
		for _, in := range orAnyIf(b.f.expandIf(pf.In)) {
			for _, src := range orAnyNet(pf.Sources) {
				if !sameFamily(src, netip.PrefixFrom(pf.Destination, pf.Destination.BitLen())) {
					continue
				}
				// Only connections to the box itself: transit traffic that
				// happens to use the same port is not hijacked.
				s := Spec{Chain: chainPrerouting, Comment: "forward:" + pf.Name, IIf: in, Src: src,
					Proto: protocols[pf.Protocol], DPort: pf.External, ToLocal: true, Verdict: VerdictDNAT,
					DNAT: pf.Destination, DNATPort: pf.DestinationPort}
				if pf.Log {
					l := s
					l.Verdict, l.Log, l.DNAT, l.DNATPort = VerdictLog, logPrefix(pf.Name, "forward"), netip.Addr{}, 0
					l.Comment += logSuffix
					b.add(l)
				}
				b.add(s)
			}
		}
	}
}

func (b *builder) postrouting() {
	c := chainPostrouting
	// Traffic into a tunnel keeps its source address: the remote side's
	// traffic selectors name our LAN, not our WAN address.
	for _, r := range b.f.remoteSubnets() {
		b.add(Spec{Chain: c, Comment: "builtin:tunnel-no-nat", Dst: r, Verdict: VerdictAccept})
	}
	for _, e := range b.f.Exemptions {
		for _, src := range orAnyNet(e.Sources) {
			for _, dst := range e.Destinations {
				if sameFamily(src, dst) {
					b.add(Spec{Chain: c, Comment: "exempt:" + e.Name, Src: src, Dst: dst, Verdict: VerdictAccept})
				}
			}
		}
	}
	// Masquerade is IPv4's answer to one public address; IPv6 LANs have
	// their own global addresses and are routed, so without sources naming
	// IPv6 networks it stays IPv4 only.
	for _, m := range b.f.Masquerade {
		for _, src := range orAnyNet(m.Sources) {
			s := Spec{Chain: c, Comment: "masquerade:" + m.Name, OIf: m.Interface, Src: src, Verdict: VerdictMasquerade}
			if !src.IsValid() {
				s.Family = 4
			}
			b.add(s)
		}
	}
}
