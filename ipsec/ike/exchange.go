package ike

import (
	"errors"
	"net/netip"
)

// exchange is one request of ours: build makes its payloads when it is
// sent (so it sees the state at that moment), onResponse handles the
// answer's payloads, onAbort releases what build reserved if the exchange
// never completes.
type exchange struct {
	typ        ExchangeType
	build      func() []Payload
	onResponse func(ps []Payload)
	onAbort    func()
}

// startExchange queues a request; RFC 7296 2.3 with a window of 1: one in
// flight at a time.
func (sa *IKESA) startExchange(ex *exchange) {
	sa.queue = append(sa.queue, ex)
	sa.sendNext()
}

// finishExchange queues ex before every other request: it is the last
// step of an exchange already done (the DELETE that ends a child rekey),
// and must not wait behind requests queued meanwhile, above all an IKE SA
// rekey, which would move the children to a new IKE SA while the DELETE
// is still queued on this one.
func (sa *IKESA) finishExchange(ex *exchange) {
	sa.queue = append([]*exchange{ex}, sa.queue...)
	sa.sendNext()
}

func (sa *IKESA) sendNext() {
	for sa.out == nil && len(sa.queue) > 0 && sa.keys != nil {
		ex := sa.queue[0]
		sa.queue = sa.queue[1:]
		ps := ex.build()
		if ps == nil {
			// Nothing to do any more (e.g. the child went away). An empty
			// INFORMATIONAL is a non-nil empty slice.
			if ex.onAbort != nil {
				ex.onAbort()
			}
			continue
		}
		msgID := sa.nextMsgID
		pkts, err := sa.sealMsg(sa.header(ex.typ, msgID, false), ps)
		if err != nil {
			if ex.onAbort != nil {
				ex.onAbort()
			}
			continue
		}
		sa.nextMsgID++
		now := sa.ep.now()
		sa.out = &pending{ex: ex, exchange: ex.typ, msgID: msgID, pkts: pkts, first: now,
			next: now.Add(sa.cfg.retransmitTimeout()), tries: 1}
		sa.sendAll(pkts)
	}
}

// respond seals and sends the response to request m, caching it for
// retransmitted copies of the request.
func (sa *IKESA) respond(m *Message, ps []Payload) {
	if pkts := sa.sealResponse(m, ps); pkts != nil {
		sa.sendAll(pkts)
	}
}

// sealResponse makes the answer to m and records it as the answer to
// retransmissions of m, without sending it.
func (sa *IKESA) sealResponse(m *Message, ps []Payload) [][]byte {
	pkts, err := sa.sealMsg(sa.header(m.Exchange, m.MessageID, true), ps)
	if err != nil {
		return nil
	}
	sa.lastResp = pkts
	sa.peerMsgID = m.MessageID + 1
	return pkts
}

// sendAfterEvents sends an answer that hands a CHILD_SA to the peer once
// the events queued so far have run, so after ChildUp: the data plane holds
// the new SA before the peer can use it, as strongSwan installs before it
// answers. Sent at once, the answer raced the installation and the peer's
// first packets through a fresh CHILD_SA were dropped (a hub of 100 spokes
// lost nearly every spoke's first echo request; bench/hub_test.go).
func (sa *IKESA) sendAfterEvents(pkts [][]byte) {
	if pkts == nil {
		return
	}
	sa.lastSend = stampOf(sa.ep.now())
	local, remote := sa.local, sa.remote
	sa.emit(func() {
		for _, pkt := range pkts {
			sa.ep.sendRaw(pkt, local, remote)
		}
	})
}

