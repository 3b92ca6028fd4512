package webui

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
)

// countedTunnels is a TunnelSource that counts the reads (of statuses
// and of counters): one up tunnel whose counters grow at every read.
type countedTunnels struct{ reads atomic.Int64 }

func (c *countedTunnels) Tunnels(context.Context) ([]ipsec.TunnelStatus, error) {
	n := uint64(c.reads.Add(1))
	return []ipsec.TunnelStatus{upTunnel("branch", 1000*n, 2000*n, "aa000001")}, nil
}

func (c *countedTunnels) Counters(ctx context.Context) ([]ikedapi.TunnelCounters, error) {
	ts, err := c.Tunnels(ctx)
	return ikedapi.CountersOf(ts), err
}

// waitFor polls cond for up to a minute (the machine may be loaded).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// TestSamplerOnlyWithSessions: the throughput sampler reads nothing from
// iked while nobody is logged in (the login page does not count), starts
// at a session's page, and stops and forgets its history once the
// sessions have idled out.
func TestSamplerOnlyWithSessions(t *testing.T) {
	src := &countedTunnels{}
	h := newHarness(t, true, func(o *Options) { o.Tunnels = src })
	h.srv.sampler.interval = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.srv.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	b := h.browser()
	b.get("/login")
	b.get("/")                         // redirected to the login page
	time.Sleep(20 * sampleTestPeriods) // many intervals
	if n := src.reads.Load(); n != 0 {
		t.Fatalf("iked was read %d times with nobody logged in", n)
	}

	b.login() // and the dashboard after it
	waitFor(t, "three samples after a login", func() bool { return src.reads.Load() >= 3 })
	// Rates need samples at two times of the web UI's clock.
	h.clock.Advance(sampleInterval)
	seen := src.reads.Load()
	waitFor(t, "two samples more", func() bool { return src.reads.Load() >= seen+2 })
	if len(h.srv.sampler.rates("branch")) == 0 {
		t.Fatalf("no rate from the samples")
	}

	h.clock.Advance(DefaultIdleTimeout + time.Second)
	waitFor(t, "the sampler to stop once the session idled out", func() bool { return !h.srv.sampler.sampling.Load() })
	stopped := src.reads.Load()
	time.Sleep(20 * sampleTestPeriods)
	if n := src.reads.Load(); n != stopped {
		t.Errorf("iked read %d more times after the last session ended", n-stopped)
	}
	if r := h.srv.sampler.rates("branch"); r != nil {
		t.Errorf("the history outlived the sessions: %v", r)
	}
	if _, ok := h.srv.sampler.cpuPercent(); ok {
		t.Errorf("the CPU figure outlived the sessions")
	}

	// A new session starts it again, from no history.
	b = h.browser()
	b.login()
	waitFor(t, "samples after a new login", func() bool { return src.reads.Load() > stopped })
}

const sampleTestPeriods = 20 * time.Millisecond
