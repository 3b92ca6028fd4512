// Package config owns flashgate's configuration: the schema as Go types with
// their defaults, validation with field paths, the JSON and the stable text
// forms, diffs, path edits, schema migrations, backups, and the Store that
// keeps the running configuration, the candidate and the history in a bbolt
// file on the card, with commit, rollback and commit-confirmed.
//
// Every service reads its configuration from here (through configd); nothing
// else writes the card's config file.
package config

// Config is the whole configuration of one appliance. Lists of named things
// (interfaces, tunnels, rules, ...) are ordered slices keyed by Name: order
// matters for firewall rules, and paths address elements by name
// ("tunnels.branch.remote_address").
type Config struct {
	System     System      `json:"system"`
	Interfaces []Interface `json:"interfaces"`
	Routes     []Route     `json:"routes"`
	Firewall   Firewall    `json:"firewall"`
	Tunnels    []Tunnel    `json:"tunnels"`
	// Certificates is the box's certificate store (certificates.go).
	Certificates []Certificate `json:"certificates,omitempty"`
}

// Section names a top-level part of a Config (its JSON name). A change
// notice lists the sections that differ so that each service reconciles
// only what concerns it.
type Section string

// The sections of a Config.
const (
	SectionSystem     Section = "system"
	SectionInterfaces Section = "interfaces"
	SectionRoutes     Section = "routes"
	SectionFirewall   Section = "firewall"
	SectionTunnels    Section = "tunnels"
	// SectionCertificates is the certificate store.
	SectionCertificates Section = "certificates"
)

// Sections are the top-level parts of a Config, in the order they appear.
var Sections = []Section{SectionSystem, SectionInterfaces, SectionRoutes, SectionFirewall, SectionTunnels, SectionCertificates}

// System is the box itself.
type System struct {
	Hostname string  `json:"hostname"`
	Timezone string  `json:"timezone"` // IANA name, e.g. "Europe/Berlin"
	Admins   []Admin `json:"admins"`
	// ConsoleBaud overrides the board's console speed when non-zero.
	ConsoleBaud  int          `json:"console_baud,omitempty"`
	NTPServers   []string     `json:"ntp_servers"`
	RemoteSyslog RemoteSyslog `json:"remote_syslog"`
}

// Admin is an account allowed on the web UI and the console.
type Admin struct {
	Name         string `json:"name"`
	PasswordHash Secret `json:"password_hash"` // PHC string, see SetPassword
}

// RemoteSyslog sends the services' logs to a syslog server. An empty Host
// turns it off.
type RemoteSyslog struct {
	Host     string `json:"host,omitempty"` // IP address or DNS name
	Port     int    `json:"port,omitempty"` // default 514
	Protocol string `json:"protocol,omitempty"`
}

// Interface roles.
const (
	RoleWAN = "wan"
	RoleLAN = "lan"
	RoleOpt = "opt"
)

// Addressing modes.
const (
	AddressingStatic = "static"
	AddressingDHCP   = "dhcp"
)

// Interface is one network port, named by its kernel name (eth0).
type Interface struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Role        string   `json:"role"` // wan, lan or opt
	Enabled     bool     `json:"enabled"`
	Addressing  string   `json:"addressing"`    // static or dhcp
	Addresses   []Prefix `json:"addresses"`     // static only: 192.168.1.1/24
	MTU         int      `json:"mtu,omitempty"` // 0: the driver's default
	// DHCPServer configures the DHCP server of a LAN or opt interface.
	// Left out, a LAN with a static IPv4 address serves its automatic
	// pool and an opt interface serves nothing.
	DHCPServer DHCPServer `json:"dhcp_server,omitzero"`
}

// Route is a static route. Gateway, Interface or both must be given.
type Route struct {
	Name        string `json:"name"`
	Enabled     bool   `json:"enabled"`
	Destination Prefix `json:"destination"`
	Gateway     Addr   `json:"gateway,omitzero"`
	Interface   string `json:"interface,omitempty"`
	Metric      int    `json:"metric,omitempty"`
}

// Firewall holds the user's rules. The built-in policy (nothing from the
// WAN except IKE/ESP of configured peers, web UI only from the LAN, LAN out
// with masquerade, tunnel traffic exempt from NAT) is netd's and is applied
// around these.
type Firewall struct {
	Rules        []Rule        `json:"rules"`
	NAT          NAT           `json:"nat"`
	PortForwards []PortForward `json:"port_forwards"`
}

// Rule chains.
const (
	ChainInput   = "input"   // traffic to the box itself
	ChainForward = "forward" // traffic through the box
)

// Rule actions.
const (
	ActionAccept = "accept"
	ActionDrop   = "drop"
	ActionReject = "reject"
)

