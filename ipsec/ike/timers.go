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
		if sa.created.since(now) > sa.ep.cfg.HalfOpenTimeout {
			sa.ep.Stats.HalfOpenExpired.Add(1)
			sa.die(nil)
		}
		return
	case StateRekeyed:
		// rekeyAt holds the moment it was replaced.
		if sa.rekeyAt.since(now) > rekeyedGrace && sa.out == nil {
			sa.die(nil)
		}
		return
	case StateEstablished:
	default:
		return
	}
	if sa.expireAt.reached(now) {
		sa.Close()
		sa.closeReason = &Failure{Reason: ReasonProtocol, Peer: sa.remote, Exchange: CREATE_CHILD_SA,
			Detail: "the IKE SA reached its hard lifetime because rekeying it did not succeed"}
		sa.lastErr = sa.closeReason
		return
	}
	if sa.rekeyAt.reached(now) && sa.ikeRekey == nil && !sa.childRekeyInFlight() {
		sa.rekeyAt = 0
		sa.startExchange(sa.rekeyIKEExchange(0))
	}
	for _, c := range append([]*child(nil), sa.children...) {
		if c.state == childInstalled && c.rekeyAt.reached(now) && sa.ikeRekey == nil {
			c.rekeyAt = 0
			sa.startExchange(sa.createChildExchange(c, 0))
		}
		if c.expireAt.reached(now) && c.state != childDeleting {
			c.expireAt = 0
			sa.startExchange(sa.deleteChildExchange(c))
		}
	}
	if sa.cfg.DPDDelay > 0 && sa.out == nil && len(sa.queue) == 0 && sa.lastRecv.since(now) >= sa.cfg.DPDDelay {
		sa.startExchange(&exchange{typ: INFORMATIONAL, build: func() []Payload { return []Payload{} }})
	}
	if sa.natLocal && sa.local.Port() == sa.ep.cfg.NATTPort && sa.lastSend.since(now) >= sa.cfg.keepalive() {
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

// stamp is a moment as the SAs keep it: nanoseconds from stampEpoch, 0
// for none. 8 bytes where a time.Time takes 24: a hub keeps six for each
// IKE SA and three for each CHILD_SA, a thousand of each (issue 22).
// Taken with time.Time.Sub, so on the monotonic clock when the time has
// one (time.Now's do, a test clock's do not): a clock stepped by NTP
// after boot moves no rekey, expiry or DPD.
type stamp int64

var stampEpoch = time.Now()

// stampOf is t as a stamp (0 for the zero time).
func stampOf(t time.Time) stamp {
	if t.IsZero() {
		return 0
	}
	s := stamp(t.Sub(stampEpoch))
	if s == 0 {
		s = 1 // 0 is "none"; a nanosecond off
	}
	return s
}

func (s stamp) IsZero() bool { return s == 0 }

// reached: the moment s is set and now is not before it.
func (s stamp) reached(now time.Time) bool { return s != 0 && stampOf(now) >= s }

// since is the time from s to now.
func (s stamp) since(now time.Time) time.Duration { return time.Duration(stampOf(now) - s) }

// before: s is earlier than o.
func (s stamp) before(o stamp) bool { return s < o }

// wall is s as a time to show, now being the current time: now less
// the time since s, so that it shows on the wall clock as it is now
// (the zero time for none).
func (s stamp) wall(now time.Time) time.Time {
	if s == 0 {
		return time.Time{}
	}
	return now.Add(-s.since(now))
}
