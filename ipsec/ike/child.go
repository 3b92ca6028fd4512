package ike

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/flashgate/flashgate/ipsec"
)

type childState int

const (
	childInstalled childState = iota
	childRekeying             // our CREATE_CHILD_SA rekeying it is in flight
	childRekeyed              // replaced; waiting for a DELETE (ours or the peer's)
	childDeleting             // our DELETE is in flight
)

// child is the engine's record of one CHILD_SA pair. It holds no keys:
// those left with the ChildUp event.
type child struct {
	reqID             uint32
	prop              *Proposal // interned (chosen.go)
	inSPI, outSPI     uint32
	localTS, remoteTS []Selector
	established       stamp
	rekeyAt, expireAt stamp
	state             childState
	// collision is set when the peer rekeyed this child while our own
	// rekey of it was in flight (RFC 7296 2.8.1).
	collision *childCollision
}

type childCollision struct {
	ni, nr  []byte // the nonces of the peer's exchange
	created *child // the child that exchange made
}

func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

func be32bytes(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func spiString(spi uint32) string { return fmt.Sprintf("%08x", spi) }

func (sa *IKESA) childByOutSPI(spi uint32) *child {
	for _, c := range sa.children {
		if c.outSPI == spi {
			return c
		}
	}
	return nil
}

func (sa *IKESA) childByInSPI(spi uint32) *child {
	for _, c := range sa.children {
		if c.inSPI == spi {
			return c
		}
	}
	return nil
}

// closedChild is a child this end deleted, remembered by the SPI the peer
// names it with in REKEY_SA (our outbound).
type closedChild struct {
	outSPI uint32
	at     time.Time
}

// closedMemory is how long, and for how many children, a closed child is
// remembered: longer than a retransmitted request takes to arrive.
const (
	closedMemory    = 30 * time.Second
	closedMemoryMax = 16
)

// recentlyClosed reports whether this end deleted the child the peer
// sends on with spi within closedMemory, forgetting older ones.
func (sa *IKESA) recentlyClosed(spi uint32) bool {
	now := sa.ep.now()
	keep := sa.closedOut[:0]
	found := false
	for _, cc := range sa.closedOut {
		if now.Sub(cc.at) > closedMemory {
			continue
		}
		keep = append(keep, cc)
		found = found || cc.outSPI == spi
	}
	sa.closedOut = keep
	return found
}

func (sa *IKESA) removeChild(c *child, reason error) {
	for i, x := range sa.children {
		if x == c {
			if c.state == childDeleting {
				if len(sa.closedOut) >= closedMemoryMax {
					sa.closedOut = append(sa.closedOut[:0], sa.closedOut[1:]...)
				}
				sa.closedOut = append(sa.closedOut, closedChild{outSPI: c.outSPI, at: sa.ep.now()})
			}
			sa.children = append(sa.children[:i], sa.children[i+1:]...)
			sa.ep.freeSPI(c.inSPI)
			spi := c.inSPI
			sa.emit(func() {
				if sa.ep.cfg.Events.ChildDown != nil {
					sa.ep.cfg.Events.ChildDown(sa, spi, reason)
				}
			})
			return
		}
	}
}

// pfsGroup is the DH group for a CREATE_CHILD_SA: the first one configured
// in the ESP proposals, or none.
func (sa *IKESA) pfsGroup() DHGroup {
	for _, p := range sa.cfg.espProposals() {
		if len(p.DH) > 0 {
			return p.DH[0]
		}
	}
	return 0
}

// childOffer builds SA, TSi and TSr of a CHILD_SA request. In IKE_AUTH
// there is no Diffie-Hellman, so DH transforms are left out (RFC 7296 1.2).
func (sa *IKESA) childOffer(inSPI uint32, tsi, tsr []Selector, ex ExchangeType) []Payload {
	if tsi == nil {
		tsi, tsr = selectorsOf(sa.cfg.LocalTS), selectorsOf(sa.cfg.RemoteTS)
	}
	var wire []WireProposal
	for i, p := range sa.cfg.espProposals() {
		if ex != CREATE_CHILD_SA {
			p.DH = nil
		}
		wire = append(wire, p.ToWire(uint8(i+1), be32bytes(inSPI)))
	}
	return []Payload{&SA{Proposals: wire}, &TS{Selectors: tsi}, &TS{Responder: true, Selectors: tsr}}
}

func stripDH(ws []WireProposal) []WireProposal {
	out := make([]WireProposal, len(ws))
	for i, w := range ws {
		w.Transforms = append([]WireTransform(nil), w.Transforms...)
		n := 0
		for _, t := range w.Transforms {
			if t.Type != TransformDH {
				w.Transforms[n] = t
				n++
			}
		}
		w.Transforms = w.Transforms[:n]
		out[i] = w
	}
	return out
}

// acceptChildRequest is the responder's side of a CHILD_SA offer in
// IKE_AUTH or CREATE_CHILD_SA: choose a proposal, narrow the selectors, do
// the optional PFS exchange and derive the keys. It returns the answer
// payloads (SA, [Nr], [KEr], TSi, TSr, or an error notify).
func (sa *IKESA) acceptChildRequest(ex ExchangeType, ps []Payload, ni, nr []byte, reqID uint32) (*pendingChild, []Payload, *Failure) {
	saP, _ := findPayload(ps, PayloadSA).(*SA)
	tsiP, _ := findPayload(ps, PayloadTSi).(*TS)
	tsrP, _ := findPayload(ps, PayloadTSr).(*TS)
	if saP == nil || tsiP == nil || tsrP == nil {
		return nil, []Payload{&Notify{NotifyType: INVALID_SYNTAX}}, &Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: ex, Detail: "CHILD_SA request lacks SA or TS"}
	}
	ours := sa.cfg.espProposals()
	theirs := saP.Proposals
	var ke *KE
	var prefer DHGroup
	if ex == IKE_AUTH {
		theirs = stripDH(theirs)
		stripped := make([]Proposal, len(ours))
		for i, p := range ours {
			p.DH = nil
			stripped[i] = p
		}
		ours = stripped
	} else if ke, _ = findPayload(ps, PayloadKE).(*KE); ke != nil {
		prefer = ke.Group
	}
	prop, ti, ok := selectProposal(ours, theirs, prefer)
	if !ok || len(theirs[ti].SPI) != 4 {
		var peer []Proposal
		for _, w := range theirs {
			p, _ := ProposalFromWire(w)
			peer = append(peer, p)
		}
		return nil, []Payload{&Notify{NotifyType: NO_PROPOSAL_CHOSEN}}, &Failure{Reason: ReasonNoProposalChosen, Peer: sa.remote,
			Exchange: ex, Notify: NO_PROPOSAL_CHOSEN, OurProposals: ours, PeerProposals: peer}
	}
	tsi := narrow(selectorsOf(sa.cfg.RemoteTS), tsiP.Selectors)
	tsr := narrow(selectorsOf(sa.cfg.LocalTS), tsrP.Selectors)
	if len(tsi) == 0 || len(tsr) == 0 {
		return nil, []Payload{&Notify{NotifyType: TS_UNACCEPTABLE}}, &Failure{Reason: ReasonTSUnacceptable, Peer: sa.remote,
			Exchange: ex, Notify: TS_UNACCEPTABLE, OurLocalTS: selectorsOf(sa.cfg.LocalTS), OurRemoteTS: selectorsOf(sa.cfg.RemoteTS),
			PeerLocalTS: tsiP.Selectors, PeerRemoteTS: tsrP.Selectors}
	}
	var gir []byte
	var answerKE *KE
	if len(prop.DH) == 1 {
		g := prop.DH[0]
		if ke == nil || ke.Group != g {
			return nil, []Payload{&Notify{NotifyType: INVALID_KE_PAYLOAD, Data: binary.BigEndian.AppendUint16(nil, uint16(g))}}, nil
		}
		dh, err := newDHKey(g, sa.ep.rand)
		if err != nil {
			return nil, []Payload{&Notify{NotifyType: NO_PROPOSAL_CHOSEN}}, nil
		}
		defer dh.Zero()
		if gir, err = dh.Shared(ke.Data); err != nil {
			return nil, []Payload{&Notify{NotifyType: INVALID_SYNTAX}}, &Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: ex, Detail: err.Error()}
		}
		defer clear(gir)
		answerKE = &KE{Group: g, Data: dh.Public()}
	}
	keys, err := deriveChildKeys(sa.keys.prf, sa.keys.d, prop, gir, ni, nr)
	if err != nil {
		return nil, []Payload{&Notify{NotifyType: NO_PROPOSAL_CHOSEN}}, &Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: ex, Detail: err.Error()}
	}
	if reqID == 0 {
		reqID = sa.ep.newReqID()
	}
	inSPI := sa.ep.allocSPI()
	pc := &pendingChild{c: &child{reqID: reqID, prop: internProposal(prop), inSPI: inSPI, outSPI: be32(theirs[ti].SPI), localTS: tsr, remoteTS: tsi}, keys: keys}
	answer := []Payload{&SA{Proposals: []WireProposal{prop.ToWire(theirs[ti].Number, be32bytes(inSPI))}}}
	if ex == CREATE_CHILD_SA {
		answer = append(answer, &Nonce{Data: nr})
		if answerKE != nil {
			answer = append(answer, answerKE)
		}
	}
	answer = append(answer, &TS{Selectors: tsi}, &TS{Responder: true, Selectors: tsr})
	return pc, answer, nil
}

