package ike

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// ikeRekeyState is our IKE SA rekey in flight (RFC 7296 1.3.2, 2.18) and
// what we learn if the peer rekeys the same IKE SA at the same time.
type ikeRekeyState struct {
	ex     *exchange // ours; a collision needs it on the wire, not queued
	ni     []byte
	dh     dhKey
	newSPI uint64

	// Set when we answered the peer's rekey of this IKE SA meanwhile.
	peerNi, ourNr []byte
	peerNew       *IKESA
}

func (r *ikeRekeyState) abort() {
	if r.dh != nil {
		r.dh.Zero()
		r.dh = nil
	}
}

// successor builds the IKE SA that replaces sa. SKEYSEED uses the old
// SA's PRF and SK_d; the key set uses the new PRF (RFC 7296 2.18).
func (sa *IKESA) successor(weInitiated bool, spiI, spiR uint64, prop Proposal, ni, nr, gir []byte) (*IKESA, error) {
	now := sa.ep.now()
	n := &IKESA{ep: sa.ep, cfg: sa.cfg, state: StateEstablished, initiator: weInitiated, spiI: spiI, spiR: spiR,
		local: sa.local, remote: sa.remote, natLocal: sa.natLocal, natRemote: sa.natRemote, prop: internProposal(prop),
		created: stampOf(now), established: stampOf(now), lastRecv: stampOf(now), lastSend: sa.lastSend}
	seed := make([]byte, 0, len(gir)+len(ni)+len(nr))
	seed = append(append(append(seed, gir...), ni...), nr...)
	skeyseed := sa.keys.prf.sum(sa.keys.d, seed)
	clear(seed)
	defer clear(skeyseed)
	keys, skpi, skpr, err := deriveIKEKeys(prop, skeyseed, ni, nr, spiI, spiR, weInitiated)
	if err != nil {
		return nil, err
	}
	// A rekeyed IKE SA is not authenticated again: no AUTH payload needs them.
	clear(skpi)
	clear(skpr)
	n.keys = keys
	if sa.cfg.IKELifetime > 0 {
		n.rekeyAt = stampOf(now.Add(n.jitter(sa.cfg.IKELifetime)))
		n.expireAt = stampOf(now.Add(sa.cfg.IKELifetime + sa.cfg.IKELifetime/10))
	}
	return n, nil
}

// handOver moves the children to the successor n and announces it. The
// caller holds n's lock. When a collision is resolved late, the peer may
// already have rekeyed n (its SA, which had no children then) or even
// deleted it: the children go to the end of n's chain of successors, the
// SA the peer keeps, since the peer deletes the rekeyed ones with
// whatever they hold. Locks are taken oldest first, the order every path
// uses.
func (sa *IKESA) handOver(n *IKESA) {
	sa.replacedBy = n
	heir := n
	var locked []*IKESA
	for heir.replacedBy != nil {
		next := heir.replacedBy
		next.mu.Lock()
		locked = append(locked, next)
		heir = next
	}
	defer func() {
		for i := len(locked) - 1; i >= 0; i-- {
			locked[i].mu.Unlock()
		}
	}()
	if heir.state == StateDead {
		// Gone before it could take them: they die with sa, reported.
		return
	}
	moved := sa.children
	heir.children, sa.children = append(heir.children, sa.children...), nil
	for _, c := range moved {
		if c.state == childDeleting {
			// Our DELETE for it is queued or in flight on sa, which
			// will not send it or whose answer no longer finds the
			// child: it goes again on the SA that holds the child now.
			// The peer answers a DELETE for a child it has no more
			// with an empty one.
			heir.startExchange(heir.deleteChildExchange(c))
		}
	}
	sa.emit(func() {
		if sa.ep.cfg.Events.IKEUp != nil {
			sa.ep.cfg.Events.IKEUp(heir)
		}
	})
}

// yieldToPeerRekey gives up our rekey of sa for the peer's, which we
// answered while ours was on the wire: the peer's new SA inherits the
// children and the peer deletes sa. It is how a collision ends when the
// peer never saw one (it dropped or refused our request, or deleted sa
// before answering it): RFC 7296 2.25.2 says to answer the DELETE and
// forget our own rekey, and the children must not go down with sa.
func (sa *IKESA) yieldToPeerRekey(st *ikeRekeyState) {
	st.peerNew.mu.Lock()
	sa.handOver(st.peerNew)
	st.peerNew.mu.Unlock()
	st.abort()
	if sa.ikeRekey == st {
		sa.ikeRekey = nil
	}
	sa.state = StateRekeyed
	sa.rekeyAt = stampOf(sa.ep.now())
}

// RekeyIKE starts rekeying the IKE SA.
func (sa *IKESA) RekeyIKE() error {
	sa.mu.Lock()
	var err error
	if sa.state != StateEstablished || sa.ikeRekey != nil {
		err = fmt.Errorf("IKE SA is %v, rekey in flight: %v", sa.state, sa.ikeRekey != nil)
	} else if sa.v1 != nil {
		sa.v1Reauth()
	} else {
		sa.startExchange(sa.rekeyIKEExchange(0))
	}
	ev := sa.takeEvents()
	sa.mu.Unlock()
	runEvents(ev)
	return err
}

