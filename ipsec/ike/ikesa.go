package ike

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"
)

// State is where an IKE SA is in its life.
type State int

const (
	StateInitSent    State = iota // initiator: IKE_SA_INIT sent
	StateAuthSent                 // initiator: IKE_AUTH sent
	StateHalfOpen                 // responder: IKE_SA_INIT answered, waiting for IKE_AUTH
	StateEstablished              // authenticated
	StateRekeyed                  // replaced by a new IKE SA, waiting to be deleted
	StateDeleting                 // our DELETE sent
	StateDead
)

func (s State) String() string {
	return [...]string{"CONNECTING", "AUTHENTICATING", "HALF_OPEN", "ESTABLISHED", "REKEYED", "DELETING", "DEAD"}[s]
}

// IKESA is one IKE SA. All fields are guarded by mu; methods lock it.
type IKESA struct {
	ep  *Endpoint
	cfg *PeerConfig
	mu  sync.Mutex

	state      State
	initiator  bool // we are the original initiator of this IKE SA
	spiI, spiR uint64

	local, remote netip.AddrPort
	initRemote    netip.AddrPort // where IKE_SA_INIT came from (half-open index key)
	contact       string         // contactKey when registered
	halfOpen      bool
	natLocal      bool // we are behind a NAT (or fake it: ForceEncap)
	natRemote     bool // the peer is behind a NAT (or fakes it)

	prop *Proposal // interned (chosen.go); nil until chosen
	keys *ikeKeys

	// init is the IKE_SA_INIT material, kept until IKE_AUTH is done (nil
	// after, and for SAs made by a rekey or IKEv1): a hub's established
	// SAs do not carry its fields.
	init *saInit

	// sig: what signing with a certificate needs (nil when we
	// authenticate with a pre-shared key, as a hub's branches mostly do).
	sig *sigState

	// Our requests: at most one in flight (window size 1), others queued.
	nextMsgID uint32
	out       *pending
	queue     []*exchange

	// The peer's requests.
	peerMsgID uint32
	lastResp  [][]byte // our answer to the last one (fragments, or one message)

	// fragments: both ends announced IKE fragmentation (RFC 7383);
	// reasmReq/reasmResp hold the fragments of a request or a response
	// being reassembled.
	fragments           bool
	reasmReq, reasmResp *reassembly

	children []*child
	// closedOut holds, for a short while, the outbound SPIs of children
	// this end closed after replacing them: the peer's rekey of one may
	// still be on its way (see handleCreateChild).
	closedOut []closedChild

	created, established stamp
	lastRecv, lastSend   stamp
	rekeyAt              stamp
	expireAt             stamp // hard lifetime: rekeying kept failing

	// IKE rekeying in flight, and its collision bookkeeping.
	ikeRekey *ikeRekeyState
	// The IKE SA that replaced this one and took its children.
	replacedBy *IKESA

	// v1 is set on an IKEv1 ISAKMP SA (v1.go); the IKEv2 fields for
	// messages, exchanges and keys are unused then.
	v1 *v1State

	lastErr     error // the latest failure, for status
	closeReason error // what IKEDown reports once our DELETE is done
	events      []func()
}

// sigState is what an IKE SA that signs with our certificate keeps: the
// peer's SIGNATURE_HASH_ALGORITHMS (announced: it sent the notify) and how
// we signed, for the messages when the peer refuses us. Apart from IKESA,
// so that the SAs of pre-shared keys do not carry it: a hub holds a
// thousand of them.
type sigState struct {
	peerHashes []uint16
	announced  bool
	ourScheme  string
}

// peerSignatureHashes keeps the peer's SIGNATURE_HASH_ALGORITHMS from its
// IKE_SA_INIT message, if we sign.
func (sa *IKESA) peerSignatureHashes(ps []Payload) {
	if sa.cfg.LocalAuth != AuthByCert {
		return
	}
	sa.sig = &sigState{}
	sa.sig.peerHashes, sa.sig.announced = parseSignatureHashes(ps)
}

