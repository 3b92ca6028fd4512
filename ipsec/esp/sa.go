package esp

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashgate/flashgate/ipsec"
)

// Errors returned by Encap and Decap. Every dropped packet maps to one of
// them and to a counter.
var (
	ErrTruncated    = errors.New("esp: packet truncated")
	ErrUnknownSPI   = errors.New("esp: unknown SPI")
	ErrReplay       = errors.New("esp: replayed or too old sequence number")
	ErrAuth         = errors.New("esp: ICV verification failed")
	ErrBadPadding   = errors.New("esp: bad padding or next header")
	ErrDummy        = errors.New("esp: dummy packet (next header 59)")
	ErrBadInner     = errors.New("esp: inner packet is not IPv4 or IPv6")
	ErrOversized    = errors.New("esp: packet does not fit the buffer")
	ErrSeqExhausted = errors.New("esp: sequence numbers exhausted, SA needs rekey")
	ErrExpired      = errors.New("esp: SA reached its hard lifetime")
	ErrPolicy       = errors.New("esp: inner addresses outside the SA's traffic selectors")
)

// softSeqMargin is how many sequence numbers before the 32-bit wrap the
// SA asks for a rekey, so that the new SA is up before the old one must stop.
const softSeqMargin = 1 << 24

// Counters are the per-SA statistics, updated atomically from any worker.
type Counters struct {
	Bytes, Packets atomic.Uint64
	ReplayDrops    atomic.Uint64
	AuthFailures   atomic.Uint64
	BadPadding     atomic.Uint64 // bad padding, unknown next header or malformed inner packet
	PolicyDrops    atomic.Uint64 // inner addresses outside the traffic selectors
	Late           atomic.Uint64 // packets accepted behind the highest sequence number
	MaxLate        atomic.Uint64 // the furthest behind one arrived
	lastUsed       atomic.Int64  // unix nanoseconds
}

// noteLate records a packet that arrived late by distance sequence
// numbers. Peers with the common 32-packet replay window drop what is
// later than that, so this is what to look at when they report replays.
func (c *Counters) noteLate(distance uint64) {
	c.Late.Add(1)
	for {
		m := c.MaxLate.Load()
		if distance <= m || c.MaxLate.CompareAndSwap(m, distance) {
			return
		}
	}
}

// CounterSnapshot is a copy of Counters at one moment.
type CounterSnapshot struct {
	Bytes, Packets, ReplayDrops, AuthFailures, BadPadding, PolicyDrops uint64
	Late, MaxLate                                                      uint64
	LastUsed                                                           time.Time
}

// SA is one direction of a CHILD_SA: its keys, sequence numbers, replay
// window and counters. Encap is for outbound SAs, Decap for inbound ones.
// All methods are safe for concurrent use.
//
// The fields are in an order that leaves no padding between them: 280
// bytes, in Go's 288-byte size class, where the order they were declared in
// first took 296 and the 320-byte class (a hub holds two SAs per branch).
type SA struct {
	SPI   uint32
	ReqID uint32
	// IfID is the route tunnel interface the SA belongs to (0: none):
	// its traffic comes from and goes to that interface's TUN.
	IfID uint32
	// EncapSrcPort and EncapDstPort are the UDP ports of ESP-in-UDP, zero
	// for raw ESP.
	EncapSrcPort, EncapDstPort uint16
	Src, Dst                   netip.Addr
	LocalTS, RemoteTS          []netip.Prefix

	suite suite

	seq atomic.Uint64 // outbound: last sequence number sent
	// txMu is held by the TX worker that is sealing and sending packets of
	// this SA, from reserving their sequence numbers until the kernel has
	// them, so that workers never put an SA's packets on the wire out of
	// order: peers with a 32-packet replay window would drop them.
	txMu   sync.Mutex
	replay *replayWindow // inbound

	softBytes, hardBytes uint64
	softDone, hardDone   atomic.Bool
	dead                 atomic.Bool
	Inbound              bool
	onExpire             func(sa *SA, hard bool)

	Counters Counters
}