func (sa *IKESA) rekeyIKEExchange(forceGroup DHGroup) *exchange {
	st := &ikeRekeyState{}
	sa.ikeRekey = st
	var group DHGroup
	ex := &exchange{typ: CREATE_CHILD_SA}
	st.ex = ex
	ex.build = func() []Payload {
		if sa.state != StateEstablished || sa.ikeRekey != st {
			return nil
		}
		st.newSPI = sa.ep.randUint64()
		st.ni = make([]byte, 32)
		io.ReadFull(sa.ep.rand, st.ni)
		group = forceGroup
		if group == 0 {
			group = sa.prop.DH[0]
		}
		var err error
		if st.dh, err = newDHKey(group, sa.ep.rand); err != nil {
			return nil
		}
		var wire []WireProposal
		for i, p := range sa.cfg.ikeProposals() {
			wire = append(wire, p.ToWire(uint8(i+1), spiBytes(st.newSPI)))
		}
		return []Payload{&SA{Proposals: wire}, &Nonce{Data: st.ni}, &KE{Group: group, Data: st.dh.Public()}}
	}
	ex.onAbort = func() {
		st.abort()
		if sa.ikeRekey == st {
			sa.ikeRekey = nil
		}
	}
	ex.onResponse = func(ps []Payload) {
		defer st.abort()
		if sa.ikeRekey == st {
			sa.ikeRekey = nil
		}
		done := false
		defer func() {
			switch {
			case done:
			case st.peerNew != nil && sa.state == StateEstablished:
				// Ours failed, but the peer's rekey of this SA, which we
				// answered meanwhile, stands: it saw no collision.
				sa.yieldToPeerRekey(st)
			case sa.rekeyAt.IsZero() && sa.cfg.IKELifetime > 0:
				// A refused rekey is tried again until the SA's lifetime runs out.
				sa.rekeyAt = stampOf(sa.ep.now().Add(max(sa.cfg.IKELifetime/20, time.Second)))
			}
		}()
		if n := firstErrorNotify(ps); n != nil {
			switch n.NotifyType {
			case INVALID_KE_PAYLOAD:
				if g := DHGroup(binary.BigEndian.Uint16(append(n.Data, 0, 0))); forceGroup == 0 && g.supported() && st.peerNew == nil {
					done = true
					sa.startExchange(sa.rekeyIKEExchange(g))
					return
				}
			case TEMPORARY_FAILURE:
				sa.rekeyAt = stampOf(sa.ep.now().Add(2 * time.Second))
				return
			}
			sa.report(sa.peerError(CREATE_CHILD_SA, n))
			return
		}
		saP, _ := findPayload(ps, PayloadSA).(*SA)
		ke, _ := findPayload(ps, PayloadKE).(*KE)
		nonce, _ := findPayload(ps, PayloadNonce).(*Nonce)
		if saP == nil || ke == nil || nonce == nil || len(saP.Proposals) != 1 || len(saP.Proposals[0].SPI) != 8 {
			sa.report(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: CREATE_CHILD_SA, Detail: "IKE rekey response lacks SA, KE or nonce"})
			return
		}
		prop, ok := ProposalFromWire(saP.Proposals[0])
		if !ok || !acceptable(sa.cfg.ikeProposals(), prop) || ke.Group != group || prop.DH[0] != group {
			sa.report(&Failure{Reason: ReasonNoProposalChosen, Peer: sa.remote, Exchange: CREATE_CHILD_SA,
				OurProposals: sa.cfg.ikeProposals(), PeerProposals: []Proposal{prop}, Detail: "the peer chose an IKE proposal we did not offer"})
			return
		}
		gir, err := st.dh.Shared(ke.Data)
		if err != nil {
			sa.report(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: CREATE_CHILD_SA, Detail: err.Error()})
			return
		}
		defer clear(gir)
		n, err := sa.successor(true, st.newSPI, binary.BigEndian.Uint64(saP.Proposals[0].SPI), prop, st.ni, nonce.Data, gir)
		if err != nil {
			sa.report(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: CREATE_CHILD_SA, Detail: err.Error()})
			return
		}
		done = true
		// n is registered before anything is sent on it: an answer that
		// came before would find no SA and be dropped, and the peer may
		// forget its side as soon as it has answered (a DELETE).
		if st.peerNew != nil && lowestNonce(st.ni, nonce.Data, st.peerNi, st.ourNr) {
			// Simultaneous rekey, and ours holds the lowest nonce: the SA
			// the peer's exchange made survives; we delete ours, and the
			// peer deletes the old one.
			st.peerNew.mu.Lock()
			sa.handOver(st.peerNew)
			st.peerNew.mu.Unlock()
			sa.state = StateRekeyed
			sa.rekeyAt = stampOf(sa.ep.now())
			n.mu.Lock()
			sa.ep.register(n)
			n.Close()
			sa.events = append(sa.events, n.takeEvents()...)
			n.mu.Unlock()
			return
		}
		if st.peerNew != nil {
			// We won: the peer deletes the SA its exchange made.
			st.peerNew.mu.Lock()
			st.peerNew.state = StateRekeyed
			st.peerNew.rekeyAt = stampOf(sa.ep.now())
			st.peerNew.mu.Unlock()
		}
		n.mu.Lock()
		sa.ep.register(n)
		sa.handOver(n)
		sa.events = append(sa.events, n.takeEvents()...)
		n.mu.Unlock()
		sa.Close()
	}
	return ex
}