// pendingChild is a negotiated child with its keys, not yet announced.
type pendingChild struct {
	c    *child
	keys *childKeys
}

// acceptChildResponse is the initiator's side: check what the responder
// chose against what we offered and derive the keys.
func (sa *IKESA) acceptChildResponse(ex ExchangeType, ps []Payload, inSPI, reqID uint32, offTSi, offTSr []Selector, ni, nr []byte, dh dhKey) (*pendingChild, *Failure) {
	if offTSi == nil {
		offTSi, offTSr = selectorsOf(sa.cfg.LocalTS), selectorsOf(sa.cfg.RemoteTS)
	}
	if n := firstErrorNotify(ps); n != nil {
		f := sa.peerError(ex, n)
		f.OurLocalTS, f.OurRemoteTS = offTSi, offTSr
		return nil, f
	}
	saP, _ := findPayload(ps, PayloadSA).(*SA)
	tsiP, _ := findPayload(ps, PayloadTSi).(*TS)
	tsrP, _ := findPayload(ps, PayloadTSr).(*TS)
	if saP == nil || tsiP == nil || tsrP == nil || len(saP.Proposals) != 1 || len(saP.Proposals[0].SPI) != 4 {
		return nil, &Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: ex, Detail: "CHILD_SA response lacks SA or TS"}
	}
	prop, ok := ProposalFromWire(saP.Proposals[0])
	ours := sa.cfg.espProposals()
	if ex == IKE_AUTH {
		ours = slices.Clone(ours) // the config's own, shared
		for i := range ours {
			ours[i].DH = nil
		}
	}
	if !ok || !acceptable(ours, prop) {
		return nil, &Failure{Reason: ReasonNoProposalChosen, Peer: sa.remote, Exchange: ex, OurProposals: ours,
			PeerProposals: []Proposal{prop}, Detail: "the peer chose a CHILD_SA proposal we did not offer"}
	}
	for _, s := range tsiP.Selectors {
		if !withinAny(s, offTSi) {
			return nil, &Failure{Reason: ReasonTSUnacceptable, Peer: sa.remote, Exchange: ex, OurLocalTS: offTSi, OurRemoteTS: offTSr,
				PeerLocalTS: tsrP.Selectors, PeerRemoteTS: tsiP.Selectors, Detail: "the peer widened our selectors"}
		}
	}
	for _, s := range tsrP.Selectors {
		if !withinAny(s, offTSr) {
			return nil, &Failure{Reason: ReasonTSUnacceptable, Peer: sa.remote, Exchange: ex, OurLocalTS: offTSi, OurRemoteTS: offTSr,
				PeerLocalTS: tsrP.Selectors, PeerRemoteTS: tsiP.Selectors, Detail: "the peer widened our selectors"}
		}
	}
	var gir []byte
	if len(prop.DH) == 1 {
		ke, _ := findPayload(ps, PayloadKE).(*KE)
		if dh == nil || ke == nil || ke.Group != prop.DH[0] {
			return nil, &Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: ex, Detail: "PFS group or KE payload does not match our offer"}
		}
		var err error
		if gir, err = dh.Shared(ke.Data); err != nil {
			return nil, &Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: ex, Detail: err.Error()}
		}
		defer clear(gir)
	}
	keys, err := deriveChildKeys(sa.keys.prf, sa.keys.d, prop, gir, ni, nr)
	if err != nil {
		return nil, &Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: ex, Detail: err.Error()}
	}
	return &pendingChild{c: &child{reqID: reqID, prop: internProposal(prop), inSPI: inSPI, outSPI: be32(saP.Proposals[0].SPI),
		localTS: tsiP.Selectors, remoteTS: tsrP.Selectors}, keys: keys}, nil
}

