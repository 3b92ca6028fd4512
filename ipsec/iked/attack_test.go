package iked

import (
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/ipsec/ike"
)

// Refusals make one log line per interval, naming what was refused; a
// quiet interval makes none.
func TestAttackWatchLogsRefusalsOncePerInterval(t *testing.T) {
	var w attackWatch
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := ike.StatsSnapshot{}
	if line := w.check(t0, s, 0); line != "" {
		t.Errorf("first look logged %q", line)
	}
	s.SourceLimited, s.InitTooLarge = 500, 3
	if line := w.check(t0.Add(time.Second), s, 5); line != "" {
		t.Errorf("logged again within the interval: %q", line)
	}
	line := w.check(t0.Add(attackReportEvery), s, 5)
	for _, want := range []string{"500 at the per-source limit", "3 too large", "5 SAs half-open"} {
		if !strings.Contains(line, want) {
			t.Errorf("attack line %q lacks %q", line, want)
		}
	}
	if line := w.check(t0.Add(2*attackReportEvery), s, 0); line != "" {
		t.Errorf("a quiet interval logged %q", line)
	}
}
