package ike

import "time"

// rekeyedGrace is how long a replaced IKE SA waits for the peer's DELETE.
const rekeyedGrace = 30 * time.Second

// tick runs this SA's timers (under sa.mu).
func (sa *IKESA) tick(now time.Time) {
	if sa.state == StateDead {
		return
	}
	if sa.v1 != nil {
		sa.v1Tick(now)
		return
	}
	if p := sa.out; p != nil && !now.Before(p.next) {
		if p.tries >= sa.cfg.retransmitTries() {
			if sa.state == StateDeleting || sa.state == StateRekeyed {
				sa.die(sa.closeReason)
				return
			}
			sa.fail(&Failure{Reason: ReasonPeerTimeout, Peer: sa.remote, Exchange: p.exchange, Tries: p.tries, After: now.Sub(p.first)})
			return
		}
		p.tries++
		p.next = now.Add(sa.cfg.retransmitTimeout() << (p.tries - 1))
		sa.ep.Stats.Retransmits.Add(1)
		sa.sendAll(p.pkts)
	}
	if sa.reasmReq != nil || sa.reasmResp != nil {
		sa.expireReassembly(now, false)
	}
	switch sa.state {
	case StateHalfOpen:
		if now.Sub(sa.created) > sa.ep.cfg.HalfOpenTimeout {
			sa.ep.Stats.HalfOpenExpired.Add(1)
			sa.die(nil)
		}
		return
	case StateRekeyed:
		// rekeyAt holds the moment it was replaced.
		if now.Sub(sa.rekeyAt) > rekeyedGrace && sa.out == nil {
			sa.die(nil)
		}
		return
	case StateEstablished:
	default:
		return
	}
	if !sa.expireAt.IsZero() && !now.Before(sa.expireAt) {
		sa.Close()
		sa.closeReason = &Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: CREATE_CHILD_SA,
			Detail: "the IKE SA reached its hard lifetime because rekeying it did not succeed"}
		sa.lastErr = sa.closeReason
		return
	}
	if !sa.rekeyAt.IsZero() && !now.Before(sa.rekeyAt) && sa.ikeRekey == nil && !sa.childRekeyInFlight() {
		sa.rekeyAt = time.Time{}
		sa.startExchange(sa.rekeyIKEExchange(0))
	}
	for _, c := range append([]*child(nil), sa.children...) {
		if c.state == childInstalled && !c.rekeyAt.IsZero() && !now.Before(c.rekeyAt) && sa.ikeRekey == nil {
			c.rekeyAt = time.Time{}
			sa.startExchange(sa.createChildExchange(c, 0))
		}
		if !c.expireAt.IsZero() && !now.Before(c.expireAt) && c.state != childDeleting {
			c.expireAt = time.Time{}
			sa.startExchange(sa.deleteChildExchange(c))
		}
	}
	if sa.cfg.DPDDelay > 0 && sa.out == nil && len(sa.queue) == 0 && now.Sub(sa.lastRecv) >= sa.cfg.DPDDelay {
		sa.startExchange(&exchange{typ: INFORMATIONAL, build: func() []Payload { return []Payload{} }})
	}
	if sa.natLocal && sa.local.Port() == sa.ep.cfg.NATTPort && now.Sub(sa.lastSend) >= sa.cfg.keepalive() {
		sa.send(natKeepalive)
	}
}

func (sa *IKESA) childRekeyInFlight() bool {
	for _, c := range sa.children {
		if c.state == childRekeying {
			return true
		}
	}
	return false
}