// Zones a rule may name instead of an interface. "tunnel" is traffic that
// arrived through, or will leave through, an IPsec tunnel.
var Zones = []string{"any", RoleWAN, RoleLAN, RoleOpt, "tunnel"}

// Protocols a rule or port forward may name.
var Protocols = []string{"any", "tcp", "udp", "icmp", "icmpv6", "esp", "gre"}

// Rule is one user firewall rule; rules are evaluated in list order.
type Rule struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
	Chain   string `json:"chain"` // input or forward
	// In and Out are a zone (see Zones) or an interface name. Out is only
	// meaningful in the forward chain. Empty means any.
	In               string      `json:"in,omitempty"`
	Out              string      `json:"out,omitempty"`
	Sources          []Prefix    `json:"sources,omitempty"`
	Destinations     []Prefix    `json:"destinations,omitempty"`
	Protocol         string      `json:"protocol"` // see Protocols
	SourcePorts      []PortRange `json:"source_ports,omitempty"`
	DestinationPorts []PortRange `json:"destination_ports,omitempty"`
	Action           string      `json:"action"` // accept, drop or reject
	Log              bool        `json:"log,omitempty"`
}

// NAT is source NAT: masquerade out of given interfaces, except for the
// exempted traffic (tunnel subnets are exempt without being listed).
type NAT struct {
	Masquerade []Masquerade   `json:"masquerade"`
	Exemptions []NATExemption `json:"exemptions"`
}

// Masquerade rewrites the source of traffic leaving Interface to the
// interface's address. Empty Sources means any.
type Masquerade struct {
	Name      string   `json:"name"`
	Interface string   `json:"interface"`
	Sources   []Prefix `json:"sources,omitempty"`
}

// NATExemption keeps traffic from Sources to Destinations out of masquerade.
type NATExemption struct {
	Name         string   `json:"name"`
	Sources      []Prefix `json:"sources,omitempty"`
	Destinations []Prefix `json:"destinations"`
}

// PortForward is destination NAT: connections to ExternalPorts on In are
// sent to Destination (DestinationPort + offset into the range).
type PortForward struct {
	Name            string    `json:"name"`
	Enabled         bool      `json:"enabled"`
	In              string    `json:"in"`       // zone or interface, usually wan
	Protocol        string    `json:"protocol"` // tcp or udp
	ExternalPorts   PortRange `json:"external_ports"`
	Destination     Addr      `json:"destination"`
	DestinationPort uint16    `json:"destination_port,omitempty"` // 0: same as external
	Sources         []Prefix  `json:"sources,omitempty"`
	Log             bool      `json:"log,omitempty"`
}

// Tunnel start actions.
const (
	StartInitiate  = "initiate"   // bring it up at once and keep it up
	StartRespond   = "respond"    // wait for the peer
	StartOnTraffic = "on-traffic" // bring it up when traffic for it appears
)

// Data planes.
const (
	DataPlaneAuto      = "auto"      // kernel XFRM when the kernel has ESP, else userspace
	DataPlaneXFRM      = "xfrm"      // kernel
	DataPlaneUserspace = "userspace" // flashgate's ESP over TUN
)

// IKEVersion is the IKE major version a tunnel speaks. Its zero value
// means the default, IKEv2, and the JSON leaves the default out, so that
// configurations written before the field existed read the same and a
// configuration without IKEv1 tunnels stays readable by older firmware.
type IKEVersion int

// IKE versions.
const (
	IKEv1 IKEVersion = 1 // RFC 2409: main mode + quick mode, for old peers
	IKEv2 IKEVersion = 2 // RFC 7296, the default
)

// Or2 returns v with the zero value read as IKEv2.
func (v IKEVersion) Or2() IKEVersion {
	if v == 0 {
		return IKEv2
	}
	return v
}

// IsZero reports whether v is the default (left out of the JSON and the
// text form).
func (v IKEVersion) IsZero() bool { return v == 0 || v == IKEv2 }

// Tunnel modes.
const (
	// ModePolicy: the subnets are the traffic selectors, and traffic
	// between them goes through the tunnel wherever the routes say
	// (XFRM policies, or the userspace plane's routes into its TUN).
	ModePolicy = "policy"
	// ModeRoute: the tunnel is an interface (ipsecN); what the routing
	// table sends into it is encrypted, whatever the subnets. The
	// selectors default to any-to-any (0.0.0.0/0 both ways).
	ModeRoute = "route"
)

// RouteInterfacePrefix is how a route tunnel's interface is named:
// "ipsec" and a number from 0 to MaxRouteInterface.
const (
	RouteInterfacePrefix = "ipsec"
	MaxRouteInterface    = 9999
)

