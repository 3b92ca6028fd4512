package netd

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd/configdapi"
	"github.com/flashgate/flashgate/services/configd/configdtest"
)

// ntpTestServer is an NTP server on loopback whose clock is this host's
// plus skew: the test knows the time it serves.
type ntpTestServer struct {
	conn     *net.UDPConn
	mu       sync.Mutex
	skew     time.Duration // behind mu once the server runs
	leap     uint8
	kiss     string // answer with this kiss-o'-death code instead
	forge    bool   // send a reply with a wrong origin before the real one
	requests atomic.Int32
}

func (srv *ntpTestServer) setSkew(d time.Duration) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.skew = d
}

func (srv *ntpTestServer) now() time.Time {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return time.Now().Add(srv.skew)
}

func startNTPServer(t *testing.T, srv *ntpTestServer) int {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("NTP test server: %v", err)
	}
	srv.conn = conn
	done := make(chan struct{})
	t.Cleanup(func() { conn.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 512)
		for {
			n, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return // closed at cleanup
			}
			req, err := parseNTPPacket(buf[:n])
			if err != nil || req.Mode != ntpModeClient {
				continue
			}
			srv.requests.Add(1)
			recv := srv.now()
			reply := ntpPacket{Leap: srv.leap, Version: 4, Mode: ntpModeServer, Stratum: 2, Poll: req.Poll, Precision: -20,
				RefID: [4]byte{127, 0, 0, 1}, RefTime: toNTPTime(recv.Add(-time.Minute)), Origin: req.Transmit,
				Receive: toNTPTime(recv)}
			if srv.kiss != "" {
				reply.Stratum = 0
				copy(reply.RefID[:], srv.kiss)
			}
			if srv.forge {
				forged := reply
				forged.Origin++
				forged.Transmit = toNTPTime(srv.now().Add(7 * time.Hour))
				conn.WriteToUDP(forged.marshal(), from)
			}
			reply.Transmit = toNTPTime(srv.now())
			conn.WriteToUDP(reply.marshal(), from)
		}
	}()
	return conn.LocalAddr().(*net.UDPAddr).Port
}

// recordingClock is the host's clock, which it never changes: it records
// the corrections it is asked for.
type recordingClock struct {
	mu sync.Mutex
	// moves makes the steps move the clock (Now is the host's time plus
	// the steps so far), as a real clock would: a poll after a step finds
	// it right. Without it Now is the host's time, for tests that set the
	// server's time relative to it again and again.
	moves   bool
	offset  time.Duration
	steps   []time.Duration
	slews   []time.Duration
	failing error
}

func (c *recordingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *recordingClock) Step(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing != nil {
		return c.failing
	}
	c.steps = append(c.steps, d)
	if c.moves {
		c.offset += d
	}
	return nil
}

func (c *recordingClock) Slew(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing != nil {
		return c.failing
	}
	c.slews = append(c.slews, d)
	return nil
}

func (c *recordingClock) corrections() (steps, slews []time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.steps), slices.Clone(c.slews)
}

func near(got, want, tolerance time.Duration) bool {
	return got >= want-tolerance && got <= want+tolerance
}

// TestTimeSyncCorrectsClock syncs with a loopback server whose clock is
// an hour ahead (a step), then 40 ms ahead (a slew), then an hour behind.
func TestTimeSyncCorrectsClock(t *testing.T) {
	srv := &ntpTestServer{skew: time.Hour}
	port := startNTPServer(t, srv)
	clock := &recordingClock{}
	ts := NewTimeSync(clock)
	ts.Port = port
	ts.SetServers([]string{"127.0.0.1"})

	if wait := ts.Poll(context.Background()); wait != ntpMinPoll {
		t.Errorf("after the first sync the next poll is in %v, want %v", wait, ntpMinPoll)
	}
	steps, slews := clock.corrections()
	if len(steps) != 1 || !near(steps[0], time.Hour, 100*time.Millisecond) || len(slews) != 0 {
		t.Fatalf("server 1 h ahead: steps %v slews %v; want one step of 1 h", steps, slews)
	}
	st := ts.Status()
	if st.State != "synchronized" || st.Server != "127.0.0.1" || st.Correction != "stepped" || st.Stratum != 2 ||
		st.OffsetSeconds < 3599.9 || st.OffsetSeconds > 3600.1 || time.Since(st.LastSync) > 5*time.Second || st.LastError != "" {
		t.Errorf("status after a step: %+v", st)
	}

	// 50 ms: a slew whatever the scheduling of a loaded machine adds
	// to the measurement (up to 78 ms).
	srv.setSkew(50 * time.Millisecond)
	if wait := ts.Poll(context.Background()); wait != 2*ntpMinPoll {
		t.Errorf("after the second sync the next poll is in %v, want %v", wait, 2*ntpMinPoll)
	}
	srv.setSkew(-time.Hour)
	ts.Poll(context.Background())
	steps, slews = clock.corrections()
	if len(slews) != 1 || !near(slews[0], 50*time.Millisecond, 45*time.Millisecond) {
		t.Errorf("server 50 ms ahead: slews %v; want one of 50 ms", slews)
	}
	if len(steps) != 2 || !near(steps[1], -time.Hour, 100*time.Millisecond) {
		t.Errorf("server 1 h behind: steps %v; want a second step of -1 h", steps)
	}
}