// saInit is what an IKEv2 SA keeps from IKE_SA_INIT for IKE_AUTH.
type saInit struct {
	ni, nr            []byte
	skpi, skpr        []byte // SK_pi and SK_pr, for the AUTH payloads
	dh                dhKey  // initiator: ours, until the response
	dhGroup           DHGroup
	cookie            []byte
	initReq, initResp []byte
	initRetries       int
}

// pending is our request in flight.
type pending struct {
	ex          *exchange
	exchange    ExchangeType
	msgID       uint32
	pkts        [][]byte // the request, or its fragments
	first, next time.Time
	tries       int
}

func newInitiatorSA(ep *Endpoint, cfg *PeerConfig) (*IKESA, error) {
	if !cfg.Remote.IsValid() || !cfg.Local.IsValid() {
		return nil, fmt.Errorf("local and remote address required")
	}
	props := cfg.ikeProposals()
	sa := &IKESA{ep: ep, cfg: cfg, initiator: true, state: StateInitSent,
		local: cfg.Local, remote: cfg.Remote, created: stampOf(ep.now()), init: &saInit{}}
	sa.spiI = ep.randUint64()
	sa.init.ni = make([]byte, 32)
	if _, err := io.ReadFull(ep.rand, sa.init.ni); err != nil {
		return nil, err
	}
	sa.init.dhGroup = props[0].DH[0]
	var err error
	if sa.init.dh, err = newDHKey(sa.init.dhGroup, ep.rand); err != nil {
		return nil, err
	}
	return sa, nil
}

// Name is the tunnel's name (PeerConfig.Name).
func (sa *IKESA) Name() string { return sa.cfg.Name }

// Config is the tunnel configuration the SA was made from.
func (sa *IKESA) Config() *PeerConfig { return sa.cfg }

func (sa *IKESA) localSPI() uint64 {
	if sa.initiator {
		return sa.spiI
	}
	return sa.spiR
}

// contactKey identifies the peer for INITIAL_CONTACT: its address and
// both identities.
func (sa *IKESA) contactKey() string {
	return sa.remote.Addr().String() + "|" + sa.cfg.localID().String() + "|" + sa.cfg.RemoteID.String()
}

func (sa *IKESA) emit(f func()) { sa.events = append(sa.events, f) }

func (sa *IKESA) takeEvents() []func() {
	ev := sa.events
	sa.events = nil
	return ev
}

func (sa *IKESA) send(pkt []byte) {
	sa.lastSend = stampOf(sa.ep.now())
	sa.ep.sendRaw(pkt, sa.local, sa.remote)
}

// sendAll sends a message, or all of its fragments.
func (sa *IKESA) sendAll(pkts [][]byte) {
	for _, p := range pkts {
		sa.send(p)
	}
}

func (sa *IKESA) header(ex ExchangeType, msgID uint32, response bool) Header {
	h := Header{SPIi: sa.spiI, SPIr: sa.spiR, Version: Version, Exchange: ex, MessageID: msgID}
	if sa.initiator {
		h.Flags |= FlagInitiator
	}
	if response {
		h.Flags |= FlagResponse
	}
	return h
}

// encapESP reports whether ESP must travel in UDP: a NAT on either side,
// real or faked by ForceEncap.
func (sa *IKESA) encapESP() bool { return sa.natLocal || sa.natRemote || sa.cfg.ForceEncap }

