package ike

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashgate/flashgate/ipsec"
)

// EndpointConfig wires an Endpoint to the world. The hooks follow the shape
// of wireguard-go's conn.Bind: the engine never blocks on I/O itself.
type EndpointConfig struct {
	// Send transmits one datagram from local to remote. It is called with
	// the datagram exactly as it goes on the wire: IKE messages sent from
	// the NAT-T port already carry the non-ESP marker, keepalives are the
	// single 0xFF byte. It must not block for long and must not call back
	// into the Endpoint. Required.
	Send func(pkt []byte, local, remote netip.AddrPort) error

	// Now is the clock (default time.Now). Timers only advance in Tick.
	Now func() time.Time
	// Rand is the randomness for SPIs, nonces and keys (default crypto/rand).
	Rand io.Reader

	// PeerFor picks the configuration for an IKE_SA_INIT arriving from
	// remote at local; nil refuses the peer (the datagram is dropped).
	PeerFor func(local, remote netip.AddrPort) *PeerConfig

	// NATTPort is our NAT-T port (default 4500): an SA floats to it, and
	// IKE sent from it gets the non-ESP marker.
	NATTPort uint16

	// CookieThreshold is the number of half-open SAs from which on a new
	// IKE_SA_INIT must return a COOKIE first (default 64, negative: always);
	// MaxHalfOpen is
	// where new ones are dropped (default 4096); HalfOpenTimeout is how
	// long a responder waits for IKE_AUTH (default 30 s).
	CookieThreshold int
	MaxHalfOpen     int
	HalfOpenTimeout time.Duration
	// MaxHalfOpenPerSource bounds the half-open SAs of one source address
	// (default 5, as strongSwan's block threshold; negative: no bound): an
	// attacker that answers COOKIEs from one address could otherwise fill
	// MaxHalfOpen alone. A configured peer's own address (PeerFor gave a
	// PeerConfig whose Remote is that address) is bound by neither this
	// nor MaxHalfOpen: a flood must not keep the peers we are configured
	// for out. It still needs a COOKIE above CookieThreshold, which a
	// spoofer of its address cannot echo.
	MaxHalfOpenPerSource int
	// MaxInitSize is the largest IKE_SA_INIT request answered (default
	// 10000 bytes, strongSwan's max_packet). A responder keeps the request
	// until IKE_AUTH (its AUTH payload signs it), so without a bound one
	// source could make every half-open SA hold 64 KB.
	MaxInitSize int

	Events Events
}

// ChildUp reports a CHILD_SA pair ready for installation. In and Out are
// handed over to the receiver: the engine keeps no reference to their keys.
type ChildUp struct {
	SA       *IKESA
	Peer     *PeerConfig
	ReqID    uint32
	Proposal Proposal
	In, Out  *ipsec.ChildSA
	// Replaces is the inbound SPI of the pair this one rekeys (0 for a new
	// CHILD_SA): install the new pair, then remove the old one when its
	// ChildDown arrives.
	Replaces uint32
}

// Events are the engine's reports. They are called without any engine lock
// held, from the goroutine that called HandleMessage, Tick, Initiate or a
// method of IKESA; they may call into the engine.
type Events struct {
	ChildUp func(ChildUp)
	// ChildDown: remove the pair with this inbound SPI. reason is nil when
	// the pair was replaced by a rekey or closed by us.
	ChildDown func(sa *IKESA, inboundSPI uint32, reason error)
	IKEUp     func(sa *IKESA)
	// IKEDown: the IKE SA is gone; reason is nil when it was replaced by a
	// rekey or closed by us, a *Failure otherwise.
	IKEDown func(sa *IKESA, reason error)
	// Failure reports negotiations that were refused without an IKE SA
	// going down (e.g. a peer's proposals we do not accept, a CHILD_SA whose
	// selectors do not match): a *Failure, for the tunnel's status.
	Failure func(peer *PeerConfig, reason error)
}