// TestTimeSyncNamesAndFallback resolves "localhost" with the system
// resolver (/etc/hosts: no query leaves the host) after a server that
// does not answer, and takes the answer of the one that does.
func TestTimeSyncNamesAndFallback(t *testing.T) {
	srv := &ntpTestServer{skew: 300 * time.Millisecond, forge: true}
	port := startNTPServer(t, srv)
	clock := &recordingClock{}
	ts := NewTimeSync(clock)
	ts.Port = port
	// 127.0.0.2 is loopback too, but nothing listens there: refused.
	ts.SetServers([]string{"127.0.0.2", "localhost"})
	ts.Poll(context.Background())
	st := ts.Status()
	if st.State != "synchronized" || st.Server != "localhost (127.0.0.1)" {
		t.Fatalf("status %+v; want synchronized with localhost (127.0.0.1)", st)
	}
	steps, _ := clock.corrections()
	if len(steps) != 1 || !near(steps[0], 300*time.Millisecond, 100*time.Millisecond) {
		t.Errorf("steps %v; want one of 300 ms (the forged reply says 7 h)", steps)
	}

	// An injected resolver, and a name that does not resolve.
	ts.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
		if host == "ntp.example" {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, errors.New("no such host")
	}
	ts.SetServers([]string{"nosuch.example", "ntp.example"})
	ts.Poll(context.Background())
	if st := ts.Status(); st.Server != "ntp.example (127.0.0.1)" {
		t.Errorf("with the injected resolver: server %q, want ntp.example (127.0.0.1)", st.Server)
	}
}

// TestTimeSyncBacksOff polls a server that does not answer, then one
// that refuses us, then one that is not synchronized.
func TestTimeSyncBacksOff(t *testing.T) {
	clock := &recordingClock{}
	ts := NewTimeSync(clock)
	ln, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // a server that reads nothing: the exchange times out
	ts.Port = ln.LocalAddr().(*net.UDPAddr).Port
	ts.SetServers([]string{"127.0.0.1"})
	began := time.Now()
	if wait := ts.Poll(context.Background()); wait != ntpRetryMin {
		t.Errorf("first retry in %v, want %v", wait, ntpRetryMin)
	}
	if took := time.Since(began); took > ntpExchangeTimeout+2*time.Second {
		t.Errorf("a silent server held the poll for %v", took)
	}
	if st := ts.Status(); st.State != "unsynchronized" || !strings.Contains(st.LastError, "i/o timeout") {
		t.Errorf("status %+v; want unsynchronized with a timeout", st)
	}

	var retries []time.Duration
	for cur := time.Duration(0); len(retries) < 8; {
		cur = nextRetry(cur)
		retries = append(retries, cur)
	}
	wantRetries := []time.Duration{2, 4, 8, 16, 32, 64, 64, 64}
	var polls []time.Duration
	for cur := time.Duration(0); len(polls) < 6; {
		cur = nextPoll(cur)
		polls = append(polls, cur)
	}
	wantPolls := []time.Duration{64, 128, 256, 512, 1024, 1024}
	for i := range wantRetries {
		wantRetries[i] *= time.Second
	}
	for i := range wantPolls {
		wantPolls[i] *= time.Second
	}
	if !slices.Equal(retries, wantRetries) || !slices.Equal(polls, wantPolls) {
		t.Errorf("retries %v, polls %v; want %v and %v", retries, polls, wantRetries, wantPolls)
	}

	deny := &ntpTestServer{kiss: "DENY"}
	ts.Port = startNTPServer(t, deny)
	ts.SetServers(nil) // a change of servers forgets the timeouts
	ts.SetServers([]string{"127.0.0.1"})
	ts.Poll(context.Background())
	if st := ts.Status(); !strings.Contains(st.LastError, "kiss-o'-death DENY") {
		t.Errorf("after DENY: status %+v", st)
	}
	if wait := ts.Poll(context.Background()); wait != ntpMaxPoll || deny.requests.Load() != 1 {
		t.Errorf("after DENY the server was asked %d times, next poll in %v; want once and %v", deny.requests.Load(), wait, ntpMaxPoll)
	}

	rate := &ntpTestServer{kiss: "RATE"}
	ts.Port = startNTPServer(t, rate)
	ts.SetServers([]string{"localhost"})
	if wait := ts.Poll(context.Background()); wait != 2*ntpMinPoll {
		t.Errorf("after RATE the next poll is in %v, want %v", wait, 2*ntpMinPoll)
	}
	if wait := ts.Poll(context.Background()); wait != 4*ntpMinPoll || rate.requests.Load() != 2 {
		t.Errorf("after a second RATE: next poll in %v after %d requests, want %v after 2", wait, rate.requests.Load(), 4*ntpMinPoll)
	}

	alarm := &ntpTestServer{leap: ntpLeapAlarm, skew: time.Hour}
	ts.Port = startNTPServer(t, alarm)
	ts.SetServers([]string{"localhost"})
	ts.Poll(context.Background())
	if steps, slews := clock.corrections(); len(steps)+len(slews) != 0 {
		t.Errorf("an unsynchronized server's time was used: steps %v slews %v", steps, slews)
	}
	if st := ts.Status(); !strings.Contains(st.LastError, "not synchronized") {
		t.Errorf("unsynchronized server: status %+v", st)
	}
}

