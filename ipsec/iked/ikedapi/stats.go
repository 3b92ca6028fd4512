package ikedapi

// Stats are the daemon-wide counters of GET /v1/stats: what the IKE engine
// and the data plane dropped, by cause.
type Stats struct {
	DataPlane string      `json:"data_plane"`
	HalfOpen  int         `json:"half_open"` // responder IKE SAs waiting for IKE_AUTH
	IKE       IKECounters `json:"ike"`
	// SendDrops counts IKE datagrams the kernel would not take at once
	// (send buffer full); NATIKEDrops, IKE from the NAT-T port dropped
	// because the engine was behind (userspace data plane).
	SendDrops   uint64 `json:"send_drops"`
	NATIKEDrops uint64 `json:"nat_t_ike_drops"`
	// QueueDrops counts IKE datagrams read from the IKE sockets and
	// dropped because their sender's worker was behind (a flood).
	QueueDrops uint64 `json:"ike_queue_drops"`
	// ESP holds the userspace data plane's drops that belong to no SA
	// (unknown SPI, truncated, oversized); nil with kernel XFRM.
	ESP *ESPCounters `json:"esp,omitempty"`
}

// IKECounters are the IKE engine's counters (ipsec/ike's StatsSnapshot,
// field for field: the daemon converts one into the other, so the compiler
// keeps them in step).
type IKECounters struct {
	Received, Malformed, UnsupportedCritical, UnknownSPI, BadICV, OutOfWindow uint64
	RetransmitsAnswered, Retransmits, AuthFailures, CookiesSent               uint64
	HalfOpenRefused, HalfOpenExpired, NoConfig                                uint64
	SourceLimited, InitTooLarge, EarlyRequests                                uint64
	FragmentsSent, FragmentsReceived, Reassembled, FragmentsDropped           uint64 // RFC 7383
}

// ESPCounters are the userspace ESP device's own counters (ipsec/esp's
// DeviceCounterSnapshot, field for field).
type ESPCounters struct {
	UnknownSPI, Truncated, Oversized, NoSA, BadOffload, EncapErrors uint64
	TxErrors, RxErrors, IKE, Keepalives                             uint64
}
