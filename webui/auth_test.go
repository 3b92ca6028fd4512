package webui

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"
)

// routeCase is one method on one route of the router, with its path
// variables filled in.
type routeCase struct {
	Method, Template, Path string
}

var pathVarRE = regexp.MustCompile(`\{([a-z]+)(:[^}]*)?\}`)

// allRoutes walks the router: every route and method it serves.
func allRoutes(t *testing.T, r *mux.Router) []routeCase {
	t.Helper()
	var out []routeCase
	err := r.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tmpl, err := route.GetPathTemplate()
		if err != nil {
			return nil // a matcher without a path
		}
		methods, err := route.GetMethods()
		if err != nil || route.GetHandler() == nil {
			return nil // a subrouter's prefix, not an endpoint
		}
		path := pathVarRE.ReplaceAllStringFunc(tmpl, func(v string) string {
			switch pathVarRE.FindStringSubmatch(v)[1] {
			case "rev":
				return "1"
			case "service":
				return "configd"
			}
			return "branch"
		})
		if tmpl == "/static/" {
			path = "/static/style.css"
		}
		for _, m := range methods {
			out = append(out, routeCase{m, tmpl, path})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 60 {
		t.Fatalf("walked only %d route methods; the walk is broken", len(out))
	}
	return out
}

// publicRoutes are the only routes served without a session.
var publicRoutes = map[string]bool{
	"GET /static/": true, "HEAD /static/": true,
	"GET /login": true, "POST /login": true, "POST /api/v1/login": true,
}

func isAPI(path string) bool {
	return strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/live/")
}

func TestEveryRouteRefusesWithoutSession(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser() // never logged in
	for _, rc := range allRoutes(t, h.srv.Router()) {
		key := rc.Method + " " + rc.Template
		if publicRoutes[key] {
			continue
		}
		req, _ := http.NewRequest(rc.Method, h.ts.URL+rc.Path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		r := b.do(req)
		if isAPI(rc.Path) {
			if r.Code != http.StatusUnauthorized {
				t.Errorf("%s %s without a session: %d, want 401", rc.Method, rc.Path, r.Code)
			}
			continue
		}
		if r.Code != http.StatusSeeOther || !strings.HasPrefix(r.Location, "/login?next=") {
			t.Errorf("%s %s without a session: %d to %q, want 303 to /login", rc.Method, rc.Path, r.Code, r.Location)
		}
	}
	// A forged or expired cookie is no session either.
	u, _ := url.Parse(h.ts.URL)
	b.hc.Jar.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: randomToken()}})
	if r := b.get("/tunnels"); r.Code != http.StatusSeeOther {
		t.Errorf("GET /tunnels with a made-up session cookie: %d, want 303 to login", r.Code)
	}
	if r := b.get("/api/v1/tunnels"); r.Code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/tunnels with a made-up session cookie: %d, want 401", r.Code)
	}
}