// handle processes one message for this SA (under sa.mu).
func (sa *IKESA) handle(pkt []byte, m *Message, local, remote netip.AddrPort) {
	if sa.state == StateDead {
		// Found just before it ended: what it left answers for it.
		if sa.ep.answerEnded(sa.localSPI(), pkt, local, remote) {
			return
		}
		sa.ep.Stats.UnknownSPI.Add(1)
		return
	}
	if m.Exchange == IKE_SA_INIT {
		if m.IsResponse() && sa.state == StateInitSent && sa.init != nil && sa.out != nil && m.MessageID == 0 {
			sa.lastRecv = stampOf(sa.ep.now())
			sa.handleInitResponse(m)
			return
		}
		sa.ep.Stats.OutOfWindow.Add(1)
		return
	}
	if sa.keys == nil || sa.state == StateInitSent {
		sa.ep.Stats.OutOfWindow.Add(1)
		return
	}
	// Cheap window checks before any cryptography.
	if m.IsResponse() {
		if sa.out == nil || m.MessageID != sa.out.msgID || m.Exchange != sa.out.exchange {
			sa.ep.Stats.OutOfWindow.Add(1)
			return
		}
	} else if m.MessageID != sa.peerMsgID && !(m.MessageID+1 == sa.peerMsgID && sa.lastResp != nil) {
		sa.ep.Stats.OutOfWindow.Add(1)
		return
	}
	if len(m.Payloads) == 0 {
		sa.ep.Stats.Malformed.Add(1)
		return
	}
	var inner []Payload
	var err error
	switch sk := m.Payloads[len(m.Payloads)-1].(type) {
	case *Encrypted:
		inner, err = sa.keys.in.open(pkt, m.Header, sk)
	case *EncryptedFragment:
		if !m.IsResponse() && m.MessageID+1 == sa.peerMsgID {
			// A fragment of a retransmitted request: answer the first
			// one, once it authenticates (RFC 7383 2.6.2).
			if _, err := sa.keys.in.openPlain(pkt, m.Header, sk.Data); err != nil {
				sa.ep.Stats.BadICV.Add(1)
				return
			}
			if sk.Number == 1 {
				sa.ep.Stats.RetransmitsAnswered.Add(1)
				sa.lastSend = stampOf(sa.ep.now())
				for _, r := range sa.lastResp {
					sa.ep.sendRaw(r, local, remote)
				}
			}
			return
		}
		var complete bool
		inner, complete, err = sa.reassemble(pkt, m, sk)
		if err == nil && !complete {
			sa.lastRecv = stampOf(sa.ep.now()) // an authenticated fragment
			return
		}
	default:
		sa.ep.Stats.Malformed.Add(1)
		return
	}
	if err != nil {
		var uc *UnsupportedCriticalError
		switch {
		case errors.Is(err, errICV):
			sa.ep.Stats.BadICV.Add(1)
		case errors.As(err, &uc) && !m.IsResponse() && m.MessageID == sa.peerMsgID:
			sa.ep.Stats.UnsupportedCritical.Add(1)
			sa.respond(m, []Payload{&Notify{NotifyType: UNSUPPORTED_CRITICAL_PAYLOAD, Data: []byte{byte(uc.Type)}}})
		default:
			sa.ep.Stats.Malformed.Add(1)
		}
		return
	}
	// Authenticated from here on.
	sa.lastRecv = stampOf(sa.ep.now())
	if !m.IsResponse() && m.MessageID+1 == sa.peerMsgID {
		// A retransmitted request: answer it from the cache, to where it
		// came from, but do not move the SA there. Anyone who saw the
		// peer's last request can replay it from any address, and
		// following it would hand them our IKE traffic. A peer whose NAT
		// mapping really changed moves us with its next new message.
		sa.ep.Stats.RetransmitsAnswered.Add(1)
		sa.lastSend = stampOf(sa.ep.now())
		for _, r := range sa.lastResp {
			sa.ep.sendRaw(r, local, remote)
		}
		return
	}
	sa.float(local, remote)
	if m.IsResponse() {
		p := sa.out
		sa.out = nil
		if p.ex.onResponse != nil {
			p.ex.onResponse(inner)
		}
		if sa.state == StateDeleting && p.exchange == INFORMATIONAL && len(sa.queue) == 0 {
			sa.die(sa.closeReason)
			return
		}
		sa.sendNext()
		return
	}
	sa.handleRequest(m, inner)
	if sa.state == StateDead {
		if len(sa.lastResp) == 1 && sa.peerMsgID == m.MessageID+1 {
			// The request ended the SA (the peer deleted it). If our
			// answer is lost, the peer sends the request again and
			// must still get one.
			sa.ep.rememberEnd(sa.localSPI(), pkt, sa.lastResp[0])
		}
		return
	}
	sa.sendNext()
}

