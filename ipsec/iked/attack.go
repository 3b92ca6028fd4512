package iked

import (
	"fmt"
	"time"

	"github.com/flashgate/flashgate/ipsec/ike"
)

// attackWatch turns the engine's refusal counters into at most one log
// line per attackReportEvery, and only while something is refused: the
// box says when it is under attack without letting the attack flood the
// log ring. The counters themselves are in iked's status (Stats.IKE).
type attackWatch struct {
	last     time.Time
	lastSeen ike.StatsSnapshot
}

const attackReportEvery = 10 * time.Second

func (w *attackWatch) check(now time.Time, s ike.StatsSnapshot, halfOpen int) string {
	if w.last.IsZero() {
		w.last, w.lastSeen = now, s
		return ""
	}
	if now.Sub(w.last) < attackReportEvery {
		return ""
	}
	p := w.lastSeen
	w.last, w.lastSeen = now, s
	full, source, large, early := s.HalfOpenRefused-p.HalfOpenRefused, s.SourceLimited-p.SourceLimited,
		s.InitTooLarge-p.InitTooLarge, s.EarlyRequests-p.EarlyRequests
	if full+source+large+early == 0 {
		return ""
	}
	return fmt.Sprintf("IKE under attack? in the last %s: %d IKE_SA_INIT refused at the half-open limit, %d at the per-source limit, "+
		"%d too large, %d requests before IKE_AUTH; %d cookies sent, %d SAs half-open now (configured peers are not refused)",
		attackReportEvery, full, source, large, early, s.CookiesSent-p.CookiesSent, halfOpen)
}