func TestStateChangingRoutesRefuseBadCSRF(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()
	before, _ := h.store.Candidate()
	checked := 0
	for _, rc := range allRoutes(t, h.srv.Router()) {
		if rc.Method == "GET" || rc.Method == "HEAD" || publicRoutes[rc.Method+" "+rc.Template] {
			continue
		}
		for _, token := range []string{"", "wrong-" + randomToken(), b.csrf[:len(b.csrf)-1]} {
			form := url.Values{"csrf": {token}, "confirm": {"factory-reset"}, "name": {"x"}}
			req, _ := http.NewRequest(rc.Method, h.ts.URL+rc.Path, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if isAPI(rc.Path) && token != "" {
				req.Header.Set(csrfHeader, token)
			}
			if r := b.do(req); r.Code != http.StatusForbidden {
				t.Errorf("%s %s with CSRF token %.8q: %d, want 403", rc.Method, rc.Path, token, r.Code)
			}
		}
		checked++
	}
	if checked < 25 {
		t.Errorf("checked only %d state-changing routes", checked)
	}
	after, _ := h.store.Candidate()
	if d := after.Text(); d != before.Text() {
		t.Errorf("requests refused for CSRF changed the candidate:\n%s", d)
	}
	if r := b.get("/"); r.Code != http.StatusOK {
		t.Errorf("session gone after refused requests (factory reset or logout went through?): %d", r.Code)
	}
	// The right token passes (a harmless route: discard).
	if r := b.post("/changes/discard", nil); r.Code != http.StatusSeeOther {
		t.Errorf("POST /changes/discard with the right token: %d, want 303", r.Code)
	}
}

func TestLoginWithoutAdmin(t *testing.T) {
	h := newHarness(t, false)
	b := h.browser()
	page := b.get("/login")
	mustContain(t, "login page without admin", page.Body, "No admin password is set.", "serial console")
	if strings.Contains(page.Body, `type="password"`) {
		t.Error("login page offers a password field although no admin exists")
	}
	r := b.tryLoginNoForm("admin", "anything-at-all")
	if r.Code != http.StatusForbidden {
		t.Errorf("login without any admin: %d, want 403", r.Code)
	}
	api := b.apiLogin("admin", "anything-at-all")
	if api.Code != http.StatusForbidden || !strings.Contains(api.Body, "serial console") {
		t.Errorf("API login without any admin: %d %s, want 403 saying to use the console", api.Code, api.Body)
	}
}

// tryLoginNoForm posts a login with a fresh login token from the cookie
// jar, for pages that show no form.
func (b *browser) tryLoginNoForm(user, password string) response {
	tok := randomToken()
	u, _ := url.Parse(b.h.ts.URL)
	b.hc.Jar.SetCookies(u, []*http.Cookie{{Name: loginCookie, Value: tok, Path: "/", Secure: true}})
	return b.post("/login", url.Values{"csrf": {tok}, "user": {user}, "password": {password}})
}

func (b *browser) apiLogin(user, password string) response {
	req, _ := http.NewRequest("POST", b.h.ts.URL+"/api/v1/login",
		strings.NewReader(`{"user":"`+user+`","password":"`+password+`"}`))
	req.Header.Set("Content-Type", "application/json")
	return b.do(req)
}

func TestLoginLogout(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()

	wrongPass := b.tryLogin(testAdmin, "not the password")
	wrongUser := b.tryLogin("mallory", testPassword)
	for _, r := range []response{wrongPass, wrongUser} {
		if r.Code != http.StatusUnauthorized {
			t.Errorf("wrong login: %d, want 401", r.Code)
		}
		mustContain(t, "wrong login page", r.Body, wrongLogin)
	}
	strip := regexp.MustCompile(`value="[^"]*"`)
	if strip.ReplaceAllString(wrongPass.Body, "") != strip.ReplaceAllString(wrongUser.Body, "") {
		t.Error("a wrong password and an unknown user give different pages: the page tells which part was wrong")
	}
	if r := b.tryLoginNoFormToken(testAdmin, testPassword); r.Code != http.StatusForbidden {
		t.Errorf("login without the login form token: %d, want 403", r.Code)
	}

	r := b.tryLogin(testAdmin, testPassword)
	if r.Code != http.StatusSeeOther || r.Location != "/" {
		t.Fatalf("login: %d to %q, want 303 to /", r.Code, r.Location)
	}
	var sc *http.Cookie
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == sessionCookie {
			sc = c
		}
	}
	if sc == nil || !sc.HttpOnly || !sc.Secure || sc.SameSite != http.SameSiteStrictMode || sc.Path != "/" || len(sc.Value) < 43 {
		t.Fatalf("session cookie %+v, want HttpOnly, Secure, SameSite=Strict, Path=/ and a 256-bit value", sc)
	}
	if r := b.get("/"); r.Code != http.StatusOK {
		t.Fatalf("dashboard after login: %d", r.Code)
	}
	b.loadCSRF()
	if r := b.post("/logout", nil); r.Code != http.StatusSeeOther || r.Location != "/login" {
		t.Errorf("logout: %d to %q", r.Code, r.Location)
	}
	if r := b.get("/"); r.Code != http.StatusSeeOther {
		t.Errorf("dashboard after logout: %d, want a redirect to login", r.Code)
	}
	if n := h.srv.sessions.count(); n != 0 {
		t.Errorf("%d sessions left after logout, want 0", n)
	}

	// The login page only sends people back to local paths.
	for _, next := range []string{"https://evil.example/", "//evil.example/", `/\evil.example`} {
		b2 := h.browser()
		page := b2.get("/login?next=" + url.QueryEscape(next))
		m := loginTokRE.FindStringSubmatch(page.Body)
		r := b2.post("/login", url.Values{"csrf": {m[1]}, "user": {testAdmin}, "password": {testPassword}, "next": {next}})
		if r.Location != "/" {
			t.Errorf("login with next=%q redirected to %q, want /", next, r.Location)
		}
	}
}

