package config

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"time"
)

// DHCPServer is the DHCP server of one interface. Every field may be left
// out, and a configuration that has no dhcp_server block at all means what
// it meant before the block existed: a LAN interface with a static IPv4
// address serves its automatic pool (see DefaultDHCPRange) with
// DefaultLeaseTime, and other interfaces serve nothing. That is why the
// block is omitted from the JSON when it is empty, and why Enabled is an
// OptionalBool: "enabled" absent is the role's default, not false. An opt
// interface (a guest network, a DMZ) serves only when enabled is true, so
// that configurations written before opt could serve keep their meaning.
type DHCPServer struct {
	Enabled OptionalBool `json:"enabled,omitzero"`
	// RangeStart and RangeEnd bound the addresses handed out to any
	// client; both empty is the automatic pool.
	RangeStart Addr `json:"range_start,omitzero"`
	RangeEnd   Addr `json:"range_end,omitzero"`
	// LeaseTime empty is DefaultLeaseTime.
	LeaseTime    Duration      `json:"lease_time,omitzero"`
	StaticLeases []StaticLease `json:"static_leases,omitempty"`
}

// DHCP server limits and defaults.
const (
	DefaultLeaseTime = 12 * time.Hour
	MinLeaseTime     = 2 * time.Minute
	MaxLeaseTime     = 7 * 24 * time.Hour
	// MaxDHCPRange bounds a configured range (a /16's hosts): the server
	// keeps its leases, and an offer for every client that asks, in RAM.
	MaxDHCPRange = 65534
)

// IsZero reports whether nothing is configured, so that the block is left
// out of the JSON (encoding/json's omitzero calls it).
func (s DHCPServer) IsZero() bool {
	return !s.Enabled.IsSet() && !s.RangeStart.IsSet() && !s.RangeEnd.IsSet() &&
		!s.LeaseTime.IsSet() && len(s.StaticLeases) == 0
}

// ServesDHCP reports whether the interface runs a DHCP server: an enabled
// LAN interface with a static address whose server is not turned off, or
// an opt interface with a static address whose server is turned on.
// netd still needs an IPv4 address with room for a pool; Validate insists
// on one only when the admin configured the server explicitly.
func (i *Interface) ServesDHCP() bool {
	return i.Enabled && (i.Role == RoleLAN || i.Role == RoleOpt) && i.Addressing == AddressingStatic &&
		i.DHCPServer.Enabled.Or(i.DHCPServerByDefault())
}

// DHCPServerByDefault is whether the interface's DHCP server runs when its
// dhcp_server block does not say: on a LAN, as before the setting existed;
// nowhere else (an opt network is served only when the admin asks).
func (i *Interface) DHCPServerByDefault() bool { return i.Role == RoleLAN }

// DHCPAddress is the address the DHCP server serves from: the interface's
// first IPv4 address. ok is false when it has none.
func (i *Interface) DHCPAddress() (netip.Prefix, bool) {
	for _, a := range i.Addresses {
		if a.check() == nil && a.IsValid() && a.Addr().Is4() {
			return a.Prefix, true
		}
	}
	return netip.Prefix{}, false
}

// LeaseDuration is the configured lease time, or DefaultLeaseTime.
func (s *DHCPServer) LeaseDuration() time.Duration {
	if s.LeaseTime.IsSet() && s.LeaseTime.check() == nil {
		return s.LeaseTime.Duration
	}
	return DefaultLeaseTime
}

// DefaultDHCPRange is the automatic pool on a network with the box's
// address p: the upper half of the subnet without the broadcast address,
// at most its last 1023 addresses. IPv4 networks from /8 to /29 have one.
// (The box's own address, if it falls inside, is never handed out.)
func DefaultDHCPRange(p netip.Prefix) (first, last netip.Addr, ok bool) {
	if !p.Addr().Is4() || p.Bits() > 29 || p.Bits() < 8 {
		return netip.Addr{}, netip.Addr{}, false
	}
	base := addrU32(p.Masked().Addr())
	size := uint32(1) << (32 - p.Bits())
	lo, hi := base+size/2, base+size-2
	if hi-lo > 1022 {
		lo = hi - 1022
	}
	return u32Addr(lo), u32Addr(hi), true
}

// DHCPRange is the range the server of an interface with address p hands
// out: the configured one, or the automatic pool.
func (s *DHCPServer) DHCPRange(p netip.Prefix) (first, last netip.Addr, ok bool) {
	if s.RangeStart.IsValid() && s.RangeEnd.IsValid() {
		return s.RangeStart.Addr, s.RangeEnd.Addr, true
	}
	return DefaultDHCPRange(p)
}