func withinAny(s Selector, in []Selector) bool {
	for _, o := range in {
		if s.within(o) {
			return true
		}
	}
	return false
}

// addChild records a negotiated child and hands its SA pair to ChildUp.
// weInitiated says whether we initiated the exchange that made it: the
// initiator's keys protect initiator-to-responder traffic (RFC 7296 2.17).
func (sa *IKESA) addChild(pc *pendingChild, weInitiated bool, replaces uint32) {
	c, k := pc.c, pc.keys
	now := sa.ep.now()
	c.established = stampOf(now)
	if sa.cfg.ChildLifetime > 0 {
		c.rekeyAt = stampOf(now.Add(sa.jitter(sa.cfg.ChildLifetime)))
		c.expireAt = stampOf(now.Add(sa.cfg.ChildLifetime + sa.cfg.ChildLifetime/10))
	}
	sa.children = append(sa.children, c)
	t, err := c.prop.ESPTransform()
	if err != nil {
		return
	}
	// Both directions share their selectors: a data plane keeps them for
	// as long as the SAs live, and neither changes them.
	localTS, remoteTS := prefixesOf(c.localTS), prefixesOf(c.remoteTS)
	mk := func(inbound bool, spi uint32, enc, integ []byte) *ipsec.ChildSA {
		s := &ipsec.ChildSA{ReqID: c.reqID, SPI: spi, Inbound: inbound, Transform: t, EncKey: enc, IntegKey: integ,
			LocalTS: localTS, RemoteTS: remoteTS, ReplayWindow: sa.cfg.replayWindow()}
		if sa.cfg.ChildLifetime > 0 {
			s.SoftLifetime, s.HardLifetime = sa.cfg.ChildLifetime, sa.cfg.ChildLifetime+sa.cfg.ChildLifetime/10
		}
		if inbound {
			s.Src, s.Dst = sa.remote.Addr(), sa.local.Addr()
		} else {
			s.Src, s.Dst = sa.local.Addr(), sa.remote.Addr()
		}
		if sa.encapESP() {
			lp, rp := sa.local.Port(), sa.remote.Port()
			if inbound {
				s.EncapSrcPort, s.EncapDstPort = rp, lp
			} else {
				s.EncapSrcPort, s.EncapDstPort = lp, rp
			}
		}
		return s
	}
	var in, out *ipsec.ChildSA
	if weInitiated {
		in, out = mk(true, c.inSPI, k.encR, k.integR), mk(false, c.outSPI, k.encI, k.integI)
	} else {
		in, out = mk(true, c.inSPI, k.encI, k.integI), mk(false, c.outSPI, k.encR, k.integR)
	}
	ev := ChildUp{SA: sa, Peer: sa.cfg, ReqID: c.reqID, Proposal: *c.prop, In: in, Out: out, Replaces: replaces}
	sa.emit(func() {
		if sa.ep.cfg.Events.ChildUp != nil {
			sa.ep.cfg.Events.ChildUp(ev)
		} else {
			in.Zero()
			out.Zero()
		}
	})
}

