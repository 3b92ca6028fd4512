package netd

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// Desired is the whole network state netd makes the kernel match.
type Desired struct {
	Links      []Link
	Addresses  []Address
	Routes     []Route
	Forwarding bool // net.ipv4.ip_forward and net.ipv6.conf.all.forwarding
	Firewall   Firewall
	// DHCPServers are the DHCP servers to run, one per LAN or opt link at
	// most.
	DHCPServers []DHCPScope
}

// DHCPScope is what one DHCP server serves: from the box's Address on
// Link, the addresses First to Last (without the box's own and the
// reserved ones) to any client for LeaseTime, and each reserved address
// to its MAC alone.
type DHCPScope struct {
	Link         string
	Address      netip.Prefix
	First, Last  netip.Addr
	LeaseTime    time.Duration
	Reservations []Reservation
	Path         string // "interfaces[eth1].dhcp_server"
}

// Reservation is a static lease: MAC always gets Address.
type Reservation struct {
	MAC      string // as net.HardwareAddr.String writes it: 02:00:5e:10:00:01
	Address  netip.Addr
	Hostname string // sent to the client when set
}

// Equal reports whether two scopes serve the same; a server whose scope
// changed is restarted.
func (sc DHCPScope) Equal(o DHCPScope) bool {
	return sc.Link == o.Link && sc.Address == o.Address && sc.First == o.First && sc.Last == o.Last &&
		sc.LeaseTime == o.LeaseTime && slices.Equal(sc.Reservations, o.Reservations)
}

// check refuses a scope a server cannot serve.
func (sc DHCPScope) check() error {
	subnet := sc.Address.Masked()
	switch {
	case !sc.Address.Addr().Is4() || sc.Address.Bits() > 30:
		return fmt.Errorf("%s is not an IPv4 address with room for clients", sc.Address)
	case !sc.First.Is4() || !sc.Last.Is4() || sc.Last.Less(sc.First):
		return fmt.Errorf("%s-%s is not a range of IPv4 addresses", sc.First, sc.Last)
	case !subnet.Contains(sc.First) || !subnet.Contains(sc.Last):
		return fmt.Errorf("the range %s-%s is not inside %s", sc.First, sc.Last, subnet)
	case sc.LeaseTime < time.Minute:
		return fmt.Errorf("lease time %s is too short", sc.LeaseTime)
	}
	for _, r := range sc.Reservations {
		if !subnet.Contains(r.Address) || r.Address == sc.Address.Addr() {
			return fmt.Errorf("static lease %s for %s is not an address for a client on %s", r.Address, r.MAC, subnet)
		}
	}
	return nil
}

// Interface roles, as the board definitions and the configuration name them.
const (
	RoleWAN = "wan"
	RoleLAN = "lan"
	RoleOpt = "opt"
)

// Link is one network interface netd manages.
type Link struct {
	Name string
	Role string // wan, lan or opt
	Up   bool
	MTU  int  // 0: leave the driver's default
	DHCP bool // run the DHCP client on it (WAN); its lease adds addresses and a default route
	// Path is where the link comes from in the configuration
	// ("interfaces[eth0]"), for error messages.
	Path string
}

// Address is an interface address with its prefix length (192.168.1.1/24).
type Address struct {
	Link   string
	Prefix netip.Prefix
	Path   string // "interfaces[eth1].addresses[0]"
}

// Route is a static route in the main table. Gateway, Link or both are set.
type Route struct {
	Destination netip.Prefix
	Gateway     netip.Addr // zero: directly on Link
	Link        string     // empty: wherever the gateway is reachable
	Metric      int
	Path        string // "routes[office]"
}

// Firewall is what the ruleset is built from: the interfaces and their
// roles (the zones), the tunnels the default policy opens, and the user's
// rules, NAT and port forwards.
type Firewall struct {
	Interfaces   []Interface
	Tunnels      []Tunnel
	Rules        []Rule
	Masquerade   []Masquerade
	Exemptions   []Exemption
	PortForwards []PortForward
	// DHCPServers are the LAN and opt links a DHCP server runs on: the
	// firewall opens UDP 67 on each, and on no other.
	DHCPServers []string
}

// Interface gives an interface its zone. Disabled interfaces are listed too:
// rules may name them, and naming one is not an error.
type Interface struct {
	Name string
	Role string
}

// Tunnel is what the firewall needs to know of an IPsec tunnel: the peer
// that may send IKE and ESP to the box, and the subnets whose traffic is
// forwarded between the LAN and the tunnel without NAT.
type Tunnel struct {
	Name string
	// Peer is the remote gateway's address. The zero Addr means the tunnel
	// only responds and the peer may come from any address.
	Peer          netip.Addr
	LocalSubnets  []netip.Prefix
	RemoteSubnets []netip.Prefix
	Path          string // "tunnels[branch]"
	// Interface is a route tunnel's interface (ipsecN; iked makes it).
	// A route tunnel's subnets are only its selectors and are left out
	// of RemoteSubnets: Routes, the destinations of the routes through
	// Interface, are what it carries.
	Interface string
	Routes    []netip.Prefix
}

// Zones a rule may name instead of an interface. "tunnel" stands for the
// remote subnets of all tunnels: traffic from them (in) or to them (out).
const (
	ZoneAny    = "any"
	ZoneTunnel = "tunnel"
)

// Rule chains.
const (
	ChainInput   = "input"   // to the box itself
	ChainForward = "forward" // through the box
)

// Rule actions.
const (
	ActionAccept = "accept"
	ActionDrop   = "drop"
	ActionReject = "reject"
)

// Rule is one user rule; rules are evaluated in list order, after the
// established/related shortcut and before the built-in policy.
type Rule struct {
	Name  string
	Chain string // input or forward
	// In and Out are a zone (any, wan, lan, opt, tunnel) or an interface
	// name; empty means any. Out is only allowed in the forward chain.
	In, Out          string
	Sources          []netip.Prefix
	Destinations     []netip.Prefix
	Protocol         string // any, tcp, udp, icmp, icmpv6, esp, gre
	SourcePorts      []PortRange
	DestinationPorts []PortRange
	Action           string // accept, drop or reject
	Log              bool
	Path             string // "firewall.rules[ssh]"
}

// PortRange is an inclusive range of ports; Lo == Hi for one port.
type PortRange struct{ Lo, Hi uint16 }

func (r PortRange) String() string {
	if r.Lo == r.Hi {
		return strconv.Itoa(int(r.Lo))
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi)
}

func (r PortRange) overlaps(o PortRange) bool { return r.Lo <= o.Hi && o.Lo <= r.Hi }

// Masquerade rewrites the source address of traffic leaving Interface to
// the interface's own address. No Sources means any source.
type Masquerade struct {
	Name      string
	Interface string
	Sources   []netip.Prefix
	Path      string
}

// Exemption keeps traffic from Sources (any, when empty) to Destinations
// out of masquerade. Tunnel subnets are exempt without being listed.
type Exemption struct {
	Name         string
	Sources      []netip.Prefix
	Destinations []netip.Prefix
	Path         string
}

// PortForward sends connections arriving on In (a zone or an interface) for
// External ports to Destination, on DestinationPort (0: the same port).
type PortForward struct {
	Name            string
	In              string
	Protocol        string // tcp or udp
	External        PortRange
	Destination     netip.Addr
	DestinationPort uint16
	Sources         []netip.Prefix
	Log             bool
	Path            string // "firewall.port_forwards[web]"
}