// Stats count what the engine dropped or did, for status and for tests.
type Stats struct {
	Received            atomic.Uint64
	Malformed           atomic.Uint64 // did not decode
	UnsupportedCritical atomic.Uint64
	UnknownSPI          atomic.Uint64
	BadICV              atomic.Uint64 // failed integrity check
	OutOfWindow         atomic.Uint64 // replayed, old or unexpected message IDs
	RetransmitsAnswered atomic.Uint64 // peer's retransmitted requests answered from cache
	Retransmits         atomic.Uint64 // our requests sent again
	AuthFailures        atomic.Uint64 // IKE_AUTH requests refused
	CookiesSent         atomic.Uint64
	HalfOpenRefused     atomic.Uint64 // IKE_SA_INIT dropped at MaxHalfOpen
	SourceLimited       atomic.Uint64 // IKE_SA_INIT dropped at MaxHalfOpenPerSource
	InitTooLarge        atomic.Uint64 // IKE_SA_INIT over MaxInitSize
	EarlyRequests       atomic.Uint64 // requests other than IKE_AUTH on a half-open SA
	HalfOpenExpired     atomic.Uint64
	NoConfig            atomic.Uint64 // IKE_SA_INIT from a peer PeerFor refused
	FragmentsSent       atomic.Uint64 // RFC 7383 fragments of ours
	FragmentsReceived   atomic.Uint64 // fragments authenticated
	Reassembled         atomic.Uint64 // messages put together from fragments
	FragmentsDropped    atomic.Uint64 // fragments dropped: timed out or over the bounds
}

// Endpoint is one IKE engine: all the IKE SAs behind one pair of sockets.
// It is safe for concurrent use; each IKE SA is processed under its own
// lock, so many can be negotiated in parallel.
type Endpoint struct {
	cfg     EndpointConfig
	now     func() time.Time
	rand    io.Reader
	cookies cookieJar
	Stats   Stats
	// reasmBytes is the plaintext held for reassembly (ReassemblyBudget).
	reasmBytes atomic.Int64

	mu        sync.Mutex
	sas       map[uint64]*IKESA // by our SPI
	initIndex map[initKey]*IKESA
	halfOpen  int
	// halfOpenBy counts the half-open SAs by the source address of their
	// IKE_SA_INIT, for MaxHalfOpenPerSource.
	halfOpenBy map[netip.Addr]int
	inSPIs     map[uint32]struct{}
	reqID      uint32
	// contacts counts the live IKE SAs per peer identity, to send
	// INITIAL_CONTACT only on the first (RFC 7296 2.4): the peer deletes
	// every other SA with the same identities when it sees one.
	contacts map[string]int
	// ended holds, by our SPI, the answers to the requests that ended
	// IKE SAs, for the peer's retransmissions of them.
	ended map[uint64]endedSA
}

type initKey struct {
	remote netip.AddrPort
	spii   uint64
}

// NewEndpoint makes an engine.
func NewEndpoint(cfg EndpointConfig) (*Endpoint, error) {
	if cfg.Send == nil {
		return nil, errors.New("ike: EndpointConfig.Send is required")
	}
	ep := &Endpoint{cfg: cfg, now: cfg.Now, rand: cfg.Rand,
		sas: map[uint64]*IKESA{}, initIndex: map[initKey]*IKESA{}, halfOpenBy: map[netip.Addr]int{}, inSPIs: map[uint32]struct{}{},
		contacts: map[string]int{}, ended: map[uint64]endedSA{}}
	if ep.now == nil {
		ep.now = time.Now
	}
	if ep.rand == nil {
		ep.rand = rand.Reader
	}
	if ep.cfg.NATTPort == 0 {
		ep.cfg.NATTPort = 4500
	}
	if ep.cfg.CookieThreshold == 0 {
		ep.cfg.CookieThreshold = 64
	}
	if ep.cfg.MaxHalfOpen == 0 {
		ep.cfg.MaxHalfOpen = 4096
	}
	if ep.cfg.MaxHalfOpenPerSource == 0 {
		ep.cfg.MaxHalfOpenPerSource = 5
	}
	if ep.cfg.MaxInitSize == 0 {
		ep.cfg.MaxInitSize = 10000
	}
	if ep.cfg.HalfOpenTimeout == 0 {
		ep.cfg.HalfOpenTimeout = 30 * time.Second
	}
	ep.cookies.rotate(ep.now(), ep.rand)
	return ep, nil
}

