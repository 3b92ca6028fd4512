package webui

import (
	"sync"
	"time"
)

// loginLimiter slows down password guessing per client address: a few
// failures a minute are free (people mistype), after that each further
// failure doubles the wait before the next attempt is even checked, up to
// maxLockout. A success clears the address's record.
type loginLimiter struct {
	mu      sync.Mutex
	clients map[string]*loginRecord
	now     func() time.Time
}

type loginRecord struct {
	failures    int       // in the current window
	windowStart time.Time // of the failures counted
	lockedUntil time.Time
}

const (
	freeFailures  = 5
	failureWindow = time.Minute
	baseLockout   = 30 * time.Second
	maxLockout    = 30 * time.Minute
	maxClients    = 4096 // bounds memory when addresses are many
)

func newLoginLimiter(now func() time.Time) *loginLimiter {
	return &loginLimiter{clients: map[string]*loginRecord{}, now: now}
}

// allow reports whether addr may try a password now, and if not, how long
// it must wait.
func (l *loginLimiter) allow(addr string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.clients[addr]
	if r == nil {
		return true, 0
	}
	if wait := r.lockedUntil.Sub(l.now()); wait > 0 {
		return false, wait
	}
	return true, 0
}

// failure records a wrong login and returns the lockout it caused (0 while
// the address is within its free failures).
func (l *loginLimiter) failure(addr string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	r := l.clients[addr]
	if r == nil {
		if len(l.clients) >= maxClients {
			l.pruneLocked(now)
		}
		r = &loginRecord{windowStart: now}
		l.clients[addr] = r
	}
	// The window restarts only when the address has not been locked out
	// recently, so that waiting out a lockout does not reset the doubling.
	if now.Sub(r.windowStart) > failureWindow &&
		(r.failures < freeFailures || now.Sub(r.lockedUntil) > maxLockout) {
		r.failures, r.windowStart = 0, now
	}
	r.failures++
	if r.failures < freeFailures {
		return 0
	}
	lock := baseLockout << min(r.failures-freeFailures, 10)
	lock = min(lock, maxLockout)
	r.lockedUntil = now.Add(lock)
	return lock
}

func (l *loginLimiter) success(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.clients, addr)
}

// pruneLocked forgets addresses that are neither locked nor recent, and if
// that is not enough, everything: memory is bounded before fairness.
func (l *loginLimiter) pruneLocked(now time.Time) {
	for a, r := range l.clients {
		if now.After(r.lockedUntil) && now.Sub(r.windowStart) > failureWindow {
			delete(l.clients, a)
		}
	}
	if len(l.clients) >= maxClients {
		clear(l.clients)
	}
}
