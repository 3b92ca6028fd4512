package iked

import (
	"fmt"
	"testing"
	"time"
)

// A tunnel keeps its last maxEvents events, oldest first, with their
// times, and counts every one; its history never holds more.
func TestTunnelEventHistory(t *testing.T) {
	tn := &tunnel{}
	if h := tn.history(); h != nil {
		t.Fatalf("a tunnel without events shows %v", h)
	}
	start := time.Date(2026, 12, 2, 16, 0, 0, 123456789, time.UTC)
	const n = 3*maxEvents + 5
	for i := range n {
		tn.event(start.Add(time.Duration(i)*time.Second), fmt.Sprintf("event %d", i))
		if len(tn.events) > maxEvents || cap(tn.events) > maxEvents {
			t.Fatalf("after %d events the history holds %d (capacity %d), more than %d", i+1, len(tn.events), cap(tn.events), maxEvents)
		}
	}
	if tn.eventsTotal != n {
		t.Errorf("events counted: %d, want %d", tn.eventsTotal, n)
	}
	h := tn.history()
	if len(h) != maxEvents {
		t.Fatalf("history of %d events, want the last %d", len(h), maxEvents)
	}
	for i, e := range h {
		k := n - maxEvents + i
		if want := fmt.Sprintf("event %d", k); e.Message != want {
			t.Errorf("history[%d] = %q, want %q", i, e.Message, want)
		}
		if want := start.Add(time.Duration(k) * time.Second); !e.Time.Equal(want) {
			t.Errorf("history[%d] at %v, want %v", i, e.Time, want)
		}
	}
}