// createChildExchange negotiates a new CHILD_SA with CREATE_CHILD_SA, or a
// replacement for old (RFC 7296 1.3.1 and 1.3.3).
func (sa *IKESA) createChildExchange(old *child, forceGroup DHGroup) *exchange {
	ex := &exchange{typ: CREATE_CHILD_SA}
	var inSPI uint32
	var ni []byte
	var dh dhKey
	var tsi, tsr []Selector
	reqID := uint32(0)
	if old != nil {
		old.state = childRekeying
		tsi, tsr, reqID = old.localTS, old.remoteTS, old.reqID
	}
	ex.build = func() []Payload {
		if old != nil && (sa.childByInSPI(old.inSPI) == nil || old.state != childRekeying) {
			return nil
		}
		if sa.state != StateEstablished {
			return nil // onAbort puts the child back
		}
		inSPI = sa.ep.allocSPI()
		ni = make([]byte, 32)
		sa.ep.rand.Read(ni)
		var ps []Payload
		if old != nil {
			ps = append(ps, &Notify{Protocol: ProtoESP, SPI: be32bytes(old.inSPI), NotifyType: REKEY_SA})
		}
		offer := sa.childOffer(inSPI, tsi, tsr, CREATE_CHILD_SA)
		ps = append(ps, offer[0], &Nonce{Data: ni})
		g := forceGroup
		if g == 0 {
			g = sa.pfsGroup()
		}
		if g != 0 {
			var err error
			if dh, err = newDHKey(g, sa.ep.rand); err != nil {
				return nil
			}
			ps = append(ps, &KE{Group: g, Data: dh.Public()})
		}
		return append(ps, offer[1:]...)
	}
	ex.onAbort = func() {
		if inSPI != 0 {
			sa.ep.freeSPI(inSPI)
		}
		if dh != nil {
			dh.Zero()
		}
		if old != nil && old.state == childRekeying {
			// Not sent (e.g. the IKE SA was rekeyed meanwhile): let the
			// timers of whichever IKE SA owns the child try again.
			old.state = childInstalled
			if old.rekeyAt.IsZero() {
				old.rekeyAt = stampOf(sa.ep.now().Add(time.Second))
			}
		}
	}
	ex.onResponse = func(ps []Payload) {
		defer func() {
			if dh != nil {
				dh.Zero()
			}
			// A refused rekey is tried again until the child expires.
			if old != nil && old.state == childInstalled && old.rekeyAt.IsZero() && sa.cfg.ChildLifetime > 0 {
				old.rekeyAt = stampOf(sa.ep.now().Add(max(sa.cfg.ChildLifetime/20, time.Second)))
			}
		}()
		if n := firstErrorNotify(ps); n != nil {
			sa.ep.freeSPI(inSPI)
			if old != nil && old.state == childRekeying {
				old.state = childInstalled
			}
			switch n.NotifyType {
			case INVALID_KE_PAYLOAD:
				if len(n.Data) == 2 && forceGroup == 0 {
					g := DHGroup(binary.BigEndian.Uint16(n.Data))
					if g.supported() {
						sa.startExchange(sa.createChildExchange(old, g))
						return
					}
				}
			case TEMPORARY_FAILURE:
				// The peer is busy (e.g. rekeying the IKE SA): try again soon.
				if old != nil {
					old.rekeyAt = stampOf(sa.ep.now().Add(2 * time.Second))
				}
				return
			}
			f := sa.peerError(CREATE_CHILD_SA, n)
			f.OurProposals = sa.cfg.espProposals()
			sa.report(f)
			return
		}
		nonce, _ := findPayload(ps, PayloadNonce).(*Nonce)
		if nonce == nil {
			sa.ep.freeSPI(inSPI)
			sa.report(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: CREATE_CHILD_SA, Detail: "response lacks a nonce"})
			return
		}
		r := reqID
		if r == 0 {
			r = sa.ep.newReqID()
		}
		pc, f := sa.acceptChildResponse(CREATE_CHILD_SA, ps, inSPI, r, tsi, tsr, ni, nonce.Data, dh)
		if f != nil {
			sa.ep.freeSPI(inSPI)
			if old != nil && old.state == childRekeying {
				old.state = childInstalled
			}
			sa.report(f)
			return
		}
		if old == nil {
			sa.addChild(pc, true, 0)
			return
		}
		sa.finishChildRekey(old, pc, ni, nonce.Data)
	}
	return ex
}

