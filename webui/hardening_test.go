package webui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/config"
)

// consoleSetPassword changes an admin's password through configd and
// commits it, as the console's passwd and recover do: the web UI is not
// told.
func consoleSetPassword(t *testing.T, h *harness, user, password string) config.RevisionInfo {
	t.Helper()
	ctx := context.Background()
	if _, err := h.cfg.SetPassword(ctx, "", user, password); err != nil {
		t.Fatalf("set password: %v", err)
	}
	info, err := h.cfg.Commit(ctx, configdapi.CommitRequest{Who: "console", Message: "password of " + user})
	if err != nil {
		t.Fatalf("commit password: %v", err)
	}
	return info
}

func (b *browser) loggedIn() bool {
	b.h.t.Helper()
	switch r := b.get("/api/v1/session"); r.Code {
	case http.StatusOK:
		return true
	case http.StatusUnauthorized:
		return false
	default:
		b.h.t.Fatalf("GET /api/v1/session: %d %s", r.Code, r.Body)
		return false
	}
}

// loginAs logs a new browser in with the password given.
func (h *harness) loginAs(password string) *browser {
	h.t.Helper()
	b := h.browser()
	if r := b.tryLogin(testAdmin, password); r.Code != http.StatusSeeOther {
		h.t.Fatalf("login: %d %s", r.Code, r.Body)
	}
	b.loadCSRF()
	return b
}