func addrU32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func u32Addr(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// StaticLease gives the client with one MAC address always the same
// address (a printer, a server). In the JSON it is an object; on the
// command line and in the text form it is one word, as dnsmasq's
// dhcp-host writes it: MAC,ADDRESS[,HOSTNAME].
type StaticLease struct {
	MAC      string `json:"mac"` // 02:00:5e:10:00:01
	Address  Addr   `json:"address"`
	Hostname string `json:"hostname,omitempty"` // given to the client (option 12)
}

// staticLeaseJSON is StaticLease without its methods, for the JSON object.
type staticLeaseJSON struct {
	MAC      string `json:"mac"`
	Address  Addr   `json:"address"`
	Hostname string `json:"hostname,omitempty"`
}

// ParseStaticLease parses the one-word form MAC,ADDRESS[,HOSTNAME]. The
// parts are checked as they are in the JSON form, by Validate.
func ParseStaticLease(s string) (StaticLease, error) {
	parts := strings.Split(strings.TrimSpace(s), ",")
	if len(parts) < 2 || len(parts) > 3 {
		return StaticLease{}, fmt.Errorf("%q is not a static lease (write it as MAC,ADDRESS or MAC,ADDRESS,HOSTNAME)", s)
	}
	l := StaticLease{MAC: strings.TrimSpace(parts[0])}
	var err error
	if l.Address, err = ParseAddr(parts[1]); err != nil {
		return StaticLease{}, fmt.Errorf("static lease %q: %w", s, err)
	}
	if len(parts) == 3 {
		l.Hostname = strings.TrimSpace(parts[2])
	}
	return l, nil
}

// HardwareAddr parses MAC as an Ethernet address.
func (l StaticLease) HardwareAddr() (net.HardwareAddr, error) {
	hw, err := net.ParseMAC(l.MAC)
	if err != nil || len(hw) != 6 {
		return nil, fmt.Errorf("%q is not an Ethernet MAC address (like 02:00:5e:10:00:01)", l.MAC)
	}
	return hw, nil
}

// MarshalText is the one-word form; it makes a static lease one value in
// paths and the text form.
func (l StaticLease) MarshalText() ([]byte, error) {
	s := l.MAC + "," + l.Address.String()
	if l.Hostname != "" {
		s += "," + l.Hostname
	}
	return []byte(s), nil
}

func (l StaticLease) MarshalJSON() ([]byte, error) { return json.Marshal(staticLeaseJSON(l)) }

// UnmarshalJSON takes the object form, strictly (an unknown field is an
// error, as everywhere in the configuration).
func (l *StaticLease) UnmarshalJSON(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var j staticLeaseJSON
	if err := d.Decode(&j); err != nil {
		return fmt.Errorf("static lease: %w", err)
	}
	*l = StaticLease(j)
	return nil
}

// OptionalBool is a yes or no that may be left unsaid, so that its default
// can depend on other settings. Its zero value is unset.
type OptionalBool struct{ set, value bool }

// Bool returns a set OptionalBool.
func Bool(v bool) OptionalBool { return OptionalBool{set: true, value: v} }

// IsSet reports whether a value was given.
func (o OptionalBool) IsSet() bool { return o.set }

// Or returns the value, or def when none was given.
func (o OptionalBool) Or(def bool) bool {
	if o.set {
		return o.value
	}
	return def
}

func (o OptionalBool) String() string {
	if !o.set {
		return ""
	}
	if o.value {
		return "true"
	}
	return "false"
}

func (o OptionalBool) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

func (o OptionalBool) MarshalJSON() ([]byte, error) {
	if !o.set {
		return []byte("null"), nil
	}
	return []byte(o.String()), nil
}

func (o *OptionalBool) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "null":
		*o = OptionalBool{}
	case "true", "false":
		*o = Bool(string(b) == "true")
	default:
		return &json.UnmarshalTypeError{Value: jsonValueKind(b), Type: boolType}
	}
	return nil
}

var boolType = reflect.TypeFor[bool]()

// jsonValueKind names the JSON kind of a raw value for an error message.
func jsonValueKind(b []byte) string {
	switch {
	case len(b) == 0:
		return "nothing"
	case b[0] == '"':
		return "string"
	case b[0] == '{':
		return "object"
	case b[0] == '[':
		return "array"
	}
	return "number"
}
