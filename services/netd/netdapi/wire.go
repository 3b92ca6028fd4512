// Package netdapi is the contract of netd's local API: its socket, routes
// and wire types, and the one Go client. It is a leaf: netd builds its
// handler from these types, and the console (and anything else that shows
// netd's state) imports this package, not netd, and so links neither
// nftables nor the DHCP code.
//
// The routes, HTTP+JSON on netd's unix socket:
//
//	GET  /v1/status     links (state, addresses, counters), leases, the last apply, the NTP client
//	GET  /v1/firewall   the ruleset in nft syntax and the hit counters
//	POST /v1/reconcile  apply the current configuration again now
//	GET  /v1/links      every link the kernel has, configured or not, with
//	                    its state, addresses and counters
//
// netd serves all of them on Socket (root only) and only GET /v1/links on
// WebSocket, which the web UI's group may use: the UI shows the box's
// ports as netd sees them and reads nothing of /sys itself.
package netdapi

import (
	"net/netip"
	"time"

	"github.com/flashgate/flashgate/internal/paths"
)

// Socket is where netd serves its local API on the appliance.
const Socket = paths.NetdSocket

// WebSocket is where netd serves the part of its API the web UI may use:
// GET /v1/links, nothing that changes the box or shows its firewall.
const WebSocket = paths.NetdWebSocket

// The routes.
const (
	RouteStatus    = "GET /v1/status"
	RouteFirewall  = "GET /v1/firewall"
	RouteReconcile = "POST /v1/reconcile"
	RouteLinks     = "GET /v1/links"
)

// Status is what the local API reports.
type Status struct {
	Board        string            `json:"board"`
	ConfigSource string            `json:"config_source"`
	Revision     uint64            `json:"revision"`
	LastApply    ApplyResult       `json:"last_apply"`
	Error        string            `json:"error,omitempty"`
	Links        []LinkStatus      `json:"links"`
	Leases       []Lease           `json:"dhcp_leases"`
	DHCPServers  []DHCPServerState `json:"dhcp_servers"`
	Time         *TimeStatus       `json:"time,omitempty"`
}

// DHCPServerState is one LAN DHCP server with its settings and leases.
type DHCPServerState struct {
	Link string `json:"link"`
	Pool string `json:"pool"` // first-last
	// LeaseTime is in seconds.
	LeaseTime    int64         `json:"lease_time"`
	StaticLeases []StaticLease `json:"static_leases"`
	Leases       []ServerLease `json:"leases"`
}

// StaticLease is a configured static lease as the status shows it.
type StaticLease struct {
	MAC      string     `json:"mac"`
	Address  netip.Addr `json:"address"`
	Hostname string     `json:"hostname,omitempty"`
}

// LinkStatus is what the status API reports for one interface, and
// GET /v1/links for every link of the kernel (Role is empty for a link the
// configuration does not name).
type LinkStatus struct {
	Name    string `json:"name"`
	Role    string `json:"role"`
	Present bool   `json:"present"`
	// Port says the link is a network port, a NIC on the PCI bus or USB,
	// which the configuration could name: not loopback, a tunnel, a
	// bridge, a veth or another link made in software.
	Port      bool     `json:"port"`
	Up        bool     `json:"up"`        // administratively
	Operstate string   `json:"operstate"` // "up", "down", "lowerlayerdown", ...
	MTU       int      `json:"mtu"`
	MAC       string   `json:"mac,omitempty"`
	Addresses []string `json:"addresses"`
	RxBytes   uint64   `json:"rx_bytes"`
	TxBytes   uint64   `json:"tx_bytes"`
	RxPackets uint64   `json:"rx_packets"`
	TxPackets uint64   `json:"tx_packets"`
	RxErrors  uint64   `json:"rx_errors"`
	TxErrors  uint64   `json:"tx_errors"`
	RxDropped uint64   `json:"rx_dropped"`
	TxDropped uint64   `json:"tx_dropped"`
}

// ApplyResult is what the last Apply did, for the status API.
type ApplyResult struct {
	At               time.Time `json:"at"`
	FirewallReplaced bool      `json:"firewall_replaced"`
	Rules            int       `json:"rules"`
	Error            string    `json:"error,omitempty"`
	// NetworkError is what could not be configured on the links
	// (a missing NIC, an unreachable gateway); the firewall is still
	// in force and the next Apply retries.
	NetworkError string `json:"network_error,omitempty"`
}

// Lease is what the DHCP client obtained on a WAN link.
type Lease struct {
	Link     string        `json:"link"`
	Address  netip.Prefix  `json:"address"` // with the subnet's prefix length
	Router   netip.Addr    `json:"router,omitzero"`
	DNS      []netip.Addr  `json:"dns,omitempty"`
	Search   []string      `json:"search,omitempty"` // DNS search domains (option 119, else the domain name, 15)
	Server   netip.Addr    `json:"server"`
	Obtained time.Time     `json:"obtained"`
	Duration time.Duration `json:"duration"`
	Renew    time.Duration `json:"renew"`  // T1
	Rebind   time.Duration `json:"rebind"` // T2
}

// Expires is when the lease ends unless renewed.
func (l *Lease) Expires() time.Time { return l.Obtained.Add(l.Duration) }

// ServerLease is one address given out.
type ServerLease struct {
	MAC      string     `json:"mac"`
	Address  netip.Addr `json:"address"`
	Hostname string     `json:"hostname,omitempty"`
	Expires  time.Time  `json:"expires"`
	Offered  bool       `json:"offered"`          // offered, not yet requested
	Static   bool       `json:"static,omitempty"` // the client's static lease
}

// RuleCounter is one kernel rule with its hit counter.
type RuleCounter struct {
	Chain   string `json:"chain"`
	Handle  uint64 `json:"handle"`
	Comment string `json:"comment"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// HitCounter is the traffic matched by one policy element (all the kernel
// rules that carry its comment).
type HitCounter struct {
	Rule    string `json:"rule"` // the Spec comment: "rule:ssh", "builtin:drop"
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// TimeStatus is the time sync's state, in netd's status.
type TimeStatus struct {
	Servers  []string  `json:"servers"` // as configured
	State    string    `json:"state"`   // "off" (no servers), "unsynchronized", "synchronized"
	LastSync time.Time `json:"last_sync,omitzero"`
	Server   string    `json:"server,omitempty"` // of the last sync: "pool.ntp.org (192.0.2.1)"
	Stratum  int       `json:"stratum,omitempty"`
	// OffsetSeconds is the correction of the last sync; DelaySeconds
	// the round trip it was measured over.
	OffsetSeconds float64   `json:"offset_seconds"`
	DelaySeconds  float64   `json:"delay_seconds"`
	Correction    string    `json:"correction,omitempty"` // "stepped" or "slewed"
	LastError     string    `json:"last_error,omitempty"` // of the last poll, if it failed
	NextPoll      time.Time `json:"next_poll,omitzero"`
}

// FirewallStatus is the answer of GET /v1/firewall.
type FirewallStatus struct {
	Table  string        `json:"table"`
	Rules  []string      `json:"rules"` // as built, in nft syntax
	Hits   []HitCounter  `json:"hits"`  // by policy element
	Kernel []RuleCounter `json:"kernel"`
	Error  string        `json:"error,omitempty"`
}

// ReconcileResult answers POST /v1/reconcile: what the apply did, and why
// it did not apply everything (status 409).
type ReconcileResult struct {
	ApplyResult
	Problem string `json:"problem,omitempty"`
}