// HandleMessage processes one IKE message received from remote at local
// (for the NAT-T port: after ClassifyNATT removed the marker). Anything
// malformed, unauthenticated or out of window is dropped and counted.
func (ep *Endpoint) HandleMessage(pkt []byte, local, remote netip.AddrPort) {
	ep.Stats.Received.Add(1)
	if IsIKEv1(pkt) {
		ep.handleV1(pkt, local, remote)
		return
	}
	m, err := DecodeMessage(pkt)
	if err != nil {
		var uc *UnsupportedCriticalError
		if errors.As(err, &uc) {
			ep.Stats.UnsupportedCritical.Add(1)
			if h, herr := DecodeHeader(pkt); herr == nil && h.Exchange == IKE_SA_INIT && !h.IsResponse() {
				ep.sendInitError(h, local, remote, &Notify{NotifyType: UNSUPPORTED_CRITICAL_PAYLOAD, Data: []byte{byte(uc.Type)}})
			}
			return
		}
		ep.Stats.Malformed.Add(1)
		return
	}
	if m.Exchange == IKE_SA_INIT && !m.IsResponse() && m.SPIr == 0 && m.FromInitiator() {
		ep.handleInitRequest(pkt, m, local, remote)
		return
	}
	spi := m.SPIr
	if !m.FromInitiator() {
		spi = m.SPIi
	}
	ep.mu.Lock()
	sa := ep.sas[spi]
	ep.mu.Unlock()
	if sa == nil {
		if ep.answerEnded(spi, pkt, local, remote) {
			return
		}
		ep.Stats.UnknownSPI.Add(1)
		return
	}
	sa.mu.Lock()
	sa.handle(pkt, m, local, remote)
	ev := sa.takeEvents()
	sa.mu.Unlock()
	runEvents(ev)
}

// Tick runs the timers of every SA: retransmissions, rekeying, DPD,
// keepalives, half-open expiry. Call it regularly (every 100 ms or so);
// with a fake clock, after advancing it.
func (ep *Endpoint) Tick() {
	now := ep.now()
	ep.cookies.rotate(now, ep.rand)
	ep.expireEnded(now)
	for _, sa := range ep.SAs() {
		sa.mu.Lock()
		sa.tick(now)
		ev := sa.takeEvents()
		sa.mu.Unlock()
		runEvents(ev)
	}
}

// Initiate starts a new IKE SA (and its first CHILD_SA) with cfg's peer.
func (ep *Endpoint) Initiate(cfg *PeerConfig) (*IKESA, error) {
	if cfg.Version == 1 {
		sa, err := newV1InitiatorSA(ep, cfg)
		if err != nil {
			return nil, fmt.Errorf("initiate %s: %w", cfg.Name, err)
		}
		sa.mu.Lock()
		ep.register(sa)
		sa.v1Start()
		ev := sa.takeEvents()
		sa.mu.Unlock()
		runEvents(ev)
		return sa, nil
	}
	sa, err := newInitiatorSA(ep, cfg)
	if err != nil {
		return nil, fmt.Errorf("initiate %s: %w", cfg.Name, err)
	}
	sa.mu.Lock()
	ep.register(sa)
	sa.sendInit()
	ev := sa.takeEvents()
	sa.mu.Unlock()
	runEvents(ev)
	return sa, nil
}

// SAs returns the IKE SAs currently known, in no particular order.
func (ep *Endpoint) SAs() []*IKESA {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	out := make([]*IKESA, 0, len(ep.sas))
	for _, sa := range ep.sas {
		out = append(out, sa)
	}
	return out
}

// SAsOf returns the live IKE SAs made from cfg (those of one tunnel
// configuration), without copying every SA's pointer first: the
// responder's INITIAL_CONTACT check runs for every IKE_AUTH, and a copy of
// a hub's thousand SAs for each was 8 KB of garbage per setup.
func (ep *Endpoint) SAsOf(cfg *PeerConfig) []*IKESA {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	var out []*IKESA
	for _, sa := range ep.sas {
		if sa.cfg == cfg {
			out = append(out, sa)
		}
	}
	return out
}

// SetLimits changes CookieThreshold and MaxHalfOpen (e.g. on a
// configuration change); zero leaves a limit as it is.
func (ep *Endpoint) SetLimits(cookieThreshold, maxHalfOpen int) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if cookieThreshold != 0 {
		ep.cfg.CookieThreshold = cookieThreshold
	}
	if maxHalfOpen != 0 {
		ep.cfg.MaxHalfOpen = maxHalfOpen
	}
}

// HalfOpen is the number of responder SAs waiting for IKE_AUTH.
func (ep *Endpoint) HalfOpen() int {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.halfOpen
}

func runEvents(ev []func()) {
	for _, f := range ev {
		f()
	}
}

func (ep *Endpoint) sendRaw(pkt []byte, local, remote netip.AddrPort) {
	if local.Port() == ep.cfg.NATTPort && (len(pkt) != 1 || pkt[0] != 0xff) {
		pkt = append(append(make([]byte, 0, 4+len(pkt)), nonESPMarker...), pkt...)
	}
	ep.cfg.Send(pkt, local, remote)
}

