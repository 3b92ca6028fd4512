// Package waitfor is how tests wait for something another goroutine or
// process does: poll a condition until it holds or a limit passes, then
// fail the test saying what did not happen.
package waitfor

import (
	"testing"
	"time"
)

// Cond polls cond until it returns true, and fails t (Fatalf) if it has
// not after limit, naming what it waited for. It polls every 2 ms at
// first and backs off to every 100 ms, so a cheap condition is seen at
// once and an expensive one (a netlink dump) is not run in a tight loop.
func Cond(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	pause := 2 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}
