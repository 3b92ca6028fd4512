package config

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// sampleConfig returns a valid config with n tunnels, a routed LAN and a
// few firewall rules: the shape of a busy hub box.
func sampleConfig(n int) *Config {
	c := SyntheticConfig(n)
	c.System.Admins = []Admin{{Name: "admin", PasswordHash: NewSecret(testHash())}}
	return c
}

// testHash is the argon2id hash of "correct horse", made once and only when
// needed, so that tests (and the power-loss helper processes) do not pay
// for hashing.
var testHash = sync.OnceValue(func() string {
	h, err := HashPassword("correct horse")
	if err != nil {
		panic(err)
	}
	return h
})

// fakeClock is a Clock that moves only when the test says so.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	when    time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, when: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves the clock and runs, in the caller's goroutine, every timer
// that came due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	var rest []*fakeTimer
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.when.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			rest = append(rest, t)
		}
	}
	c.timers = rest
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

func mustValid(t *testing.T, c *Config) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("config does not validate:\n%v", err)
	}
}

// joined is sections as "a,b,c", to compare with a want.
func joined(sections []Section) string {
	s := make([]string, len(sections))
	for i, sec := range sections {
		s[i] = string(sec)
	}
	return strings.Join(s, ",")
}