// sendInit sends (or re-sends, after COOKIE or INVALID_KE_PAYLOAD) our
// IKE_SA_INIT request.
func (sa *IKESA) sendInit() {
	var ps []Payload
	if sa.init.cookie != nil {
		ps = append(ps, &Notify{NotifyType: COOKIE, Data: sa.init.cookie})
	}
	var wire []WireProposal
	for i, p := range sa.cfg.ikeProposals() {
		wire = append(wire, p.ToWire(uint8(i+1), nil))
	}
	ps = append(ps, &SA{Proposals: wire}, &KE{Group: sa.init.dhGroup, Data: sa.init.dh.Public()}, &Nonce{Data: sa.init.ni})
	ps = append(ps, natNotifies(sa.spiI, 0, sa.local, sa.remote, sa.cfg.ForceEncap)...)
	if sa.cfg.usesCerts() {
		ps = append(ps, signatureHashesNotify())
	}
	ps = append(ps, &Notify{NotifyType: IKEV2_FRAGMENTATION_SUPPORTED})
	m := &Message{Header: sa.header(IKE_SA_INIT, 0, false), Payloads: ps}
	sa.init.initReq = m.Encode()
	now := sa.ep.now()
	sa.out = &pending{exchange: IKE_SA_INIT, msgID: 0, pkts: [][]byte{sa.init.initReq}, first: now, next: now.Add(sa.cfg.retransmitTimeout()), tries: 1}
	sa.nextMsgID = 1
	sa.send(sa.init.initReq)
}

// initRefusal is a refused IKE_SA_INIT: the notify to answer with, and
// what to report (nil for things not worth a status line, like COOKIE).
type initRefusal struct {
	notify *Notify
	report error
}

// newResponderSA processes an IKE_SA_INIT request and builds the SA and
// its response. The Diffie-Hellman work happens here, before the SA is
// visible to anyone, so no lock is held.
func newResponderSA(ep *Endpoint, cfg *PeerConfig, pkt []byte, m *Message, local, remote netip.AddrPort) (*IKESA, []byte, *initRefusal) {
	saP, _ := m.Find(PayloadSA).(*SA)
	ke, _ := m.Find(PayloadKE).(*KE)
	nonce, _ := m.Find(PayloadNonce).(*Nonce)
	if saP == nil || ke == nil || nonce == nil {
		ep.Stats.Malformed.Add(1)
		return nil, nil, &initRefusal{notify: &Notify{NotifyType: INVALID_SYNTAX}}
	}
	ours := cfg.ikeProposals()
	prop, ti, ok := selectProposal(ours, saP.Proposals, ke.Group)
	if !ok || !prop.DH[0].supported() {
		var theirs []Proposal
		for _, w := range saP.Proposals {
			p, _ := ProposalFromWire(w)
			theirs = append(theirs, p)
		}
		return nil, nil, &initRefusal{notify: &Notify{NotifyType: NO_PROPOSAL_CHOSEN}, report: &Failure{
			Reason: ReasonNoProposalChosen, Peer: remote, Exchange: IKE_SA_INIT, Notify: NO_PROPOSAL_CHOSEN,
			OurProposals: ours, PeerProposals: theirs}}
	}
	if prop.DH[0] != ke.Group {
		return nil, nil, &initRefusal{notify: &Notify{NotifyType: INVALID_KE_PAYLOAD, Data: binary.BigEndian.AppendUint16(nil, uint16(prop.DH[0]))}}
	}
	now := ep.now()
	sa := &IKESA{ep: ep, cfg: cfg, state: StateHalfOpen, spiI: m.SPIi, spiR: ep.randUint64(),
		local: local, remote: remote, initRemote: remote, halfOpen: true, prop: internProposal(prop),
		created: stampOf(now), lastRecv: stampOf(now), peerMsgID: 1, init: &saInit{dhGroup: ke.Group}}
	sa.init.ni = append([]byte(nil), nonce.Data...)
	sa.init.nr = make([]byte, 32)
	io.ReadFull(ep.rand, sa.init.nr)
	dh, err := newDHKey(ke.Group, ep.rand)
	if err != nil {
		return nil, nil, &initRefusal{notify: &Notify{NotifyType: NO_PROPOSAL_CHOSEN}}
	}
	defer dh.Zero()
	gir, err := dh.Shared(ke.Data)
	if err != nil {
		ep.Stats.Malformed.Add(1)
		return nil, nil, &initRefusal{notify: &Notify{NotifyType: INVALID_SYNTAX}}
	}
	defer clear(gir)
	if err := sa.deriveInitKeys(gir); err != nil {
		return nil, nil, &initRefusal{notify: &Notify{NotifyType: NO_PROPOSAL_CHOSEN}}
	}
	sa.natLocal, sa.natRemote, _ = detectNAT(m.Payloads, m.SPIi, 0, local, remote)
	if cfg.ForceEncap {
		sa.natLocal = true
	}
	ps := []Payload{&SA{Proposals: []WireProposal{prop.ToWire(saP.Proposals[ti].Number, nil)}},
		&KE{Group: ke.Group, Data: dh.Public()}, &Nonce{Data: sa.init.nr}}
	if cfg.RemoteAuth == AuthByCert && len(cfg.TrustedCAs) > 0 {
		// strongSwan sends its certificate only when asked (send_cert = ifasked).
		ps = append(ps, certRequest(cfg.TrustedCAs))
	}
	ps = append(ps, natNotifies(sa.spiI, sa.spiR, local, remote, cfg.ForceEncap)...)
	sa.peerSignatureHashes(m.Payloads)
	if cfg.usesCerts() {
		ps = append(ps, signatureHashesNotify())
	}
	if findNotify(m.Payloads, IKEV2_FRAGMENTATION_SUPPORTED) != nil {
		sa.fragments = true
		ps = append(ps, &Notify{NotifyType: IKEV2_FRAGMENTATION_SUPPORTED})
	}
	resp := &Message{Header: sa.header(IKE_SA_INIT, 0, true), Payloads: ps}
	sa.init.initReq = append([]byte(nil), pkt[:m.Length]...)
	sa.init.initResp = resp.Encode()
	sa.nextMsgID = 0
	return sa, sa.init.initResp, nil
}