// Tunnel is one IPsec site-to-site tunnel, authenticated with a PSK or certificates.
type Tunnel struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
	// LocalAddress may be left empty: iked uses the address the kernel
	// picks on the route to the peer (usually the WAN's).
	LocalAddress Addr `json:"local_address,omitzero"`
	// RemoteAddress may be empty only when StartAction is respond: the
	// peer is then identified by its ID alone.
	RemoteAddress Addr `json:"remote_address,omitzero"`
	// LocalID and RemoteID default to the addresses when empty.
	LocalID  string `json:"local_id,omitempty"`
	RemoteID string `json:"remote_id,omitempty"`
	PSK      Secret `json:"psk"`
	// Auth is how this box authenticates, psk (default) or cert;
	// RemoteAuth how the peer must (default: as Auth).
	Auth       string `json:"auth,omitempty"`
	RemoteAuth string `json:"remote_auth,omitempty"`
	// LocalCert names the store's certificate (with its key) this box
	// authenticates with; TrustedCAs the store's CAs the peer's
	// certificate must chain to.
	LocalCert  string   `json:"local_cert,omitempty"`
	TrustedCAs []string `json:"trusted_cas,omitempty"`
	// IKEFragmentSize is the IP packet size IKE messages are fragmented
	// to (RFC 7383) when larger and the peer supports it; 0 means 1280.
	IKEFragmentSize int `json:"ike_fragment_size,omitempty"`
	// Proposals in strongSwan syntax, most preferred first.
	IKEProposals  []string `json:"ike_proposals"`
	ESPProposals  []string `json:"esp_proposals"`
	LocalSubnets  []Prefix `json:"local_subnets"`
	RemoteSubnets []Prefix `json:"remote_subnets"`
	IKELifetime   Duration `json:"ike_lifetime"`
	ChildLifetime Duration `json:"child_lifetime"`
	DPDInterval   Duration `json:"dpd_interval"` // 0s: no liveness checks
	DPDTimeout    Duration `json:"dpd_timeout"`
	StartAction   string   `json:"start_action"`
	DataPlane     string   `json:"data_plane"`
	// IKEVersion is 2 unless the peer only speaks IKEv1 (1).
	IKEVersion IKEVersion `json:"ike_version,omitzero"`
	// LegacyAlgorithms allows 3des, md5, prfmd5, modp1024 and modp1536 in
	// the proposals, for peers that can do nothing better. The web UI,
	// the console and the status show such proposals as weak.
	LegacyAlgorithms bool `json:"legacy_algorithms,omitempty"`

	// Mode is policy (the default, also when empty) or route.
	Mode string `json:"mode,omitempty"`
	// Interface is a route tunnel's interface, ipsecN (see
	// RouteInterfacePrefix); its XFRM if_id is N+1 (IfID).
	Interface string `json:"interface,omitempty"`
	// MTU of a route tunnel's interface; 0 sizes it for the ESP overhead
	// of the tunnel's proposals on a 1500-byte path (RouteMTU).
	MTU int `json:"mtu,omitempty"`
	// InnerAddresses are a route tunnel's own addresses on its
	// interface, usually the /30 (or /31) the cloud gives each tunnel.
	InnerAddresses []Prefix `json:"inner_addresses,omitempty"`
}

// IsRoute reports whether t is a route-based tunnel.
func (t Tunnel) IsRoute() bool { return t.Mode == ModeRoute }

// IfID is the XFRM interface ID of a route tunnel (N+1 for ipsecN: the
// kernel refuses if_id 0), or 0 for a policy tunnel or a malformed name.
func (t Tunnel) IfID() uint32 {
	if !t.IsRoute() {
		return 0
	}
	n, ok := routeInterfaceNumber(t.Interface)
	if !ok {
		return 0
	}
	return uint32(n) + 1
}

// RouteTunnelByInterface returns the enabled or disabled route tunnel whose
// interface is name, or nil.
func (c *Config) RouteTunnelByInterface(name string) *Tunnel {
	for i := range c.Tunnels {
		if t := &c.Tunnels[i]; t.IsRoute() && t.Interface == name {
			return t
		}
	}
	return nil
}

// Tunnel returns the tunnel called name, or nil.
func (c *Config) Tunnel(name string) *Tunnel {
	for i := range c.Tunnels {
		if c.Tunnels[i].Name == name {
			return &c.Tunnels[i]
		}
	}
	return nil
}

// Interface returns the interface called name, or nil.
func (c *Config) Interface(name string) *Interface {
	for i := range c.Interfaces {
		if c.Interfaces[i].Name == name {
			return &c.Interfaces[i]
		}
	}
	return nil
}

// Admin returns the admin account called name, or nil.
func (c *Config) Admin(name string) *Admin {
	for i := range c.System.Admins {
		if c.System.Admins[i].Name == name {
			return &c.System.Admins[i]
		}
	}
	return nil
}