// finishChildRekey installs the child our rekey made and retires the old
// one, resolving a simultaneous rekey: of the two new children, the one
// whose exchange holds the lowest of the four nonces is redundant and is
// deleted by the side that initiated that exchange (RFC 7296 2.8.1).
func (sa *IKESA) finishChildRekey(old *child, pc *pendingChild, ni, nr []byte) {
	if col := old.collision; col != nil {
		ourExchangeLost := lowestNonce(ni, nr, col.ni, col.nr)
		if ourExchangeLost {
			// Ours is redundant: never install it, delete it at the peer.
			// The peer, as winner, deletes the old child.
			old.state = childRekeyed
			pc.c.state = childDeleting
			clear(pc.keys.encI)
			clear(pc.keys.encR)
			clear(pc.keys.integI)
			clear(pc.keys.integR)
			spi := pc.c.inSPI
			sa.finishExchange(&exchange{typ: INFORMATIONAL,
				build: func() []Payload {
					return []Payload{&Delete{Protocol: ProtoESP, SPISize: 4, SPIs: [][]byte{be32bytes(spi)}}}
				},
				onResponse: func([]Payload) { sa.ep.freeSPI(spi) },
				onAbort:    func() { sa.ep.freeSPI(spi) }})
			return
		}
		// We won: the peer deletes the child its exchange made.
		if col.created != nil {
			col.created.state = childRekeyed
		}
	}
	sa.addChild(pc, true, old.inSPI)
	sa.finishExchange(sa.deleteChildExchange(old))
}