func (sa *IKESA) deriveInitKeys(gir []byte) error {
	f, err := newPRF(sa.prop.PRF[0])
	if err != nil {
		return err
	}
	skeyseed := f.sum(append(append([]byte(nil), sa.init.ni...), sa.init.nr...), gir)
	defer clear(skeyseed)
	sa.keys, sa.init.skpi, sa.init.skpr, err = deriveIKEKeys(*sa.prop, skeyseed, sa.init.ni, sa.init.nr, sa.spiI, sa.spiR, sa.initiator)
	return err
}

func (sa *IKESA) answerInitRetransmit(pkt []byte) {
	if sa.state == StateHalfOpen && sa.init != nil && bytes.Equal(pkt, sa.init.initReq) {
		sa.ep.Stats.RetransmitsAnswered.Add(1)
		sa.send(sa.init.initResp)
		return
	}
	sa.ep.Stats.OutOfWindow.Add(1)
}

// handleInitResponse processes the answer to our IKE_SA_INIT.
func (sa *IKESA) handleInitResponse(m *Message) {
	if n := findNotify(m.Payloads, COOKIE); n != nil && sa.init.initRetries < 3 {
		sa.init.initRetries++
		sa.init.cookie = append([]byte(nil), n.Data...)
		sa.sendInit()
		return
	}
	if n := findNotify(m.Payloads, INVALID_KE_PAYLOAD); n != nil && len(n.Data) == 2 && sa.init.initRetries < 3 {
		g := DHGroup(binary.BigEndian.Uint16(n.Data))
		if g != sa.init.dhGroup && g.supported() && offersGroup(sa.cfg.ikeProposals(), g) {
			sa.init.initRetries++
			dh, err := newDHKey(g, sa.ep.rand)
			if err == nil {
				sa.init.dh.Zero()
				sa.init.dh, sa.init.dhGroup = dh, g
				sa.sendInit()
				return
			}
		}
	}
	if n := firstErrorNotify(m.Payloads); n != nil {
		sa.fail(sa.peerError(IKE_SA_INIT, n))
		return
	}
	saP, _ := m.Find(PayloadSA).(*SA)
	ke, _ := m.Find(PayloadKE).(*KE)
	nonce, _ := m.Find(PayloadNonce).(*Nonce)
	if saP == nil || ke == nil || nonce == nil || len(saP.Proposals) != 1 || m.SPIr == 0 {
		sa.fail(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: IKE_SA_INIT, Detail: "response lacks SA, KE or nonce"})
		return
	}
	prop, ok := ProposalFromWire(saP.Proposals[0])
	if !ok || !acceptable(sa.cfg.ikeProposals(), prop) || len(prop.DH) != 1 || prop.DH[0] != ke.Group || ke.Group != sa.init.dhGroup {
		sa.fail(&Failure{Reason: ReasonNoProposalChosen, Peer: sa.remote, Exchange: IKE_SA_INIT,
			OurProposals: sa.cfg.ikeProposals(), PeerProposals: []Proposal{prop},
			Detail: "the peer chose a proposal we did not offer"})
		return
	}
	gir, err := sa.init.dh.Shared(ke.Data)
	if err != nil {
		sa.fail(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: IKE_SA_INIT, Detail: err.Error()})
		return
	}
	defer clear(gir)
	sa.init.dh.Zero()
	sa.init.dh = nil
	sa.prop = internProposal(prop)
	sa.spiR = m.SPIr
	sa.init.nr = append([]byte(nil), nonce.Data...)
	if err := sa.deriveInitKeys(gir); err != nil {
		sa.fail(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: IKE_SA_INIT, Detail: err.Error()})
		return
	}
	sa.natLocal, sa.natRemote, _ = detectNAT(m.Payloads, sa.spiI, sa.spiR, sa.local, sa.remote)
	if sa.cfg.ForceEncap {
		sa.natLocal = true
	}
	sa.init.initResp = append([]byte(nil), m.encoded...)
	sa.peerSignatureHashes(m.Payloads)
	sa.fragments = findNotify(m.Payloads, IKEV2_FRAGMENTATION_SUPPORTED) != nil
	idi := sa.cfg.localID().payload(false)
	auth, err := sa.ourAuth(idi)
	if err != nil {
		sa.fail(&Failure{Reason: ReasonAuthenticationFailed, Peer: sa.remote, Exchange: IKE_AUTH, Detail: "we cannot authenticate: " + err.Error()})
		return
	}
	// RFC 7296 2.23: float to port 4500 once a NAT is detected (or faked).
	if sa.encapESP() {
		sa.local = netip.AddrPortFrom(sa.local.Addr(), sa.ep.cfg.NATTPort)
		sa.remote = netip.AddrPortFrom(sa.remote.Addr(), sa.cfg.nattPort())
	}
	sa.out = nil
	sa.state = StateAuthSent
	sa.startExchange(sa.authExchange(idi, auth))
}