// float follows the peer to the NAT-T port and through NAT mapping
// changes (RFC 7296 2.23), on authenticated messages only.
func (sa *IKESA) float(local, remote netip.AddrPort) {
	if local.Port() != sa.ep.cfg.NATTPort {
		return
	}
	if sa.local.Port() != sa.ep.cfg.NATTPort {
		sa.local = local
		sa.remote = remote
		return
	}
	if sa.natRemote && remote != sa.remote {
		sa.remote = remote
	}
}

func (sa *IKESA) handleRequest(m *Message, ps []Payload) {
	switch {
	case m.Exchange == IKE_AUTH && sa.state == StateHalfOpen:
		sa.handleAuthRequest(m, ps)
	case sa.state == StateHalfOpen:
		// Before IKE_AUTH the peer is nobody: whoever sent an
		// IKE_SA_INIT has these keys. Only IKE_AUTH may follow (RFC
		// 7296 1.2); an INFORMATIONAL here would make us answer, and
		// remember, requests of anyone.
		sa.ep.Stats.EarlyRequests.Add(1)
	case m.Exchange == INFORMATIONAL:
		sa.handleInformational(m, ps)
	case m.Exchange == CREATE_CHILD_SA && sa.state == StateEstablished:
		sa.handleCreateChild(m, ps)
	case m.Exchange == CREATE_CHILD_SA:
		// Rekeyed or being deleted: RFC 7296 2.25 says TEMPORARY_FAILURE.
		sa.respond(m, []Payload{&Notify{NotifyType: TEMPORARY_FAILURE}})
	default:
		sa.ep.Stats.OutOfWindow.Add(1)
	}
}

// handleInformational answers DELETEs, liveness checks and notices.
func (sa *IKESA) handleInformational(m *Message, ps []Payload) {
	var answer []Payload
	var deleteIKE bool
	for _, p := range ps {
		switch p := p.(type) {
		case *Delete:
			switch p.Protocol {
			case ProtoIKE:
				deleteIKE = true
			case ProtoESP:
				var ours [][]byte
				for _, spi := range p.SPIs {
					if len(spi) != 4 {
						continue
					}
					if c := sa.childByOutSPI(be32(spi)); c != nil {
						ours = append(ours, be32bytes(c.inSPI))
						sa.removeChild(c, sa.childDeleteReason(c))
					}
				}
				if len(ours) > 0 {
					answer = append(answer, &Delete{Protocol: ProtoESP, SPISize: 4, SPIs: ours})
				}
			}
		case *Notify:
			if p.NotifyType == AUTHENTICATION_FAILED && sa.state != StateHalfOpen {
				// The initiator did not accept our AUTH (RFC 7296 2.21.2).
				sa.respond(m, nil)
				sa.fail(&Failure{Reason: ReasonAuthenticationFailed, ByPeer: true, Peer: sa.remote, Exchange: INFORMATIONAL, OurAuth: sa.cfg.LocalAuth,
					Detail: sa.whoWeAre()})
				return
			}
		}
	}
	if answer == nil {
		answer = []Payload{}
	}
	sa.respond(m, answer)
	if deleteIKE {
		if st := sa.ikeRekey; st != nil && st.peerNew != nil && sa.state == StateEstablished {
			// We answered the peer's rekey of this SA while ours was on
			// the wire, and now the peer deletes the SA without having
			// answered ours: it saw no collision (or won and its DELETE
			// overtook our answer). Its new SA keeps the children.
			sa.yieldToPeerRekey(st)
		}
		var reason error
		if sa.state != StateRekeyed {
			reason = &Failure{Reason: ReasonPeerDeleted, Peer: sa.remote, Detail: "IKE SA"}
		}
		sa.die(reason)
	}
}

// childDeleteReason: a child the peer deletes after replacing it is no
// news; any other is.
func (sa *IKESA) childDeleteReason(c *child) error {
	if c.state == childRekeyed || c.state == childDeleting {
		return nil
	}
	return &Failure{Reason: ReasonPeerDeleted, Peer: sa.remote, Detail: "CHILD_SA " + spiString(c.inSPI)}
}
