package webui

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	"github.com/flashgate/flashgate/config"
)

// Sessions live in memory only: a restart of the web UI logs everyone out,
// which is what an admin expects after a reboot, and nothing about a
// session ever touches the card.
const (
	sessionCookie = "__Host-fg_session" // __Host-: Secure, Path=/, no Domain, enforced by the browser
	loginCookie   = "__Host-fg_login"   // login CSRF token, before a session exists
	csrfHeader    = "X-CSRF-Token"
	csrfField     = "csrf"

	DefaultIdleTimeout     = 15 * time.Minute
	DefaultAbsoluteTimeout = 8 * time.Hour
	maxSessions            = 64 // a few admins; bounds memory against a flood of logins
)

// session is one logged-in admin.
type session struct {
	User string
	// Account is accountKey of the user's password hash at login: a
	// session lives only while the running configuration still has that
	// hash for that user, so a password change, a console recovery, a
	// factory reset, a rollback or a restore that changes the account ends
	// it (checked on every request and at every configd change).
	Account  [32]byte
	CSRF     string
	Created  time.Time
	LastSeen time.Time
	Flash    flash
}

// sessionStore keeps sessions keyed by the SHA-256 of their ID, so that a
// map lookup (not constant-time) leaks nothing about a valid ID, and a
// memory dump does not hand out live cookies.
type sessionStore struct {
	mu       sync.Mutex
	byHash   map[[32]byte]*session
	idle     time.Duration
	absolute time.Duration
	now      func() time.Time
}

func newSessionStore(idle, absolute time.Duration, now func() time.Time) *sessionStore {
	return &sessionStore{byHash: map[[32]byte]*session{}, idle: idle, absolute: absolute, now: now}
}

// randomToken returns 256 random bits, URL-safe base64.
func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("webui: no randomness: " + err.Error()) // crypto/rand does not fail on Linux ≥ 3.17
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func hashID(id string) [32]byte { return sha256.Sum256([]byte(id)) }

// accountKey names one state of an account: the user and the password
// hash it logged in with. It is a digest so that sessions do not hold
// copies of the hash.
func accountKey(user string, hash config.Secret) [32]byte {
	h := sha256.New()
	h.Write([]byte("flashgate webui session account\x00"))
	h.Write([]byte(user))
	h.Write([]byte{0})
	h.Write([]byte(hash.Reveal()))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// accountOf returns the accountKey of user in the running configuration,
// and false when the user is not an admin there.
func accountOf(running *config.Config, user string) ([32]byte, bool) {
	if running == nil {
		return [32]byte{}, false
	}
	return accountIn(&running.System, user)
}

// accountIn is accountOf from the running configuration's system section
// alone (configd's GET /v1/running/system).
func accountIn(sys *config.System, user string) ([32]byte, bool) {
	if sys == nil {
		return [32]byte{}, false
	}
	for _, a := range sys.Admins {
		if a.Name == user {
			return accountKey(user, a.PasswordHash), true
		}
	}
	return [32]byte{}, false
}

// create starts a session for user, logged in with the password whose
// hash gives account, and returns its ID.
func (s *sessionStore) create(user string, account [32]byte) (string, *session) {
	id := randomToken()
	now := s.now()
	sess := &session{User: user, Account: account, CSRF: randomToken(), Created: now, LastSeen: now}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	if len(s.byHash) >= maxSessions {
		// Drop the least recently used: an attacker who can log in
		// repeatedly already has the password.
		var oldest [32]byte
		var t time.Time
		for h, x := range s.byHash {
			if t.IsZero() || x.LastSeen.Before(t) {
				oldest, t = h, x.LastSeen
			}
		}
		delete(s.byHash, oldest)
	}
	s.byHash[hashID(id)] = sess
	return id, sess
}

// lookup returns the live session for id and refreshes its idle timer.
func (s *sessionStore) lookup(id string) (*session, bool) { return s.find(id, true) }

// peek is lookup for requests a page makes by itself (the live refresh):
// they do not count as the admin being active, so an open dashboard does
// not keep a session alive past its idle limit.
func (s *sessionStore) peek(id string) (*session, bool) { return s.find(id, false) }

func (s *sessionStore) find(id string, touch bool) (*session, bool) {
	if id == "" {
		return nil, false
	}
	h := hashID(id)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byHash[h]
	if !ok {
		return nil, false
	}
	if s.expired(sess, now) {
		delete(s.byHash, h)
		return nil, false
	}
	if touch {
		sess.LastSeen = now
	}
	cp := *sess
	return &cp, true
}

func (s *sessionStore) expired(x *session, now time.Time) bool {
	return now.Sub(x.LastSeen) > s.idle || now.Sub(x.Created) > s.absolute
}

func (s *sessionStore) expireLocked(now time.Time) {
	for h, x := range s.byHash {
		if s.expired(x, now) {
			delete(s.byHash, h)
		}
	}
}

func (s *sessionStore) delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byHash, hashID(id))
}

// rebind moves the session id to account (its own password change).
func (s *sessionStore) rebind(id string, account [32]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if x, ok := s.byHash[hashID(id)]; ok {
		x.Account = account
	}
}

// endStale ends every session whose account is no longer what running
// has (nil running: configd answered that there is no configuration, so
// every session ends), and returns how many ended.
func (s *sessionStore) endStale(running *config.Config) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for h, x := range s.byHash {
		if k, ok := accountOf(running, x.User); !ok || subtle.ConstantTimeCompare(k[:], x.Account[:]) != 1 {
			delete(s.byHash, h)
			n++
		}
	}
	return n
}

// deleteUser ends every session of user (after a password change).
func (s *sessionStore) deleteUser(user string, keep string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := hashID(keep)
	for h, x := range s.byHash {
		if x.User == user && h != k {
			delete(s.byHash, h)
		}
	}
}

// active reports whether any session is live (and ends the expired).
func (s *sessionStore) active() bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked(now)
	return len(s.byHash) > 0
}

func (s *sessionStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byHash)
}

// tokensEqual compares secrets in constant time.
func tokensEqual(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode,
	})
}

// flash is a one-shot message for the next page the session sees (the
// result of a POST, shown after its redirect).
type flash struct {
	Text  string
	Error bool
}

func (s *sessionStore) setFlash(id string, f flash) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if x, ok := s.byHash[hashID(id)]; ok {
		x.Flash = f
	}
}

func (s *sessionStore) takeFlash(id string) flash {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.byHash[hashID(id)]
	if !ok {
		return flash{}
	}
	f := x.Flash
	x.Flash = flash{}
	return f
}