func offersGroup(ps []Proposal, g DHGroup) bool {
	for _, p := range ps {
		for _, x := range p.DH {
			if x == g {
				return true
			}
		}
	}
	return false
}

// peerError turns an error notify from the peer into a Failure.
func (sa *IKESA) peerError(ex ExchangeType, n *Notify) *Failure {
	f := &Failure{ByPeer: true, Peer: sa.remote, Exchange: ex, Notify: n.NotifyType, OurProposals: sa.cfg.ikeProposals(),
		OurLocalTS: selectorsOf(sa.cfg.LocalTS), OurRemoteTS: selectorsOf(sa.cfg.RemoteTS)}
	switch n.NotifyType {
	case NO_PROPOSAL_CHOSEN:
		f.Reason = ReasonNoProposalChosen
		if ex != IKE_SA_INIT {
			f.OurProposals = sa.cfg.espProposals()
		}
	case AUTHENTICATION_FAILED:
		f.Reason = ReasonAuthenticationFailed
		f.OurAuth = sa.cfg.LocalAuth
		f.Detail = sa.whoWeAre()
	case TS_UNACCEPTABLE:
		f.Reason = ReasonTSUnacceptable
	default:
		f.Reason = ReasonProtocol
		f.Detail = "error notify"
	}
	return f
}

