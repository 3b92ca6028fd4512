package config

import (
	"crypto/subtle"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// The value types below keep the text the user wrote next to the parsed
// value. Decoding never fails on a malformed value: it is kept as written and
// Validate reports it with its field path ("tunnels[branch].remote_subnets[0]:
// 10.0.0.0/33 is not a network"), which encoding/json cannot do because its
// errors from UnmarshalText carry no path. Once a Config has passed Validate,
// every value is well formed and consumers use the parsed fields directly.

// Prefix is an IP network or an interface address with its prefix length,
// such as 10.1.0.0/16 or 192.168.1.1/24.
type Prefix struct {
	netip.Prefix
	raw string // as written, kept only when it does not parse
}

// ParsePrefix parses s strictly.
func ParsePrefix(s string) (Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return Prefix{raw: s}, fmt.Errorf("%s is not a network", s)
	}
	return Prefix{Prefix: p}, nil
}

// MustPrefix is ParsePrefix for literals in code and tests.
func MustPrefix(s string) Prefix {
	p, err := ParsePrefix(s)
	if err != nil {
		panic(err)
	}
	return p
}

// IsSet reports whether anything was written.
func (p Prefix) IsSet() bool { return p.raw != "" || p.Prefix.IsValid() }

// check returns why the value is malformed, or nil.
func (p Prefix) check() error {
	if p.raw != "" {
		return fmt.Errorf("%s is not a network", p.raw)
	}
	return nil
}

func (p Prefix) String() string {
	if p.raw != "" {
		return p.raw
	}
	if !p.Prefix.IsValid() {
		return ""
	}
	return p.Prefix.String()
}

func (p Prefix) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

func (p *Prefix) UnmarshalText(b []byte) error {
	*p = Prefix{}
	if len(b) == 0 {
		return nil
	}
	*p, _ = ParsePrefix(string(b))
	return nil
}

// Addr is a single IP address.
type Addr struct {
	netip.Addr
	raw string
}

// ParseAddr parses s strictly. Zones (fe80::1%eth0) are refused: the config
// names interfaces explicitly.
func ParseAddr(s string) (Addr, error) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil || a.Zone() != "" {
		return Addr{raw: s}, fmt.Errorf("%s is not an IP address", s)
	}
	return Addr{Addr: a}, nil
}

// MustAddr is ParseAddr for literals in code and tests.
func MustAddr(s string) Addr {
	a, err := ParseAddr(s)
	if err != nil {
		panic(err)
	}
	return a
}

func (a Addr) IsSet() bool { return a.raw != "" || a.Addr.IsValid() }

func (a Addr) check() error {
	if a.raw != "" {
		return fmt.Errorf("%s is not an IP address", a.raw)
	}
	return nil
}

func (a Addr) String() string {
	if a.raw != "" {
		return a.raw
	}
	if !a.Addr.IsValid() {
		return ""
	}
	return a.Addr.String()
}

func (a Addr) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

func (a *Addr) UnmarshalText(b []byte) error {
	*a = Addr{}
	if len(b) == 0 {
		return nil
	}
	*a, _ = ParseAddr(string(b))
	return nil
}

// Duration is a time span written the Go way ("8h", "30s", "1h30m").
type Duration struct {
	time.Duration
	raw string
}

// ParseDuration parses s strictly; negative spans are refused.
func ParseDuration(s string) (Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < 0 {
		return Duration{raw: s}, fmt.Errorf("%s is not a duration (write it like 30s, 5m or 8h)", s)
	}
	return Duration{Duration: d}, nil
}

// Seconds is a Duration literal.
func Seconds(n int) Duration { return Duration{Duration: time.Duration(n) * time.Second} }

func (d Duration) IsSet() bool { return d.raw != "" || d.Duration != 0 }

func (d Duration) check() error {
	if d.raw != "" {
		return fmt.Errorf("%s is not a duration (write it like 30s, 5m or 8h)", d.raw)
	}
	return nil
}

func (d Duration) String() string {
	if d.raw != "" {
		return d.raw
	}
	return d.Duration.String()
}

func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

func (d *Duration) UnmarshalText(b []byte) error {
	*d = Duration{}
	if len(b) == 0 {
		return nil
	}
	*d, _ = ParseDuration(string(b))
	return nil
}

// PortRange is one port ("443") or an inclusive range ("1000-2000").
type PortRange struct {
	Lo, Hi uint16
	raw    string
}

// ParsePortRange parses "443" or "1000-2000". Port 0 is refused.
func ParsePortRange(s string) (PortRange, error) {
	bad := PortRange{raw: s}
	errBad := fmt.Errorf("%s is not a port or port range (1-65535, like 443 or 1000-2000)", s)
	lo, hi, isRange := strings.Cut(strings.TrimSpace(s), "-")
	if !isRange {
		hi = lo
	}
	l, err1 := strconv.ParseUint(lo, 10, 16)
	h, err2 := strconv.ParseUint(hi, 10, 16)
	if err1 != nil || err2 != nil || l == 0 || h < l {
		return bad, errBad
	}
	return PortRange{Lo: uint16(l), Hi: uint16(h)}, nil
}

// Port is a single-port PortRange.
func Port(p uint16) PortRange { return PortRange{Lo: p, Hi: p} }

func (r PortRange) IsSet() bool { return r.raw != "" || r.Lo != 0 }

func (r PortRange) check() error {
	if r.raw != "" {
		return fmt.Errorf("%s is not a port or port range (1-65535, like 443 or 1000-2000)", r.raw)
	}
	return nil
}

// Overlaps reports whether two well-formed ranges share a port.
func (r PortRange) Overlaps(o PortRange) bool { return r.Lo <= o.Hi && o.Lo <= r.Hi }

// Len is the number of ports in the range.
func (r PortRange) Len() int { return int(r.Hi) - int(r.Lo) + 1 }

func (r PortRange) String() string {
	switch {
	case r.raw != "":
		return r.raw
	case r.Lo == 0:
		return ""
	case r.Lo == r.Hi:
		return strconv.Itoa(int(r.Lo))
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi)
}

func (r PortRange) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

func (r *PortRange) UnmarshalText(b []byte) error {
	*r = PortRange{}
	if len(b) == 0 {
		return nil
	}
	*r, _ = ParsePortRange(string(b))
	return nil
}

// Redacted is what secrets look like in the text form, diffs and logs.
const Redacted = "<redacted>"

// Secret holds a pre-shared key or a password hash. JSON carries the real
// value (the store and the local API need it); every human-facing form
// (String, %v, the text form, diffs) shows Redacted instead, so a secret
// cannot end up in a log line by accident.
type Secret struct{ value string }

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{value: s} }

// Reveal returns the secret itself. Call it only where the secret is used.
func (s Secret) Reveal() string { return s.value }

// IsSet reports whether the secret is non-empty.
func (s Secret) IsSet() bool { return s.value != "" }

// Equal compares in constant time (for equal lengths).
func (s Secret) Equal(o Secret) bool {
	return subtle.ConstantTimeCompare([]byte(s.value), []byte(o.value)) == 1
}

func (s Secret) String() string {
	if s.value == "" {
		return ""
	}
	return Redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return "config.Secret{" + s.String() + "}" }

func (s Secret) MarshalText() ([]byte, error) { return []byte(s.value), nil }

func (s *Secret) UnmarshalText(b []byte) error {
	s.value = string(b)
	return nil
}