// lowestNonce reports whether the lowest of the four nonces belongs to the
// first exchange (a, b) rather than the second (c, d).
func lowestNonce(a, b, c, d []byte) bool {
	first := a
	if bytes.Compare(b, first) < 0 {
		first = b
	}
	second := c
	if bytes.Compare(d, second) < 0 {
		second = d
	}
	return bytes.Compare(first, second) < 0
}

// deleteChildExchange deletes one of our children at the peer; the pair
// goes when the peer confirms (or the IKE SA dies).
func (sa *IKESA) deleteChildExchange(c *child) *exchange {
	c.state = childDeleting
	return &exchange{typ: INFORMATIONAL,
		build: func() []Payload {
			if sa.childByInSPI(c.inSPI) != c {
				return nil
			}
			return []Payload{&Delete{Protocol: ProtoESP, SPISize: 4, SPIs: [][]byte{be32bytes(c.inSPI)}}}
		},
		onResponse: func([]Payload) { sa.removeChild(c, nil) },
	}
}

// handleCreateChild answers a CREATE_CHILD_SA request: a new child, a
// child rekey (REKEY_SA) or an IKE SA rekey (an IKE proposal).
func (sa *IKESA) handleCreateChild(m *Message, ps []Payload) {
	if saP, _ := findPayload(ps, PayloadSA).(*SA); saP != nil && len(saP.Proposals) > 0 && saP.Proposals[0].Protocol == ProtoIKE {
		sa.handleIKERekeyRequest(m, ps)
		return
	}
	nonce, _ := findPayload(ps, PayloadNonce).(*Nonce)
	if nonce == nil {
		sa.respond(m, []Payload{&Notify{NotifyType: INVALID_SYNTAX}})
		return
	}
	var old *child
	if n := findNotify(ps, REKEY_SA); n != nil {
		if n.Protocol != ProtoESP || len(n.SPI) != 4 {
			sa.respond(m, []Payload{&Notify{NotifyType: INVALID_SYNTAX}})
			return
		}
		// The notify carries the SPI the peer receives on: our outbound.
		old = sa.childByOutSPI(be32(n.SPI))
		if old == nil && sa.recentlyClosed(be32(n.SPI)) {
			// We replaced and deleted it while the peer's rekey of it
			// was on its way (the requests crossed, or arrived out of
			// order). CHILD_SA_NOT_FOUND would make strongSwan create
			// a second child beside our replacement; a peer told to
			// retry later finds by then that the child is gone (RFC
			// 7296 2.25.1: a rekey of a child being closed is answered
			// with TEMPORARY_FAILURE).
			sa.respond(m, []Payload{&Notify{NotifyType: TEMPORARY_FAILURE}})
			return
		}
		if old == nil {
			sa.respond(m, []Payload{&Notify{Protocol: ProtoESP, SPI: n.SPI, NotifyType: CHILD_SA_NOT_FOUND}})
			return
		}
		if old.state == childRekeyed || old.state == childDeleting {
			sa.respond(m, []Payload{&Notify{NotifyType: TEMPORARY_FAILURE}})
			return
		}
	}
	nr := make([]byte, 32)
	sa.ep.rand.Read(nr)
	reqID := uint32(0)
	if old != nil {
		reqID = old.reqID
	}
	pc, answer, fail := sa.acceptChildRequest(CREATE_CHILD_SA, ps, nonce.Data, nr, reqID)
	pkt := sa.sealResponse(m, answer)
	if fail != nil {
		sa.report(fail)
	}
	if pc == nil {
		if pkt != nil {
			sa.sendAll(pkt)
		}
		return
	}
	if old == nil {
		sa.addChild(pc, false, 0)
		sa.sendAfterEvents(pkt)
		return
	}
	sa.addChild(pc, false, old.inSPI)
	sa.sendAfterEvents(pkt)
	if old.state == childRekeying {
		old.collision = &childCollision{ni: append([]byte(nil), nonce.Data...), nr: nr, created: pc.c}
	} else {
		old.state = childRekeyed // the peer deletes it when done
	}
}

