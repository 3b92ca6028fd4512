package ipsec

import "time"

// TunnelState is the one-word state of a configured tunnel.
type TunnelState string

const (
	StateDown       TunnelState = "down"       // not up, and not trying (disabled, respond-only, on-traffic waiting: see WaitingForTraffic)
	StateConnecting TunnelState = "connecting" // IKE in progress
	StateUp         TunnelState = "up"         // IKE_SA and at least one CHILD_SA established
	StateFailed     TunnelState = "failed"     // the last attempt failed; Reason says why, a retry is scheduled
)

// WaitingForTraffic starts the Reason of a tunnel with start action
// on-traffic that is down and ready: its remote subnets are trapped, and
// the first packet for them brings it up. What ended its last SA or
// attempt may follow after "; ".
const WaitingForTraffic = "waiting for traffic (start action: on-traffic)"

// TunnelStatus is what iked reports for one configured tunnel, on its local
// API (/run/flashgate/iked.sock, GET /v1/tunnels) and through the web UI's
// JSON API. It is the contract between iked, the web UI and the console.
type TunnelStatus struct {
	Name      string      `json:"name"`
	State     TunnelState `json:"state"`
	Reason    string      `json:"reason,omitempty"` // plain language, set when not up: "peer answered NO_PROPOSAL_CHOSEN: ..."; when up, only why a rekey of the IKE SA failed ("IKE_SA rekey failed: ...")
	Since     time.Time   `json:"since"`            // when State last changed
	DataPlane string      `json:"data_plane"`       // "xfrm" or "userspace"
	Driver    string      `json:"driver,omitempty"` // kernel crypto driver doing the ESP work, e.g. "cbc-aes-geode"
	// Interface is a route-based tunnel's interface (ipsecN); routes
	// through it are there while the tunnel is up.
	Interface string `json:"interface,omitempty"`

	LocalAddr  string `json:"local_addr"`
	RemoteAddr string `json:"remote_addr"` // address:port the peer is reached at (4500 after NAT-T float)

	// Weak lists the tunnel's configured proposals that use weak
	// algorithms (legacy ones allowed by legacy_algorithms, or sha1), as
	// "ike aes128-sha1-modp1024: sha1, modp1024".
	Weak []string `json:"weak,omitempty"`

	IKE      *IKESAStatus    `json:"ike_sa,omitempty"`
	Children []ChildSAStatus `json:"child_sas,omitempty"`
	Events   []TunnelEvent   `json:"events,omitempty"` // most recent last, bounded
	// EventsTotal counts the tunnel's events since it was configured (or
	// iked started): Events holds only the last of them.
	EventsTotal int `json:"events_total,omitempty"`
}

// IKESAStatus describes the established IKE_SA of a tunnel.
type IKESAStatus struct {
	InitiatorSPI string        `json:"initiator_spi"` // hex
	ResponderSPI string        `json:"responder_spi"`
	Initiator    bool          `json:"initiator"` // we initiated it
	Proposal     string        `json:"proposal"`  // strongSwan syntax, e.g. "aes128gcm16-prfsha256-ecp256"
	NATT         bool          `json:"nat_t"`     // ESP and IKE on UDP 4500
	Established  time.Time     `json:"established"`
	RekeyIn      time.Duration `json:"rekey_in"`
}

// ChildSAStatus describes one CHILD_SA pair.
type ChildSAStatus struct {
	InboundSPI  string        `json:"inbound_spi"` // hex, 8 digits
	OutboundSPI string        `json:"outbound_spi"`
	Proposal    string        `json:"proposal"` // e.g. "aes128gcm16"
	LocalTS     []string      `json:"local_ts"`
	RemoteTS    []string      `json:"remote_ts"`
	BytesIn     uint64        `json:"bytes_in"`
	BytesOut    uint64        `json:"bytes_out"`
	PacketsIn   uint64        `json:"packets_in"`
	PacketsOut  uint64        `json:"packets_out"`
	Drops       uint64        `json:"drops"` // replay + authentication failures + malformed
	Established time.Time     `json:"established"`
	RekeyIn     time.Duration `json:"rekey_in"`
}

// TunnelEvent is one line of a tunnel's recent history.
type TunnelEvent struct {
	Time    time.Time `json:"time"`
	Message string    `json:"message"`
}
