package webui

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd"
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
	info, err := h.cfg.Commit(ctx, configd.CommitRequest{Who: "console", Message: "password of " + user})
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
	if _, err := h.cfg.FactoryReset(ctx, "console"); err != nil {
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