// NewSA keys an SA from what IKE negotiated. onExpire, if not nil, is called
// once when the SA reaches its soft limit and once at its hard limit (by
// bytes or sequence numbers; time limits are the Device's business). It is
// called from the packet path and must not block.
func NewSA(c *ipsec.ChildSA, onExpire func(sa *SA, hard bool)) (*SA, error) {
	s, err := newSuite(c.Transform, c.EncKey, c.IntegKey)
	if err != nil {
		return nil, fmt.Errorf("SA %08x: %w", c.SPI, err)
	}
	if c.SPI < 256 {
		// SPIs 1..255 are reserved by IANA and 0 marks IKE in UDP 4500.
		return nil, fmt.Errorf("SA %08x: SPI below 256 is reserved", c.SPI)
	}
	sa := &SA{
		SPI: c.SPI, ReqID: c.ReqID, Inbound: c.Inbound, Src: c.Src, Dst: c.Dst,
		EncapSrcPort: c.EncapSrcPort, EncapDstPort: c.EncapDstPort,
		LocalTS: c.LocalTS, RemoteTS: c.RemoteTS, IfID: c.IfID,
		suite:     *s,
		softBytes: c.SoftBytes, hardBytes: c.HardBytes,
		onExpire: onExpire,
	}
	if c.Inbound {
		w := c.ReplayWindow
		if w < 1024 {
			w = 1024
		}
		sa.replay = newReplayWindow(w)
	}
	return sa, nil
}

// Overhead is the most bytes Encap adds to an inner packet of length n.
func (sa *SA) Overhead(n int) int {
	s := &sa.suite
	return espHeaderLen + int(s.ivLen) + padLen(n, int(s.blockAlign)) + 2 + int(s.icvLen)
}

func padLen(n, align int) int {
	return (align - (n+2)%align) % align
}

// Snapshot returns the counters.
func (sa *SA) Snapshot() CounterSnapshot {
	c := &sa.Counters
	s := CounterSnapshot{
		Bytes: c.Bytes.Load(), Packets: c.Packets.Load(),
		ReplayDrops: c.ReplayDrops.Load(), AuthFailures: c.AuthFailures.Load(),
		BadPadding: c.BadPadding.Load(), PolicyDrops: c.PolicyDrops.Load(),
		Late: c.Late.Load(), MaxLate: c.MaxLate.Load(),
	}
	if ns := c.lastUsed.Load(); ns != 0 {
		s.LastUsed = time.Unix(0, ns)
	}
	return s
}

// Touch records that the SA carried traffic at now. Workers call it once
// per batch rather than once per packet: reading the clock costs more than
// sealing a small packet.
func (sa *SA) Touch(now time.Time) { sa.Counters.lastUsed.Store(now.UnixNano()) }

// Kill stops the SA: Encap and Decap fail with ErrExpired from now on.
func (sa *SA) Kill() { sa.dead.Store(true) }

// Zero kills the SA and overwrites the key material it holds (the HMAC
// key of CBC transforms). The SA keeps nothing of the ChildSA it was made
// from: the Device zeroes its keys once the pair is installed. The
// expanded key schedules inside the standard library's cipher objects
// cannot be reached; they become garbage with the SA.
func (sa *SA) Zero() {
	sa.Kill()
	if c := sa.suite.cbc; c != nil {
		clear(c.macKey)
	}
}

func (sa *SA) account(n int) {
	sa.Counters.Packets.Add(1)
	b := sa.Counters.Bytes.Add(uint64(n))
	if sa.hardBytes != 0 && b >= sa.hardBytes {
		sa.expire(true)
	} else if sa.softBytes != 0 && b >= sa.softBytes {
		sa.expire(false)
	}
}

func (sa *SA) expire(hard bool) {
	if hard {
		sa.dead.Store(true)
		if sa.hardDone.Swap(true) {
			return
		}
	} else if sa.softDone.Swap(true) {
		return
	}
	if sa.onExpire != nil {
		sa.onExpire(sa, hard)
	}
}

// nextSeq reserves the next outbound sequence number. Without ESN a 32-bit
// counter must never wrap (RFC 4303 3.3.3): the SA dies instead.
func (sa *SA) nextSeq() (uint32, error) {
	n := sa.seq.Add(1)
	if n > math.MaxUint32 {
		sa.expire(true)
		return 0, ErrSeqExhausted
	}
	if n == math.MaxUint32-softSeqMargin {
		sa.expire(false)
	}
	return uint32(n), nil
}

// allows reports whether the inner packet's addresses fit the SA's traffic
// selectors: src in remote, dst in local for inbound (RFC 4301 5.2).
func (sa *SA) allows(src, dst netip.Addr) bool {
	return matchAny(sa.RemoteTS, src) && matchAny(sa.LocalTS, dst)
}

func matchAny(ps []netip.Prefix, a netip.Addr) bool {
	if len(ps) == 0 {
		return true
	}
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// headerLen is the ESP header and IV in front of the inner packet.
func (sa *SA) headerLen() int { return espHeaderLen + int(sa.suite.ivLen) }