func (b *browser) tryLoginNoFormToken(user, password string) response {
	return b.post("/login", url.Values{"csrf": {""}, "user": {user}, "password": {password}})
}

func TestSessionExpiry(t *testing.T) {
	h := newHarness(t, true, func(o *Options) { o.IdleTimeout = 10 * time.Minute; o.AbsoluteTimeout = time.Hour })
	b := h.browser()
	b.login()
	h.clock.Advance(9 * time.Minute)
	if r := b.get("/tunnels"); r.Code != http.StatusOK {
		t.Fatalf("after 9 idle minutes: %d, want the page", r.Code)
	}
	h.clock.Advance(11 * time.Minute)
	if r := b.get("/tunnels"); r.Code != http.StatusSeeOther {
		t.Errorf("after 11 idle minutes: %d, want a redirect to login", r.Code)
	}

	// The live refresh of an open page is not activity.
	b.login()
	for i := 0; i < 2; i++ {
		h.clock.Advance(4 * time.Minute)
		if r := b.get("/live/dashboard"); r.Code != http.StatusOK {
			t.Fatalf("live refresh after %d minutes: %d", 4*(i+1), r.Code)
		}
	}
	h.clock.Advance(4 * time.Minute)
	if r := b.get("/live/dashboard"); r.Code != http.StatusUnauthorized {
		t.Errorf("live refresh of a session idle for 12 minutes: %d, want 401", r.Code)
	}

	b.login()
	for i := 0; i < 6; i++ { // active all along, never idle
		h.clock.Advance(9 * time.Minute)
		if r := b.get("/api/v1/session"); r.Code != http.StatusOK {
			t.Fatalf("active session refused after %d minutes: %d", 9*(i+1), r.Code)
		}
	}
	h.clock.Advance(9 * time.Minute) // 63 minutes since login
	if r := b.get("/api/v1/session"); r.Code != http.StatusUnauthorized {
		t.Errorf("session older than the absolute limit: %d, want 401", r.Code)
	}
}

func TestLoginRateLimit(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	for i := 1; i < freeFailures; i++ {
		if r := b.tryLogin(testAdmin, "guess"); r.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i, r.Code)
		}
	}
	r := b.tryLogin(testAdmin, "guess")
	if r.Code != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("failure %d: %d, want 429 with Retry-After", freeFailures, r.Code)
	}
	// Locked out: even the right password is not checked.
	if r := b.tryLogin(testAdmin, testPassword); r.Code != http.StatusTooManyRequests {
		t.Errorf("right password during lockout: %d, want 429", r.Code)
	}
	if r := b.apiLogin(testAdmin, testPassword); r.Code != http.StatusTooManyRequests {
		t.Errorf("API login during lockout: %d, want 429", r.Code)
	}
	h.clock.Advance(baseLockout + time.Second)
	if r := b.tryLogin(testAdmin, "guess again"); r.Code != http.StatusTooManyRequests {
		t.Errorf("a failure after the first lockout: %d, want 429 (a longer lockout)", r.Code)
	}
	h.clock.Advance(baseLockout + time.Second) // not enough: the lockout doubled
	if r := b.tryLogin(testAdmin, testPassword); r.Code != http.StatusTooManyRequests {
		t.Errorf("right password before the doubled lockout ended: %d, want 429", r.Code)
	}
	h.clock.Advance(baseLockout)
	if r := b.tryLogin(testAdmin, testPassword); r.Code != http.StatusSeeOther {
		t.Errorf("right password after the lockout: %d, want 303", r.Code)
	}
}

func TestLimiterBackoff(t *testing.T) {
	clock := &testClock{t: time.Unix(1e9, 0)}
	l := newLoginLimiter(clock.Now)
	var got []time.Duration
	for i := 0; i < 8; i++ {
		got = append(got, l.failure("192.0.2.1"))
	}
	want := []time.Duration{0, 0, 0, 0, 30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("failure %d: lockout %v, want %v (all: %v)", i+1, got[i], want[i], got)
		}
	}
	if ok, _ := l.allow("192.0.2.2"); !ok {
		t.Error("another address is locked out too")
	}
	for i := 0; i < 20; i++ {
		if d := l.failure("192.0.2.1"); d > maxLockout {
			t.Fatalf("lockout %v exceeds the cap %v", d, maxLockout)
		}
	}
	l.success("192.0.2.1")
	if ok, _ := l.allow("192.0.2.1"); !ok {
		t.Error("still locked after a success")
	}
}