// TestTimeSyncFollowsConfig runs the sync loop as netd does: no servers
// at first, then configd's change brings one, and the loop syncs at once
// instead of at its next poll. netd follows configd on one stream: a
// change of the tunnels goes to the reconcilers and not to the time sync,
// a change of the system section to the time sync and not to the
// reconcilers.
func TestTimeSyncFollowsConfig(t *testing.T) {
	srv := &ntpTestServer{skew: -5 * time.Second}
	port := startNTPServer(t, srv)
	// The loop may poll twice (its first timer and the change can both be
	// pending): the clock must be right after the first step, as a real
	// one would, for the second poll to find nothing to step.
	clock := &recordingClock{moves: true}
	ts := NewTimeSync(clock)
	ts.Port = port
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := configdtest.NewTwin(&config.Config{})
	var mu sync.Mutex
	var applied []uint64
	set := func(cfg *config.Config, rev uint64, source string) error {
		mu.Lock()
		defer mu.Unlock()
		applied = append(applied, rev)
		return nil
	}
	done := make(chan struct{}, 2)
	go func() { ts.Run(ctx); done <- struct{}{} }()
	first, _, _ := src.Running(ctx) // netd's firstConfig
	go func() {
		configdapi.Follow(ctx, src, following(set, ts, first))
		done <- struct{}{}
	}()

	if st := ts.Status(); st.State != "off" {
		t.Errorf("without servers the state is %q, want off", st.State)
	}
	// Follow has read the configuration for the watch's "current" notice.
	for deadline := time.Now().Add(10 * time.Second); src.Reads() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Follow did not read the running configuration after the current notice")
		}
	}
	src.Set(&config.Config{System: config.System{NTPServers: []string{"127.0.0.1"}}})
	src.Notify(config.Change{Reason: "commit", Revision: 2, Sections: []config.Section{config.SectionTunnels}}) // the reconcilers'
	if st := ts.Status(); st.State != "off" {
		t.Errorf("after a change of the tunnels the state is %q, want off", st.State)
	}
	src.Notify(config.Change{Reason: "commit", Revision: 3, Sections: []config.Section{config.SectionSystem}})
	deadline := time.Now().Add(10 * time.Second)
	for ts.Status().State != "synchronized" {
		if time.Now().After(deadline) {
			t.Fatalf("not synchronized 10 s after the servers were set: %+v", ts.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if steps, _ := clock.corrections(); len(steps) != 1 || !near(steps[0], -5*time.Second, 100*time.Millisecond) {
		t.Errorf("steps %v, want one of -5 s", steps)
	}
	mu.Lock()
	if len(applied) != 1 {
		t.Errorf("the reconcilers were given %d configurations, want 1 (the tunnels change's)", len(applied))
	}
	mu.Unlock()
	cancel()
	for range 2 {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Run or Follow did not return after the context ended")
		}
	}
}

// TestTimeSyncClockError keeps the state honest when the clock cannot be
// set (no CAP_SYS_TIME).
func TestTimeSyncClockError(t *testing.T) {
	port := startNTPServer(t, &ntpTestServer{skew: time.Hour})
	ts := NewTimeSync(&recordingClock{failing: errors.New("clock_settime: operation not permitted")})
	ts.Port = port
	ts.SetServers([]string{"127.0.0.1"})
	if wait := ts.Poll(context.Background()); wait != ntpRetryMin {
		t.Errorf("next try in %v, want %v", wait, ntpRetryMin)
	}
	if st := ts.Status(); st.State != "unsynchronized" || !strings.Contains(st.LastError, "operation not permitted") {
		t.Errorf("status %+v; want unsynchronized with the clock's error", st)
	}
}