// authExchange is our IKE_AUTH request with the first CHILD_SA.
func (sa *IKESA) authExchange(idi *ID, auth *Auth) *exchange {
	inSPI := sa.ep.allocSPI()
	reqID := sa.ep.newReqID()
	ex := &exchange{typ: IKE_AUTH}
	ex.build = func() []Payload {
		// RFC 7296 1.2: IDi, [CERT+], [CERTREQ+], [IDr], AUTH, SAi2, TSi, TSr.
		ps := []Payload{idi}
		if sa.cfg.LocalAuth == AuthByCert {
			ps = append(ps, certPayloads(sa.cfg.LocalCert)...)
		}
		if sa.cfg.RemoteAuth == AuthByCert && len(sa.cfg.TrustedCAs) > 0 {
			ps = append(ps, certRequest(sa.cfg.TrustedCAs))
		}
		if !sa.cfg.RemoteID.IsZero() {
			ps = append(ps, sa.cfg.RemoteID.payload(true))
		}
		ps = append(ps, auth)
		if sa.ep.firstContact(sa) {
			ps = append(ps, &Notify{NotifyType: INITIAL_CONTACT})
		}
		ps = append(ps, sa.childOffer(inSPI, nil, nil, IKE_AUTH)...)
		return ps
	}
	ex.onResponse = func(ps []Payload) { sa.handleAuthResponse(ps, inSPI, reqID) }
	ex.onAbort = func() { sa.ep.freeSPI(inSPI) }
	return ex
}

// handleAuthResponse checks the responder's IDr and AUTH and brings up the
// first CHILD_SA.
func (sa *IKESA) handleAuthResponse(ps []Payload, inSPI, reqID uint32) {
	if n := findNotify(ps, AUTHENTICATION_FAILED); n != nil {
		sa.ep.freeSPI(inSPI)
		sa.fail(sa.peerError(IKE_AUTH, n))
		return
	}
	idr, _ := findPayload(ps, PayloadIDr).(*ID)
	auth, _ := findPayload(ps, PayloadAUTH).(*Auth)
	if idr == nil || auth == nil {
		sa.ep.freeSPI(inSPI)
		f := &Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: IKE_AUTH, Detail: "response lacks IDr or AUTH"}
		if n := firstErrorNotify(ps); n != nil {
			f = sa.peerError(IKE_AUTH, n)
		}
		sa.fail(f)
		return
	}
	var why string
	if !sa.cfg.RemoteID.IsZero() && !sa.cfg.RemoteID.equal(idr) {
		why = fmt.Sprintf("identity mismatch: the peer calls itself %s, we expect %s", Identity{idr.IDType, idr.Data}, sa.cfg.RemoteID)
	} else {
		why = sa.checkPeerAuth(idr, auth, ps)
	}
	if why != "" {
		sa.ep.freeSPI(inSPI)
		// RFC 7296 2.21.2: tell the responder in a separate INFORMATIONAL.
		sa.startExchange(&exchange{typ: INFORMATIONAL, build: func() []Payload {
			return []Payload{&Notify{NotifyType: AUTHENTICATION_FAILED}}
		}})
		sa.failLater(&Failure{Reason: ReasonAuthenticationFailed, Peer: sa.remote, Exchange: IKE_AUTH, Detail: why})
		return
	}
	sa.establish()
	pc, fail := sa.acceptChildResponse(IKE_AUTH, ps, inSPI, reqID, nil, nil, sa.init.ni, sa.init.nr, nil)
	if fail != nil {
		sa.ep.freeSPI(inSPI)
		sa.report(fail)
		// A tunnel without its CHILD_SA is useless: close the IKE SA.
		sa.Close()
		sa.closeReason = fail
		return
	}
	sa.addChild(pc, true, 0)
	sa.authDone()
}

// authDone drops what only IKE_AUTH needed: the IKE_SA_INIT messages, the
// nonces and SK_pi/SK_pr. An established SA then holds only SK_d and the
// message protection.
func (sa *IKESA) authDone() {
	sa.init.zero()
	sa.init = nil
}

// zero zeroes the secrets of IKE_SA_INIT: our DH key, SK_pi and SK_pr.
func (in *saInit) zero() {
	if in == nil {
		return
	}
	if in.dh != nil {
		in.dh.Zero()
		in.dh = nil
	}
	clear(in.skpi)
	clear(in.skpr)
}

