package ike

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// TS types (RFC 7296 3.13.1).
const (
	TSIPv4Range = 7
	TSIPv6Range = 8
)

// Selector is one traffic selector: an address range, an IP protocol (0 =
// any) and a port range.
type Selector struct {
	Protocol           uint8
	StartPort, EndPort uint16
	Start, End         netip.Addr
}

// SelectorFromPrefix is the selector covering a prefix, any protocol and port.
func SelectorFromPrefix(p netip.Prefix) Selector {
	p = p.Masked()
	return Selector{EndPort: 0xffff, Start: p.Addr(), End: lastAddr(p)}
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range a {
		for bit := 0; bit < 8; bit++ {
			if i*8+bit >= bits {
				a[i] |= 0x80 >> bit
			}
		}
	}
	r, _ := netip.AddrFromSlice(a)
	return r
}

func (s Selector) String() string {
	str := s.Start.String() + "-" + s.End.String()
	if p, ok := s.prefix(); ok {
		str = p.String()
	}
	if s.Protocol != 0 || s.StartPort != 0 || s.EndPort != 0xffff {
		str += fmt.Sprintf("[%d/%d-%d]", s.Protocol, s.StartPort, s.EndPort)
	}
	return str
}

// prefix returns the selector's range as one prefix when it is exactly one.
func (s Selector) prefix() (netip.Prefix, bool) {
	for bits := 0; bits <= s.Start.BitLen(); bits++ {
		p := netip.PrefixFrom(s.Start, bits).Masked()
		if p.Addr() == s.Start && lastAddr(p) == s.End {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// Prefixes covers the selector's address range with the fewest prefixes.
func (s Selector) Prefixes() []netip.Prefix {
	var out []netip.Prefix
	cur := s.Start
	for i := 0; i < 256 && cur.IsValid() && cur.Compare(s.End) <= 0; i++ {
		// Largest prefix starting at cur that stays within End.
		bits := cur.BitLen()
		for bits > 0 {
			p := netip.PrefixFrom(cur, bits-1).Masked()
			if p.Addr() != cur || lastAddr(p).Compare(s.End) > 0 {
				break
			}
			bits--
		}
		p := netip.PrefixFrom(cur, bits)
		out = append(out, p)
		last := lastAddr(p)
		if last == s.End {
			break
		}
		cur = last.Next()
	}
	return out
}

// intersect returns the overlap of two selectors.
func (s Selector) intersect(o Selector) (Selector, bool) {
	if s.Start.Is4() != o.Start.Is4() {
		return Selector{}, false
	}
	var r Selector
	switch {
	case s.Protocol == o.Protocol || o.Protocol == 0:
		r.Protocol = s.Protocol
	case s.Protocol == 0:
		r.Protocol = o.Protocol
	default:
		return Selector{}, false
	}
	r.StartPort, r.EndPort = max(s.StartPort, o.StartPort), min(s.EndPort, o.EndPort)
	if r.StartPort > r.EndPort {
		return Selector{}, false
	}
	r.Start, r.End = s.Start, s.End
	if o.Start.Compare(r.Start) > 0 {
		r.Start = o.Start
	}
	if o.End.Compare(r.End) < 0 {
		r.End = o.End
	}
	if r.Start.Compare(r.End) > 0 {
		return Selector{}, false
	}
	return r, true
}

// within reports whether s is contained in o.
func (s Selector) within(o Selector) bool {
	r, ok := s.intersect(o)
	return ok && r == s
}

// narrow intersects every offered selector with every configured one,
// keeping the order of the configuration (RFC 7296 2.9: the responder
// narrows to a subset of what was offered).
func narrow(configured, offered []Selector) []Selector {
	var all []Selector
	for _, c := range configured {
		for _, o := range offered {
			if r, ok := c.intersect(o); ok && !containsSelector(all, r) {
				all = append(all, r)
			}
		}
	}
	// A trap-triggered initiator sends the packet's host first and then the
	// net (RFC 7296 2.9); the host adds nothing once the net is accepted.
	var out []Selector
	for i, r := range all {
		covered := false
		for j, o := range all {
			if i != j && r != o && r.within(o) {
				covered = true
			}
		}
		if !covered {
			out = append(out, r)
		}
	}
	return out
}

func containsSelector(ss []Selector, s Selector) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TS is TSi or TSr.
type TS struct {
	Responder bool
	Selectors []Selector
}

func (p *TS) Type() PayloadType {
	if p.Responder {
		return PayloadTSr
	}
	return PayloadTSi
}

func (p *TS) appendBody(b []byte) []byte {
	b = append(b, byte(len(p.Selectors)), 0, 0, 0)
	for _, s := range p.Selectors {
		typ, alen := byte(TSIPv4Range), 4
		if s.Start.Is6() {
			typ, alen = TSIPv6Range, 16
		}
		b = append(b, typ, s.Protocol)
		b = binary.BigEndian.AppendUint16(b, uint16(8+2*alen))
		b = binary.BigEndian.AppendUint16(b, s.StartPort)
		b = binary.BigEndian.AppendUint16(b, s.EndPort)
		b = append(b, s.Start.AsSlice()...)
		b = append(b, s.End.AsSlice()...)
	}
	return b
}

func decodeTS(t PayloadType, body []byte) (*TS, error) {
	if len(body) < 4 {
		return nil, ErrTruncated
	}
	n := int(body[0])
	b := body[4:]
	if n*16 > len(b) {
		return nil, fmt.Errorf("%d selectors in %d bytes: %w", n, len(b), ErrMalformed)
	}
	p := &TS{Responder: t == PayloadTSr, Selectors: make([]Selector, 0, n)}
	for i := 0; i < n; i++ {
		if len(b) < 8 {
			return nil, fmt.Errorf("selector %d: %w", i, ErrTruncated)
		}
		l := int(binary.BigEndian.Uint16(b[2:]))
		var alen int
		switch b[0] {
		case TSIPv4Range:
			alen = 4
		case TSIPv6Range:
			alen = 16
		default:
			return nil, fmt.Errorf("selector %d type %d: %w", i, b[0], ErrMalformed)
		}
		if l != 8+2*alen || l > len(b) {
			return nil, fmt.Errorf("selector %d length %d: %w", i, l, ErrMalformed)
		}
		s := Selector{Protocol: b[1], StartPort: binary.BigEndian.Uint16(b[4:]), EndPort: binary.BigEndian.Uint16(b[6:])}
		s.Start, _ = netip.AddrFromSlice(b[8 : 8+alen])
		s.End, _ = netip.AddrFromSlice(b[8+alen : 8+2*alen])
		p.Selectors = append(p.Selectors, s)
		b = b[l:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d bytes after the selectors: %w", len(b), ErrMalformed)
	}
	return p, nil
}
