package webui

import (
	"net/netip"
	"sync"
	"time"
)

// loginLimiter slows down password guessing per client network: a few
// failures a minute are free (people mistype), after that each further
// failure doubles the wait before the next attempt is even checked, up to
// maxLockout. A success clears the record.
//
// A client is its IPv4 address or its IPv6 /64: one host picks any
// number of addresses in its /64 (link-local ones for free), so keying by
// the exact IPv6 address gave each of them its own five guesses.
//
// Above the per-client limit a global budget slows everyone when failures
// come from many clients at once: past globalFreeFailures in a minute,
// every password check waits globalDelay first, inside the one-at-a-time
// argon2 section, so the box checks about one password a second until the
// minute is quiet again. It only slows: a right password still logs in,
// and the serial console, which checks passwords itself, is not affected.
type loginLimiter struct {
	mu      sync.Mutex
	clients map[string]*loginRecord
	now     func() time.Time

	// The global budget: failures counted in the current and the previous
	// minute, for a sliding estimate.
	globalStart    time.Time
	globalCount    int
	globalPrevious int
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
	maxClients    = 4096 // bounds memory when clients are many

	globalFreeFailures = 30 // per minute, from all clients together
	globalDelay        = time.Second
)

func newLoginLimiter(now func() time.Time) *loginLimiter {
	return &loginLimiter{clients: map[string]*loginRecord{}, now: now}
}

// limiterKey is the client an address belongs to: the IPv4 address (an
// IPv4-mapped IPv6 address counts as its IPv4 address) or the IPv6 /64.
// Something that is not an address is its own key.
func limiterKey(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// allow reports whether addr may try a password now, and if not, how long
// it must wait.
func (l *loginLimiter) allow(addr string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.clients[limiterKey(addr)]
	if r == nil {
		return true, 0
	}
	if wait := r.lockedUntil.Sub(l.now()); wait > 0 {
		return false, wait
	}
	return true, 0
}

// failure records a wrong login and returns the lockout it caused (0 while
// the client is within its free failures).
func (l *loginLimiter) failure(addr string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.countGlobalLocked(now)
	key := limiterKey(addr)
	r := l.clients[key]
	if r == nil {
		if len(l.clients) >= maxClients && !l.makeRoomLocked(now) {
			// Every record is a locked-out client: keep them all. This
			// client goes unrecorded, and the global budget slows it.
			return 0
		}
		r = &loginRecord{windowStart: now}
		l.clients[key] = r
	}
	// The window restarts only when the client has not been locked out
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
	delete(l.clients, limiterKey(addr))
}

// makeRoomLocked forgets clients that are neither locked nor recent, and
// if that frees nothing, the oldest client that is not locked out. A
// locked-out client is never forgotten: a flood of new addresses must not
// buy the attacker a fresh set of guesses. It reports whether there is
// room now.
func (l *loginLimiter) makeRoomLocked(now time.Time) bool {
	var oldest string
	var oldestStart time.Time
	for k, r := range l.clients {
		if now.Before(r.lockedUntil) {
			continue
		}
		if now.Sub(r.windowStart) > failureWindow {
			delete(l.clients, k)
			continue
		}
		if oldest == "" || r.windowStart.Before(oldestStart) {
			oldest, oldestStart = k, r.windowStart
		}
	}
	if len(l.clients) >= maxClients && oldest != "" {
		delete(l.clients, oldest)
	}
	return len(l.clients) < maxClients
}

// countGlobalLocked counts one failure in the global budget.
func (l *loginLimiter) countGlobalLocked(now time.Time) {
	l.rollGlobalLocked(now)
	l.globalCount++
}

func (l *loginLimiter) rollGlobalLocked(now time.Time) {
	switch since := now.Sub(l.globalStart); {
	case since < time.Minute:
	case since < 2*time.Minute:
		l.globalPrevious, l.globalCount = l.globalCount, 0
		l.globalStart = l.globalStart.Add(time.Minute)
	default:
		l.globalPrevious, l.globalCount = 0, 0
		l.globalStart = now
	}
}

// slowdown is how long a password check waits first: globalDelay while
// the failures of the last minute (the current one plus the part of the
// previous one still inside the sliding minute) exceed the budget.
func (l *loginLimiter) slowdown() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.rollGlobalLocked(now)
	left := time.Minute - now.Sub(l.globalStart)
	recent := l.globalCount + int(int64(l.globalPrevious)*int64(left)/int64(time.Minute))
	if recent > globalFreeFailures {
		return globalDelay
	}
	return 0
}
