package config

import (
	"fmt"
	"strconv"
	"strings"
)

// routeInterfaceNumber parses "ipsecN" (N from 0 to MaxRouteInterface, no
// leading zeros, so that one number has one name).
func routeInterfaceNumber(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, RouteInterfacePrefix)
	if !ok || digits == "" || len(digits) > 4 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || n > MaxRouteInterface || strconv.Itoa(n) != digits {
		return 0, false
	}
	return n, true
}

// PathMTU is the outer path RouteMTU sizes a route tunnel's interface
// for: Ethernet without jumbo frames.
const PathMTU = 1500

// espOverhead is what ESP adds around one inner packet for one transform:
// the IV, the integrity check value and the cipher's block, to which the
// inner packet plus the two-byte trailer is padded.
type espOverhead struct{ iv, icv, block int }

// espOverheadOf returns the largest overhead of the transforms proposal
// may negotiate (a proposal may list several encryption and integrity
// algorithms), and false if it names no encryption.
func espOverheadOf(proposal string) (espOverhead, bool) {
	var encs []espOverhead
	icv := 0
	for _, tok := range strings.Split(proposal, "-") {
		switch {
		case tok == "chacha20poly1305":
			encs = append(encs, espOverhead{iv: 8, icv: 16, block: 4})
		case strings.HasPrefix(tok, "aes") && strings.Contains(tok, "gcm"):
			n, _ := strconv.Atoi(tok[strings.Index(tok, "gcm")+3:])
			if n > 16 { // in bits: gcm64, gcm96, gcm128
				n /= 8
			}
			encs = append(encs, espOverhead{iv: 8, icv: n, block: 4})
		case tok == "aes128" || tok == "aes192" || tok == "aes256":
			encs = append(encs, espOverhead{iv: 16, block: 16})
		case tok == "3des":
			encs = append(encs, espOverhead{iv: 8, block: 8})
		case tok == "sha1" || tok == "md5":
			icv = max(icv, 12)
		case tok == "sha256":
			icv = max(icv, 16)
		case tok == "sha384":
			icv = max(icv, 24)
		case tok == "sha512":
			icv = max(icv, 32)
		}
	}
	if len(encs) == 0 {
		return espOverhead{}, false
	}
	worst := espOverhead{}
	for _, e := range encs {
		if e.icv == 0 {
			e.icv = icv
		}
		worst = espOverhead{iv: max(worst.iv, e.iv), icv: max(worst.icv, e.icv), block: max(worst.block, e.block)}
	}
	return worst, true
}

// RouteMTU is the MTU of a route tunnel's interface: t.MTU when set, else
// the largest inner packet that, after the ESP overhead of every transform
// t proposes, an outer IP header (IPv6 when the peer's address is IPv6)
// and the UDP header of NAT-T (counted always: NAT may appear on the path
// later), still fits a PathMTU-byte path. For AES-GCM over IPv4 that is
// 1438, for AES-CBC with SHA-256 1422.
func (t Tunnel) RouteMTU() int {
	if t.MTU != 0 {
		return t.MTU
	}
	outer := 20
	if t.RemoteAddress.IsValid() && !t.RemoteAddress.Is4() {
		outer = 40
	}
	worst := espOverhead{iv: 16, icv: 16, block: 16} // when no proposal parses
	found := false
	for _, p := range t.ESPProposals {
		if o, ok := espOverheadOf(p); ok {
			if !found {
				worst, found = o, true
				continue
			}
			worst = espOverhead{iv: max(worst.iv, o.iv), icv: max(worst.icv, o.icv), block: max(worst.block, o.block)}
		}
	}
	room := PathMTU - outer - 8 /* UDP */ - 8 /* SPI, sequence number */ - worst.iv - worst.icv
	return room/worst.block*worst.block - 2 /* pad length, next header */
}

// checkRouteTunnel checks the route-mode fields of t at path; taken holds
// the interfaces other route tunnels already use.
func (v *validator) checkRouteTunnel(path string, t *Tunnel, taken map[string]string) {
	if !t.IsRoute() {
		for field, set := range map[string]bool{"interface": t.Interface != "", "mtu": t.MTU != 0, "inner_addresses": len(t.InnerAddresses) > 0} {
			if set {
				v.add(path+"."+field, "only a route tunnel (mode route) has an interface, MTU or inner addresses")
			}
		}
		return
	}
	switch _, ok := routeInterfaceNumber(t.Interface); {
	case t.Interface == "":
		v.add(path+".interface", "a route tunnel needs an interface, %s0 to %s%d", RouteInterfacePrefix, RouteInterfacePrefix, MaxRouteInterface)
	case !ok:
		v.add(path+".interface", "%q is not %sN (N from 0 to %d, no leading zeros)", t.Interface, RouteInterfacePrefix, MaxRouteInterface)
	case v.c.Interface(t.Interface) != nil:
		v.add(path+".interface", "%s is also a network interface in interfaces", t.Interface)
	case taken[t.Interface] != "":
		v.add(path+".interface", "%s is already the interface of %s", t.Interface, taken[t.Interface])
	default:
		taken[t.Interface] = path
	}
	if t.StartAction == StartOnTraffic {
		v.add(path+".start_action", "a route tunnel starts with initiate or respond: with any-to-any selectors, every packet would be traffic for it")
	}
	if t.MTU != 0 && (t.MTU < 576 || t.MTU > 9000) {
		v.add(path+".mtu", "%d is out of range (576-9000, or 0 to size it for the ESP overhead)", t.MTU)
	}
	if len(t.InnerAddresses) > 2 {
		v.add(path+".inner_addresses", "at most two (one IPv4, one IPv6)")
	}
	for i, a := range t.InnerAddresses {
		ap := fmt.Sprintf("%s.inner_addresses[%d]", path, i)
		if err := a.check(); err != nil || !a.IsValid() {
			v.add(ap, "not an address with a prefix length, like 169.254.10.2/30")
			continue
		}
		switch bits := a.Bits(); {
		case a.Addr().Is4() && bits != 30 && bits != 31:
			v.add(ap, "%s: an IPv4 inner address is a /30 or a /31 (the tunnel's two ends)", a)
		case a.Addr().Is4() && bits == 30 && (a.Addr().As4()[3]&3 == 0 || a.Addr().As4()[3]&3 == 3):
			v.add(ap, "%s is the network or broadcast address of its /30", a)
		case a.Addr().Is6() && (bits < 64 || bits > 127):
			v.add(ap, "%s: an IPv6 inner address is a /64 to a /127", a)
		}
	}
}