// A session is bound to the password it logged in with: a change made
// anywhere (console passwd or recover, rollback, factory reset) ends it.
func TestSessionsEndWhenTheAccountChanges(t *testing.T) {
	h := newHarness(t, true)
	ctx := context.Background()
	const second = "second password 2"

	// The console changes the password: both web sessions end.
	a, b := h.loginAs(testPassword), h.loginAs(testPassword)
	consoleSetPassword(t, h, testAdmin, second)
	if a.loggedIn() || b.loggedIn() {
		t.Error("a web session outlived a password change made at the console")
	}

	// A rollback to the old password ends the sessions of the new one.
	c := h.loginAs(second)
	hist, err := h.cfg.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var before uint64 // the revision with the first password
	for _, r := range hist {
		if r.Message == "admin password" {
			before = r.Revision
		}
	}
	if before == 0 {
		t.Fatalf("no revision with the first password in %+v", hist)
	}
	if _, err := h.cfg.Rollback(ctx, before, "test"); err != nil {
		t.Fatal(err)
	}
	if c.loggedIn() {
		t.Error("a web session outlived a rollback that changed its password")
	}

	// A factory reset ends every session, and an old session can no
	// longer change anything.
	d := h.loginAs(testPassword)
	if _, err := h.cfg.WithPassword(testAdmin, testPassword).FactoryReset(ctx, "console"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", h.ts.URL+"/api/v1/commit", nil)
	req.Header.Set(csrfHeader, d.csrf)
	if r := d.do(req); r.Code != http.StatusUnauthorized {
		t.Errorf("commit with a session from before the factory reset: %d, want 401", r.Code)
	}
	if n := h.srv.sessions.count(); n != 0 {
		t.Errorf("%d sessions left after the factory reset", n)
	}
}

// Changing one's own password in the web UI keeps that session and ends
// the account's others.
func TestOwnPasswordChangeKeepsTheSession(t *testing.T) {
	h := newHarness(t, true)
	me, other := h.loginAs(testPassword), h.loginAs(testPassword)
	if r, _ := me.api("POST", "/api/v1/system/password", `{"current":"`+testPassword+`","new":"a new password 3"}`); r.Code != http.StatusOK {
		t.Fatalf("password change: %d %s", r.Code, r.Body)
	}
	if !me.loggedIn() {
		t.Error("the session that changed its own password was ended")
	}
	if other.loggedIn() {
		t.Error("another session of the account outlived the password change")
	}
}

// A session that makes no request between a password change and a
// rollback to the old password must not come back: the web UI follows
// configd's changes and ends it at the change.
func TestSessionEndedByChangeItDidNotSee(t *testing.T) {
	h := newHarness(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.srv.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	waitSessions := func(want int) bool {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if h.srv.sessions.count() == want {
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	}
	h.loginAs(testPassword) // never used again
	consoleSetPassword(t, h, testAdmin, "second password 2")
	if !waitSessions(0) {
		t.Fatal("a session that made no request outlived a password change for 5 s")
	}

	stolen := h.loginAs("second password 2")
	back := consoleSetPassword(t, h, testAdmin, "third password 3").Revision - 1
	if _, err := h.cfg.Rollback(ctx, back, "test"); err != nil {
		t.Fatal(err)
	}
	if !waitSessions(0) {
		t.Fatal("a session survived a password change undone by a rollback before its next request")
	}
	if stolen.loggedIn() {
		t.Error("the session is back after the rollback restored its password")
	}
}

// safeNext accepts only a local path that every URL parser reads as one:
// browsers drop TAB, CR and LF and read a backslash as a slash, so
// "/\t/evil.example" is another host to them.
func TestSafeNextRefusesWhatBrowsersReadAsAnotherHost(t *testing.T) {
	for _, p := range []string{
		"/\t/evil.example/x", "/\n/evil.example", "/\r/evil.example", "/ /evil.example", "\t//evil.example",
		"//evil.example", "///evil.example", `/\evil.example`, `/x\..\\evil`, "/\x00", "/\x7f/evil",
		"https://evil.example/", "evil.example", "", "/login", "/login?next=//evil", "/api/v1/commit",
		"/live/dashboard", "/caf\xc3\xa9",
	} {
		if safeNext(p) {
			t.Errorf("safeNext(%q) = true, want false", p)
		}
	}
	for _, p := range []string{"/", "/tunnels", "/tunnels/site%20b", "/logs/netd", "/firewall?x=1", "/%09/x"} {
		if !safeNext(p) {
			t.Errorf("safeNext(%q) = false, want true", p)
		}
	}

	// And the whole way: a login with such a next goes to /.
	h := newHarness(t, true)
	b := h.browser()
	page := b.get("/login?next=" + url.QueryEscape("/\t/evil.example/x"))
	m := loginTokRE.FindStringSubmatch(page.Body)
	if m == nil {
		t.Fatalf("no login form: %s", page.Body)
	}
	r := b.post("/login", url.Values{"csrf": {m[1]}, "user": {testAdmin}, "password": {testPassword}, "next": {"/\t/evil.example/x"}})
	if r.Location != "/" {
		t.Errorf("login with a TAB in next redirected to %q, want /", r.Location)
	}
}

// Every address of one IPv6 /64 is one client: a host picks as many
// addresses in its /64 as it likes (link-local ones cost nothing).
func TestLimiterKeysIPv6ByPrefix(t *testing.T) {
	clock := &testClock{t: time.Unix(1e9, 0)}
	l := newLoginLimiter(clock.Now)
	for i := 1; i <= freeFailures; i++ {
		l.failure(fmt.Sprintf("fe80::%x", i))
	}
	for _, a := range []string{"fe80::1234:5678", "fe80::99%eth0", "fe80::ffff:ffff:ffff:ffff"} {
		if ok, _ := l.allow(a); ok {
			t.Errorf("%s may guess after %d failures from other addresses of its /64", a, freeFailures)
		}
	}
	if ok, _ := l.allow("fe80:0:0:1::1"); !ok {
		t.Error("another /64 is locked out too")
	}
	for i := 1; i <= freeFailures; i++ {
		l.failure("::ffff:192.0.2.7")
	}
	if ok, _ := l.allow("192.0.2.7"); ok {
		t.Error("an IPv4-mapped address and its IPv4 address are counted apart")
	}
}

// A flood of new addresses must not wipe a lockout: the limiter used to
// clear() every record at 4096.
func TestLimiterNeverEvictsLockedClients(t *testing.T) {
	clock := &testClock{t: time.Unix(1e9, 0)}
	l := newLoginLimiter(clock.Now)
	for i := 0; i < freeFailures; i++ {
		l.failure("192.0.2.1")
	}
	for i := 0; i < 2*maxClients; i++ {
		l.failure(fmt.Sprintf("10.%d.%d.1", i>>8, i&0xff))
	}
	if ok, _ := l.allow("192.0.2.1"); ok {
		t.Error("the victim's lockout was wiped by failures from new addresses")
	}
	if n := len(l.clients); n > maxClients {
		t.Errorf("%d records, over the bound of %d", n, maxClients)
	}
}

// Failures from many clients at once slow every password check, and only
// slow: when the minute is quiet again, checks are immediate.
func TestLimiterGlobalBudgetSlowsEveryone(t *testing.T) {
	clock := &testClock{t: time.Unix(1e9, 0)}
	l := newLoginLimiter(clock.Now)
	for i := 0; i < globalFreeFailures; i++ {
		l.failure(fmt.Sprintf("198.51.100.%d", i))
	}
	if d := l.slowdown(); d != 0 {
		t.Errorf("slowed by %v within the budget", d)
	}
	l.failure("198.51.100.200")
	if d := l.slowdown(); d != globalDelay {
		t.Errorf("slowdown %v past the budget, want %v", d, globalDelay)
	}
	if ok, _ := l.allow("203.0.113.9"); !ok {
		t.Error("the global budget locked out a client that never failed")
	}
	clock.Advance(2*time.Minute + time.Second)
	if d := l.slowdown(); d != 0 {
		t.Errorf("still slowed by %v after a quiet minute", d)
	}
}

// Web logins are logged with the user and the address; a user name that
// names no account is not (it may be a password typed in the wrong
// field), and no password ever is.
func TestLoginEventsAreLogged(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	logf := func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	h := newHarness(t, true, func(o *Options) { o.Logf = logf })
	b := h.browser()
	b.tryLogin(testAdmin, "wrong guess 1")
	b.tryLogin("Tr0ub4dor&3", "wrong guess 2")
	b.tryLogin(testAdmin, testPassword)
	mu.Lock()
	all := strings.Join(lines, "\n")
	mu.Unlock()
	for _, want := range []string{
		`login of "admin" from 127.0.0.1 failed: wrong password`,
		`login of an unknown user from 127.0.0.1 failed`,
		`login of "admin" from 127.0.0.1` + "\n",
	} {
		if !strings.Contains(all+"\n", want) {
			t.Errorf("log lacks %q:\n%s", want, all)
		}
	}
	for _, secret := range []string{"Tr0ub4dor&3", "wrong guess", testPassword} {
		if strings.Contains(all, secret) {
			t.Errorf("log contains %q:\n%s", secret, all)
		}
	}
	b = h.browser()
	for i := 0; i < freeFailures; i++ {
		b.tryLogin(testAdmin, "wrong guess")
	}
	mu.Lock()
	all = strings.Join(lines, "\n")
	mu.Unlock()
	if !strings.Contains(all, "locked out for 30s") {
		t.Errorf("the lockout is not logged:\n%s", all)
	}
}

// The current password of a password change is checked like a login:
// under the rate limit, so a stolen session cannot guess it at full speed.
func TestPasswordChangeIsRateLimited(t *testing.T) {
	h := newHarness(t, true)
	b := h.loginAs(testPassword)
	change := func(current string) response {
		r, _ := b.api("POST", "/api/v1/system/password", `{"current":"`+current+`","new":"another password 9"}`)
		return r
	}
	for i := 1; i < freeFailures; i++ {
		if r := change("guess " + fmt.Sprint(i)); r.Code != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "not your current password") {
			t.Fatalf("wrong current password %d: %d %s", i, r.Code, r.Body)
		}
	}
	change("guess 5")
	if r := change(testPassword); !strings.Contains(r.Body, "Too many wrong passwords") {
		t.Errorf("the right current password after %d wrong ones: %d %s, want the lockout", freeFailures, r.Code, r.Body)
	}
	// One maximum length: a new password the console could not take is
	// refused here too.
	h.clock.Advance(baseLockout + time.Second)
	r, _ := b.api("POST", "/api/v1/system/password", `{"current":"`+testPassword+`","new":"`+strings.Repeat("p", config.MaxPasswordLen+1)+`"}`)
	if r.Code != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "At most") {
		t.Errorf("a new password of %d bytes: %d %s, want it refused", config.MaxPasswordLen+1, r.Code, r.Body)
	}
}