func (ep *Endpoint) randUint64() uint64 {
	var b [8]byte
	for {
		io.ReadFull(ep.rand, b[:])
		if v := binary.BigEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

// register adds sa under its local SPI; a responder SA also under the
// initiator's address and SPI so that a retransmitted IKE_SA_INIT finds it.
func (ep *Endpoint) register(sa *IKESA) bool {
	ok, _ := ep.registerLimited(sa, false)
	return ok
}

// registerLimited is register that, with limited, also holds a half-open
// SA to MaxHalfOpen and MaxHalfOpenPerSource, under the same lock as the
// count: several readers may be past handleInitRequest's early check at
// once. overLimit says that a limit, not a duplicate, refused it.
func (ep *Endpoint) registerLimited(sa *IKESA, limited bool) (ok, overLimit bool) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if _, dup := ep.sas[sa.localSPI()]; dup {
		return false, false
	}
	if sa.halfOpen && limited {
		if ep.halfOpen >= ep.cfg.MaxHalfOpen {
			ep.Stats.HalfOpenRefused.Add(1)
			return false, true
		}
		if n := ep.cfg.MaxHalfOpenPerSource; n > 0 && ep.halfOpenBy[sa.initRemote.Addr()] >= n {
			ep.Stats.SourceLimited.Add(1)
			return false, true
		}
	}
	if sa.halfOpen {
		k := initKey{sa.remote, sa.spiI}
		if _, dup := ep.initIndex[k]; dup {
			return false, false
		}
		ep.initIndex[k] = sa
		ep.halfOpen++
		ep.halfOpenBy[sa.initRemote.Addr()]++
	}
	ep.sas[sa.localSPI()] = sa
	sa.contact = sa.contactKey()
	ep.contacts[sa.contact]++
	return true, false
}

// firstContact reports whether sa is the only live IKE SA with its peer.
func (ep *Endpoint) firstContact(sa *IKESA) bool {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.contacts[sa.contact] <= 1
}

func (ep *Endpoint) unregister(sa *IKESA) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.sas[sa.localSPI()] == sa {
		delete(ep.sas, sa.localSPI())
		if ep.contacts[sa.contact]--; ep.contacts[sa.contact] <= 0 {
			delete(ep.contacts, sa.contact)
		}
	}
	ep.clearHalfOpenLocked(sa)
}

func (ep *Endpoint) clearHalfOpen(sa *IKESA) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.clearHalfOpenLocked(sa)
}

func (ep *Endpoint) clearHalfOpenLocked(sa *IKESA) {
	if !sa.halfOpen {
		return
	}
	sa.halfOpen = false
	ep.halfOpen--
	if a := sa.initRemote.Addr(); ep.halfOpenBy[a] <= 1 {
		delete(ep.halfOpenBy, a)
	} else {
		ep.halfOpenBy[a]--
	}
	k := initKey{sa.initRemote, sa.spiI}
	if ep.initIndex[k] == sa {
		delete(ep.initIndex, k)
	}
}

// allocSPI reserves a fresh inbound ESP SPI (never below 256, RFC 4303).
func (ep *Endpoint) allocSPI() uint32 {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	var b [4]byte
	for {
		io.ReadFull(ep.rand, b[:])
		spi := binary.BigEndian.Uint32(b[:])
		if _, used := ep.inSPIs[spi]; spi >= 256 && !used {
			ep.inSPIs[spi] = struct{}{}
			return spi
		}
	}
}

func (ep *Endpoint) freeSPI(spi uint32) {
	ep.mu.Lock()
	delete(ep.inSPIs, spi)
	ep.mu.Unlock()
}

func (ep *Endpoint) newReqID() uint32 {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.reqID++
	return ep.reqID
}

// sendInitError answers an IKE_SA_INIT request without creating state.
func (ep *Endpoint) sendInitError(h Header, local, remote netip.AddrPort, n *Notify) {
	resp := &Message{Header: Header{SPIi: h.SPIi, Version: Version, Exchange: IKE_SA_INIT, Flags: FlagResponse}, Payloads: []Payload{n}}
	ep.sendRaw(resp.Encode(), local, remote)
}