// handleIKERekeyRequest is the responder's side of an IKE SA rekey.
func (sa *IKESA) handleIKERekeyRequest(m *Message, ps []Payload) {
	saP, _ := findPayload(ps, PayloadSA).(*SA)
	ke, _ := findPayload(ps, PayloadKE).(*KE)
	nonce, _ := findPayload(ps, PayloadNonce).(*Nonce)
	if ke == nil || nonce == nil {
		sa.respond(m, []Payload{&Notify{NotifyType: INVALID_SYNTAX}})
		return
	}
	for _, c := range sa.children {
		if c.state == childRekeying {
			// RFC 7296 2.25.1: not while we rekey a child of this SA.
			sa.respond(m, []Payload{&Notify{NotifyType: TEMPORARY_FAILURE}})
			return
		}
	}
	ours := sa.cfg.ikeProposals()
	prop, ti, ok := selectProposal(ours, saP.Proposals, ke.Group)
	if !ok || len(saP.Proposals[ti].SPI) != 8 {
		sa.respond(m, []Payload{&Notify{NotifyType: NO_PROPOSAL_CHOSEN}})
		var theirs []Proposal
		for _, w := range saP.Proposals {
			p, _ := ProposalFromWire(w)
			theirs = append(theirs, p)
		}
		sa.report(&Failure{Reason: ReasonNoProposalChosen, Peer: sa.remote, Exchange: CREATE_CHILD_SA, OurProposals: ours, PeerProposals: theirs})
		return
	}
	if prop.DH[0] != ke.Group {
		sa.respond(m, []Payload{&Notify{NotifyType: INVALID_KE_PAYLOAD, Data: binary.BigEndian.AppendUint16(nil, uint16(prop.DH[0]))}})
		return
	}
	dh, err := newDHKey(ke.Group, sa.ep.rand)
	if err != nil {
		sa.respond(m, []Payload{&Notify{NotifyType: NO_PROPOSAL_CHOSEN}})
		return
	}
	defer dh.Zero()
	gir, err := dh.Shared(ke.Data)
	if err != nil {
		sa.respond(m, []Payload{&Notify{NotifyType: INVALID_SYNTAX}})
		return
	}
	defer clear(gir)
	nr := make([]byte, 32)
	io.ReadFull(sa.ep.rand, nr)
	newSPI := sa.ep.randUint64()
	n, err := sa.successor(false, binary.BigEndian.Uint64(saP.Proposals[ti].SPI), newSPI, prop, nonce.Data, nr, gir)
	if err != nil {
		sa.respond(m, []Payload{&Notify{NotifyType: NO_PROPOSAL_CHOSEN}})
		return
	}
	// Registered before the answer leaves, so that the peer's first
	// request on n cannot come before we know it; locked until it is in
	// shape (after sa: locks go oldest first).
	n.mu.Lock()
	defer func() {
		sa.events = append(sa.events, n.takeEvents()...)
		n.mu.Unlock()
	}()
	sa.ep.register(n)
	sa.respond(m, []Payload{&SA{Proposals: []WireProposal{prop.ToWire(saP.Proposals[ti].Number, spiBytes(newSPI))}},
		&Nonce{Data: nr}, &KE{Group: ke.Group, Data: dh.Public()}})
	if st := sa.ikeRekey; st != nil {
		if sa.out != nil && sa.out.ex == st.ex {
			// Collision: decide when our own exchange completes.
			st.peerNi, st.ourNr, st.peerNew = append([]byte(nil), nonce.Data...), nr, n
			return
		}
		// Ours is still queued behind another exchange: the peer cannot
		// see a collision, and once its rekey completes it deletes this
		// SA, children and all, unless they move now. Give way; the
		// queued exchange finds the SA rekeyed and drops itself.
		st.abort()
		sa.ikeRekey = nil
	}
	sa.handOver(n)
	sa.state = StateRekeyed
	sa.rekeyAt = stampOf(sa.ep.now())
}

// Replaced reports whether n took sa's place by a rekey: n is sa's
// successor, or a successor of that one. An IKEUp for n finds the SA it
// replaces Rekeyed, or Deleting when we rekeyed it: only this tells the
// second case from an SA that is merely being deleted.
func (sa *IKESA) Replaced(n *IKESA) bool {
	sa.mu.Lock()
	next := sa.replacedBy
	sa.mu.Unlock()
	for hops := 0; next != nil && hops < 64; hops++ {
		if next == n {
			return true
		}
		next.mu.Lock()
		after := next.replacedBy
		next.mu.Unlock()
		next = after
	}
	return false
}