// RekeyChild starts rekeying the CHILD_SA with this inbound SPI (e.g. on
// a soft expiry reported by the data plane).
func (sa *IKESA) RekeyChild(inboundSPI uint32) error {
	sa.mu.Lock()
	c := sa.childByInSPI(inboundSPI)
	var err error
	switch {
	case c == nil:
		err = fmt.Errorf("no CHILD_SA %08x", inboundSPI)
	case sa.state != StateEstablished:
		err = fmt.Errorf("IKE SA is %v", sa.state)
	case c.state != childInstalled:
		err = fmt.Errorf("CHILD_SA %08x is already being rekeyed or deleted", inboundSPI)
	case sa.v1 != nil:
		sa.v1StartQuick(c.localTS[0], c.remoteTS[0], c)
	case sa.ikeRekey != nil:
		// RFC 7296 2.25.2: not while the IKE SA is being rekeyed; the
		// timers retry on whichever IKE SA owns the child by then.
		c.rekeyAt = stampOf(sa.ep.now().Add(time.Second))
	default:
		sa.startExchange(sa.createChildExchange(c, 0))
	}
	ev := sa.takeEvents()
	sa.mu.Unlock()
	runEvents(ev)
	return err
}

// CreateChild negotiates one more CHILD_SA with the configured selectors,
// e.g. after the peer deleted the only one.
func (sa *IKESA) CreateChild() error {
	sa.mu.Lock()
	var err error
	if sa.state != StateEstablished {
		err = fmt.Errorf("IKE SA is %v", sa.state)
	} else if sa.v1 != nil {
		sa.v1StartQuickModes()
	} else {
		sa.startExchange(sa.createChildExchange(nil, 0))
	}
	ev := sa.takeEvents()
	sa.mu.Unlock()
	runEvents(ev)
	return err
}

// DeleteChild deletes the CHILD_SA with this inbound SPI at both ends.
func (sa *IKESA) DeleteChild(inboundSPI uint32) error {
	sa.mu.Lock()
	c := sa.childByInSPI(inboundSPI)
	var err error
	if c == nil || c.state == childDeleting {
		err = fmt.Errorf("no CHILD_SA %08x to delete", inboundSPI)
	} else if sa.v1 != nil {
		sa.v1DeleteChild(c, nil)
	} else {
		sa.startExchange(sa.deleteChildExchange(c))
	}
	ev := sa.takeEvents()
	sa.mu.Unlock()
	runEvents(ev)
	return err
}
