// Package ipsec holds the types shared by the IKE daemon and the two data
// planes (kernel XFRM and userspace ESP): what a negotiated CHILD_SA is, and
// the interface through which iked installs and removes it. Data flows one
// way: ipsec/ike negotiates, ipsec/iked decides, a DataPlane carries packets.
package ipsec

import (
	"net/netip"
	"time"
)

// UserspaceInterface is the TUN interface of the userspace ESP data plane:
// packets routed into it are encrypted by iked, and packets that come out of
// it were decrypted by iked. netd's firewall trusts a remote subnet's
// source address only on this interface or with a kernel IPsec secpath.
const UserspaceInterface = "fgesp0"

// Transform names an ESP algorithm by its Linux crypto API name, which both
// data planes understand: "rfc4106(gcm(aes))", "rfc7539esp(chacha20,poly1305)",
// "cbc(aes)", "hmac(sha256)". Integrity is empty for AEAD transforms.
type Transform struct {
	Encryption string
	EncKeyBits int // key length without salt (AES-GCM adds 32 bits of salt to Key)
	Integrity  string
	ICVBits    int // 128 for GCM and for hmac(sha256) truncated to 128
}

// ChildSA is one direction of a negotiated CHILD_SA in tunnel mode: the
// outer addresses, the SPI, the keys and the traffic it protects. The
// inbound and outbound halves of a pair share ReqID.
type ChildSA struct {
	ReqID    uint32
	SPI      uint32
	Inbound  bool
	Src, Dst netip.Addr // outer (gateway) addresses of this direction

	// EncapSrcPort and EncapDstPort are non-zero when ESP is carried in UDP
	// (RFC 3948, NAT-T), normally 4500.
	EncapSrcPort, EncapDstPort uint16

	Transform Transform
	EncKey    []byte // for AEAD: key followed by the 4-byte salt
	IntegKey  []byte

	LocalTS, RemoteTS []netip.Prefix // traffic selectors, from our side's view
	// IfID is non-zero for the SAs of a route-based tunnel: the XFRM
	// interface ID of its interface (TunnelInterface.IfID). Its traffic
	// goes in and out through that interface, not by policy alone.
	IfID         uint32
	ReplayWindow uint32 // packets; at least 1024 for userspace ESP

	SoftLifetime, HardLifetime time.Duration
	SoftBytes, HardBytes       uint64 // 0 = unlimited
}

// Zero overwrites the key material. Called when the SA dies so that keys do
// not linger in memory.
func (c *ChildSA) Zero() {
	for i := range c.EncKey {
		c.EncKey[i] = 0
	}
	for i := range c.IntegKey {
		c.IntegKey[i] = 0
	}
}

// SAStats are the counters a data plane keeps per SA, shown in status.
type SAStats struct {
	Bytes, Packets            uint64
	ReplayDrops, AuthFailures uint64
	LastUsed                  time.Time
}

// Expire reports that an SA reached its soft or hard limit (by time or bytes)
// inside the data plane, so iked can rekey (soft) or tear down (hard).
type Expire struct {
	SPI  uint32
	Hard bool
}

// DataPlane is where iked installs negotiated CHILD_SAs. Two implementations
// exist: ipsec/xfrm (the kernel's ESP, used on the appliance so that the
// board's crypto engine does the work) and ipsec/esp (userspace ESP over TUN,
// for kernels without ESP).
//
// Contract: AddPair installs both directions of one CHILD_SA and the routes
// or policies that send LocalTS->RemoteTS traffic into it; once it returns
// nil, traffic flows. During a rekey the new pair is added before the old
// one is deleted; both may be installed at once with the same ReqID, and
// outbound traffic uses the newest. Once a pair is installed, AddPair
// zeroes the keys of in and out (the data plane holds its own: keyed
// ciphers, or the kernel's SAs), so that callers may keep the ChildSAs for
// their other fields without keeping keys. DeletePair removes one pair by
// its inbound SPI. Implementations must be safe for concurrent use.
type DataPlane interface {
	Name() string // "xfrm" or "userspace", shown in status
	AddPair(in, out *ChildSA) error
	DeletePair(inboundSPI uint32) error
	Stats(spi uint32) (SAStats, error)
	Expires() <-chan Expire
	Close() error
}

// TunnelInterface is the interface of a route-based tunnel (ipsecN): what
// is routed into it is encrypted into the tunnel's newest CHILD_SA, and
// what that tunnel's SAs decrypt comes out of it. The kernel plane makes it
// an XFRM interface with IfID; the userspace plane a TUN. Routes are
// present only while the interface carries at least one CHILD_SA, so that
// a tunnel that is down (DPD, a deleted SA) leaves its destinations to
// another route, such as a second tunnel's with a higher metric.
type TunnelInterface struct {
	Name      string // ipsecN
	IfID      uint32 // non-zero
	MTU       int
	Addresses []netip.Prefix // inner addresses, e.g. 169.254.10.2/30
	Routes    []TunnelRoute
}

// TunnelRoute is a route through a TunnelInterface.
type TunnelRoute struct {
	Destination netip.Prefix
	Gateway     netip.Addr // optional: an inner address of the peer
	Metric      int
}

// Interfaces is implemented by data planes that carry route-based
// tunnels. SetInterfaces makes the set of tunnel interfaces want: it
// creates the missing ones, updates MTU, addresses and routes of the
// others and removes those no longer wanted. Pairs whose IfID names an
// interface that is not there are refused by AddPair.
type Interfaces interface {
	SetInterfaces(want []TunnelInterface) error
}

// Trap holds a tunnel's traffic in the data plane before any CHILD_SA
// carries it (start action on-traffic): its RemoteTS are routed into the
// data plane, and the first packet for them is reported on Acquires
// instead of leaving unprotected. The kernel's trap is an outbound policy
// without an SA, named by ReqID and needing both outer addresses; the
// userspace plane's is a route into its TUN.
type Trap struct {
	ReqID             uint32
	Local, Remote     netip.Addr // outer (gateway) addresses
	LocalTS, RemoteTS []netip.Prefix
}

// Acquire reports traffic that hit a trap (or found no SA): the kernel
// names the trap by ReqID and the policy's Remote selector; the userspace
// plane, which has no reqids, by the packet's destination Dst.
type Acquire struct {
	ReqID  uint32
	Remote netip.Prefix
	Dst    netip.Addr
}

// Traps is the part of a data plane that start action on-traffic needs.
// AddTrap and DeleteTrap are given the same Trap; an installed pair
// carries the trapped traffic over the trap, and when the last pair goes
// the trap holds it again. Acquires never blocks the plane: what the
// reader does not take in time is dropped (the traffic comes again).
type Traps interface {
	AddTrap(Trap) error
	DeleteTrap(Trap) error
	Acquires() <-chan Acquire
}