// establish marks the IKE SA authenticated and drops the IKE_SA_INIT material.
func (sa *IKESA) establish() {
	now := sa.ep.now()
	sa.state = StateEstablished
	sa.established = stampOf(now)
	sa.lastRecv = stampOf(now)
	if sa.cfg.IKELifetime > 0 {
		sa.rekeyAt = stampOf(now.Add(sa.jitter(sa.cfg.IKELifetime)))
		sa.expireAt = stampOf(now.Add(sa.cfg.IKELifetime + sa.cfg.IKELifetime/10))
	}
	sa.ep.clearHalfOpen(sa)
	sa.emit(func() {
		if sa.ep.cfg.Events.IKEUp != nil {
			sa.ep.cfg.Events.IKEUp(sa)
		}
	})
}

// jitter returns lifetime minus up to 10% random, so that the two sides
// rarely rekey at the same moment.
func (sa *IKESA) jitter(d time.Duration) time.Duration {
	var b [2]byte
	io.ReadFull(sa.ep.rand, b[:])
	return d - d/10*time.Duration(binary.BigEndian.Uint16(b[:]))/65536
}

// handleAuthRequest is the responder's IKE_AUTH.
func (sa *IKESA) handleAuthRequest(m *Message, ps []Payload) {
	refuse := func(why string) {
		sa.respond(m, []Payload{&Notify{NotifyType: AUTHENTICATION_FAILED}})
		sa.ep.Stats.AuthFailures.Add(1)
		sa.fail(&Failure{Reason: ReasonAuthenticationFailed, Peer: sa.remote, Exchange: IKE_AUTH, Detail: why})
	}
	idi, _ := findPayload(ps, PayloadIDi).(*ID)
	auth, _ := findPayload(ps, PayloadAUTH).(*Auth)
	if idi == nil {
		sa.respond(m, []Payload{&Notify{NotifyType: INVALID_SYNTAX}})
		sa.fail(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: IKE_AUTH, Detail: "request lacks IDi"})
		return
	}
	peerID := Identity{idi.IDType, idi.Data}
	if auth == nil {
		refuse(fmt.Sprintf("peer %s wants EAP authentication, which flashgate does not offer", peerID))
		return
	}
	if !sa.cfg.RemoteID.IsZero() && !sa.cfg.RemoteID.equal(idi) {
		refuse(fmt.Sprintf("identity mismatch: the peer calls itself %s, we expect %s", peerID, sa.cfg.RemoteID))
		return
	}
	if idr, _ := findPayload(ps, PayloadIDr).(*ID); idr != nil && !sa.cfg.localID().equal(idr) {
		refuse(fmt.Sprintf("identity mismatch: the peer expects us to be %s, we are %s", Identity{idr.IDType, idr.Data}, sa.cfg.localID()))
		return
	}
	if why := sa.checkPeerAuth(idi, auth, ps); why != "" {
		refuse(why)
		return
	}
	idr := sa.cfg.localID().payload(true)
	ourAuth, err := sa.ourAuth(idr)
	if err != nil {
		refuse("we cannot authenticate: " + err.Error())
		return
	}
	sa.establish()
	if findNotify(ps, INITIAL_CONTACT) != nil {
		sa.ep.dropOthers(sa)
	}
	resp := []Payload{idr}
	if sa.cfg.LocalAuth == AuthByCert {
		resp = append(resp, certPayloads(sa.cfg.LocalCert)...)
	}
	resp = append(resp, ourAuth)
	pc, answer, fail := sa.acceptChildRequest(IKE_AUTH, ps, sa.init.ni, sa.init.nr, 0)
	resp = append(resp, answer...)
	pkt := sa.sealResponse(m, resp)
	sa.authDone()
	if fail != nil {
		if pkt != nil {
			sa.sendAll(pkt)
		}
		sa.report(fail)
		return
	}
	sa.addChild(pc, false, 0)
	sa.sendAfterEvents(pkt)
}