func (ep *Endpoint) handleInitRequest(pkt []byte, m *Message, local, remote netip.AddrPort) {
	key := initKey{remote, m.SPIi}
	ep.mu.Lock()
	existing := ep.initIndex[key]
	halfOpen, fromSource := ep.halfOpen, ep.halfOpenBy[remote.Addr()]
	cookieThreshold, maxHalfOpen, perSource := ep.cfg.CookieThreshold, ep.cfg.MaxHalfOpen, ep.cfg.MaxHalfOpenPerSource
	ep.mu.Unlock()
	if existing != nil {
		existing.mu.Lock()
		existing.answerInitRetransmit(pkt)
		existing.mu.Unlock()
		return
	}
	if m.MessageID != 0 {
		ep.Stats.OutOfWindow.Add(1)
		return
	}
	if len(pkt) > ep.cfg.MaxInitSize {
		ep.Stats.InitTooLarge.Add(1)
		return
	}
	// The peer lookup comes before the limits: a configured peer's own
	// address is exempt from them (see MaxHalfOpenPerSource).
	var cfg *PeerConfig
	if ep.cfg.PeerFor != nil {
		cfg = ep.cfg.PeerFor(local, remote)
	}
	if cfg == nil {
		ep.Stats.NoConfig.Add(1)
		return
	}
	if cfg.Version == 1 {
		if ep.cfg.Events.Failure != nil {
			ep.cfg.Events.Failure(cfg, &Failure{Reason: ReasonWrongVersion, Peer: remote, Exchange: IKE_SA_INIT,
				Detail: "the peer speaks IKEv2; set ike_version 2 on this tunnel (it is set to IKEv1)"})
		}
		return
	}
	configuredPeer := cfg.Remote.Addr().IsValid() && !cfg.Remote.Addr().IsUnspecified() &&
		cfg.Remote.Addr().Unmap() == remote.Addr().Unmap()
	if !configuredPeer {
		if halfOpen >= maxHalfOpen {
			ep.Stats.HalfOpenRefused.Add(1)
			return
		}
		if perSource > 0 && fromSource >= perSource {
			ep.Stats.SourceLimited.Add(1)
			return
		}
	}
	nonce, _ := m.Find(PayloadNonce).(*Nonce)
	if nonce == nil {
		ep.Stats.Malformed.Add(1)
		ep.sendInitError(m.Header, local, remote, &Notify{NotifyType: INVALID_SYNTAX})
		return
	}
	if halfOpen >= cookieThreshold {
		// RFC 7296 2.6: the COOKIE notify is the first payload.
		c, _ := m.Payloads[0].(*Notify)
		if c == nil || c.NotifyType != COOKIE || !ep.cookies.valid(c.Data, nonce.Data, remote.Addr(), m.SPIi) {
			ep.Stats.CookiesSent.Add(1)
			ep.sendInitError(m.Header, local, remote, &Notify{NotifyType: COOKIE, Data: ep.cookies.make(nonce.Data, remote.Addr(), m.SPIi)})
			return
		}
	}
	sa, resp, fail := newResponderSA(ep, cfg, pkt, m, local, remote)
	if fail != nil {
		ep.sendInitError(m.Header, local, remote, fail.notify)
		if fail.report != nil && ep.cfg.Events.Failure != nil {
			ep.cfg.Events.Failure(cfg, fail.report)
		}
		return
	}
	if ok, _ := ep.registerLimited(sa, !configuredPeer); !ok {
		// A retransmission raced us, or an SPI collided (the other copy
		// answers), or another reader took the last place (counted).
		sa.zero()
		return
	}
	ep.sendRaw(resp, local, remote)
}

// StatsSnapshot is a copy of Stats at one moment, for status and JSON.
type StatsSnapshot struct {
	Received, Malformed, UnsupportedCritical, UnknownSPI, BadICV, OutOfWindow uint64
	RetransmitsAnswered, Retransmits, AuthFailures, CookiesSent               uint64
	HalfOpenRefused, HalfOpenExpired, NoConfig                                uint64
	SourceLimited, InitTooLarge, EarlyRequests                                uint64
	FragmentsSent, FragmentsReceived, Reassembled, FragmentsDropped           uint64
}

// Snapshot copies the counters.
func (s *Stats) Snapshot() StatsSnapshot {
	return StatsSnapshot{
		Received: s.Received.Load(), Malformed: s.Malformed.Load(), UnsupportedCritical: s.UnsupportedCritical.Load(),
		UnknownSPI: s.UnknownSPI.Load(), BadICV: s.BadICV.Load(), OutOfWindow: s.OutOfWindow.Load(),
		RetransmitsAnswered: s.RetransmitsAnswered.Load(), Retransmits: s.Retransmits.Load(), AuthFailures: s.AuthFailures.Load(),
		CookiesSent: s.CookiesSent.Load(), HalfOpenRefused: s.HalfOpenRefused.Load(), HalfOpenExpired: s.HalfOpenExpired.Load(),
		NoConfig: s.NoConfig.Load(), SourceLimited: s.SourceLimited.Load(), InitTooLarge: s.InitTooLarge.Load(),
		EarlyRequests: s.EarlyRequests.Load(),
		FragmentsSent: s.FragmentsSent.Load(), FragmentsReceived: s.FragmentsReceived.Load(),
		Reassembled: s.Reassembled.Load(), FragmentsDropped: s.FragmentsDropped.Load(),
	}
}