// fail ends the SA because of f, reporting it.
func (sa *IKESA) fail(f error) {
	sa.lastErr = f
	sa.die(f)
}

// failLater records f and ends the SA once the pending exchange (our
// AUTHENTICATION_FAILED notice) has been answered or timed out.
func (sa *IKESA) failLater(f error) {
	sa.lastErr = f
	sa.closeReason = f
	sa.state = StateDeleting
}

// report sends a Failure to the status without ending the SA.
func (sa *IKESA) report(f error) {
	sa.lastErr = f
	cfg := sa.cfg
	sa.emit(func() {
		if sa.ep.cfg.Events.Failure != nil {
			sa.ep.cfg.Events.Failure(cfg, f)
		}
	})
}

// die removes the SA and its children, reporting reason (nil: replaced or
// closed by us).
func (sa *IKESA) die(reason error) {
	if sa.state == StateDead {
		return
	}
	sa.state = StateDead
	for _, c := range sa.children {
		sa.ep.freeSPI(c.inSPI)
		spi := c.inSPI
		sa.emit(func() {
			if sa.ep.cfg.Events.ChildDown != nil {
				sa.ep.cfg.Events.ChildDown(sa, spi, reason)
			}
		})
	}
	sa.children = nil
	if sa.out != nil && sa.out.ex != nil && sa.out.ex.onAbort != nil {
		sa.out.ex.onAbort()
	}
	for _, ex := range sa.queue {
		if ex.onAbort != nil {
			ex.onAbort()
		}
	}
	sa.out, sa.queue = nil, nil
	sa.expireReassembly(time.Time{}, true)
	if sa.ikeRekey != nil {
		sa.ikeRekey.abort()
		sa.ikeRekey = nil
	}
	sa.ep.unregister(sa)
	sa.zero()
	sa.emit(func() {
		if sa.ep.cfg.Events.IKEDown != nil {
			sa.ep.cfg.Events.IKEDown(sa, reason)
		}
	})
}

func (sa *IKESA) zero() {
	sa.v1.zero(sa.ep)
	sa.keys.zero()
	sa.keys = nil
	sa.init.zero()
}

// Close deletes the IKE SA and its CHILD_SAs, telling the peer.
func (sa *IKESA) Close() {
	if sa.state == StateDead || sa.state == StateDeleting {
		return
	}
	if sa.v1 != nil {
		sa.v1Close()
		return
	}
	if sa.keys == nil || sa.state == StateInitSent || sa.state == StateHalfOpen {
		sa.die(nil)
		return
	}
	sa.state = StateDeleting
	sa.closeReason = nil
	for _, ex := range sa.queue {
		if ex.onAbort != nil {
			ex.onAbort() // e.g. a child rekey: the child may live on in a successor
		}
	}
	sa.queue = nil
	sa.startExchange(&exchange{typ: INFORMATIONAL, build: func() []Payload {
		return []Payload{&Delete{Protocol: ProtoIKE}}
	}})
}

// Delete is Close for callers outside the engine: it takes the lock and
// delivers the resulting events.
func (sa *IKESA) Delete() {
	sa.mu.Lock()
	sa.Close()
	ev := sa.takeEvents()
	sa.mu.Unlock()
	runEvents(ev)
}

// dropOthers removes, without telling anyone, the other IKE SAs of sa's
// tunnel: the peer sent INITIAL_CONTACT, so it has forgotten them
// (RFC 7296 2.4).
func (ep *Endpoint) dropOthers(sa *IKESA) {
	for _, o := range ep.SAsOf(sa.cfg) {
		if o == sa {
			continue
		}
		// Lock order is SA then endpoint; o's events are delivered with sa's.
		if !o.mu.TryLock() {
			continue
		}
		if o.state == StateEstablished || o.state == StateRekeyed || o.state == StateDeleting {
			o.die(&Failure{Reason: ReasonPeerRestarted, Peer: o.remote})
			sa.events = append(sa.events, o.takeEvents()...)
		}
		o.mu.Unlock()
	}
}
