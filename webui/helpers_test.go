package webui

import (
	"context"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/services/configd/configdapi"
	"github.com/flashgate/flashgate/services/configd/configdtest"
	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd"
)

// testClock is a settable clock for session and rate-limit expiry.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// startConfigd runs the real configd API (the web UI's restricted one)
// over a real store in a temporary directory, on a unix socket, and
// returns its client.
func startConfigd(t testing.TB) (*configdapi.Client, *config.Store) {
	t.Helper()
	c, store, _ := startConfigdSocket(t)
	return c, store
}

// startConfigdSocket is startConfigd that also returns the socket's path.
func startConfigdSocket(t testing.TB) (*configdapi.Client, *config.Store, string) {
	t.Helper()
	web, _, store, sock := startConfigdAPIs(t)
	return web, store, sock
}

// startConfigdAPIs runs configd's two APIs over one store, as configd does
// on the box: the restricted one the web UI gets (its client and socket
// are returned first) and the full one the other services get (iked).
func startConfigdAPIs(t testing.TB, webOpts ...configd.ServerOption) (web, full *configdapi.Client, store *config.Store, webSock string) {
	t.Helper()
	cd := configdtest.Start(t, configdtest.Options{Web: true, WebOptions: webOpts, Note: "test"})
	return cd.WebClient, cd.Client, cd.Store, cd.WebSocket
}

const (
	testAdmin    = "admin"
	testPassword = "correct horse battery"
)

// setAdmin sets an admin password through configd and commits it, as the
// console does on first boot.
func setAdmin(t testing.TB, c *configdapi.Client, name, password string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.SetPassword(ctx, "", name, password); err != nil {
		t.Fatalf("set password: %v", err)
	}
	if _, err := c.Commit(ctx, configdapi.CommitRequest{Who: "test", Message: "admin password"}); err != nil {
		t.Fatalf("commit admin: %v", err)
	}
}

// testLinks are the kernel's links of the box the tests stand for, as netd
// reports them (GET /v1/links): the two ports the default configuration
// names, eth1 without a cable.
var testLinks = []netdapi.LinkStatus{
	{Name: "eth0", Role: "wan", Present: true, Port: true, Up: true, Operstate: "up", MTU: 1500, MAC: "00:0d:b9:00:00:01",
		Addresses: []string{"10.0.2.15/24"}, RxBytes: 123456789, TxBytes: 98765432},
	{Name: "eth1", Role: "lan", Present: true, Port: true, Up: true, Operstate: "down", MTU: 1500, MAC: "00:0d:b9:00:00:02",
		Addresses: []string{"192.168.1.1/24"}},
}

// linkTable is a LinkSource holding the links netd would report, or,
// with err, a netd that does not answer.
type linkTable struct {
	links []netdapi.LinkStatus
	err   error
}

func (lt linkTable) Links(context.Context) ([]netdapi.LinkStatus, error) {
	return slices.Clone(lt.links), lt.err
}

// harness is a web UI over a real configd, served over TLS by httptest.
type harness struct {
	t     testing.TB
	cfg   *configdapi.Client
	store *config.Store
	clock *testClock
	srv   *Server
	ts    *httptest.Server
}

type harnessOption func(*Options)

func newHarness(t testing.TB, withAdmin bool, opts ...harnessOption) *harness {
	t.Helper()
	return newHarnessConfigd(t, withAdmin, nil, opts...)
}

// newHarnessConfigd is newHarness with options for configd's restricted
// API (the firmware routes).
func newHarnessConfigd(t testing.TB, withAdmin bool, configdOpts []configd.ServerOption, opts ...harnessOption) *harness {
	t.Helper()
	cfg, _, store, _ := startConfigdAPIs(t, configdOpts...)
	if withAdmin {
		setAdmin(t, cfg, testAdmin, testPassword)
	}
	clock := &testClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	o := Options{Config: cfg, Now: clock.Now, Root: "testdata/root", Links: linkTable{links: testLinks}, Logf: t.Logf,
		Board: BoardInfo{Name: "qemu-i386", Description: "QEMU i386 (pentium2, e1000)", Version: "test"}}
	for _, f := range opts {
		f(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return &harness{t: t, cfg: cfg, store: store, clock: clock, srv: srv, ts: ts}
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so tests see them.
type browser struct {
	h    *harness
	hc   *http.Client
	csrf string
}

func (h *harness) browser() *browser {
	jar, _ := cookiejar.New(nil)
	hc := new(http.Client)
	*hc = *h.ts.Client() // a copy: each browser has its own jar
	hc.Jar = jar
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{h: h, hc: hc}
}

type response struct {
	Code     int
	Body     string
	Header   http.Header
	Location string
}

func (b *browser) do(req *http.Request) response {
	b.h.t.Helper()
	resp, err := b.hc.Do(req)
	if err != nil {
		b.h.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return response{Code: resp.StatusCode, Body: string(body), Header: resp.Header, Location: resp.Header.Get("Location")}
}

func (b *browser) get(path string) response {
	b.h.t.Helper()
	req, _ := http.NewRequest("GET", b.h.ts.URL+path, nil)
	return b.do(req)
}

// post sends a form; the session's CSRF token is added unless the form
// already has a csrf field.
func (b *browser) post(path string, form url.Values) response {
	b.h.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["csrf"]; !ok && b.csrf != "" {
		form.Set("csrf", b.csrf)
	}
	req, _ := http.NewRequest("POST", b.h.ts.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

var (
	csrfMetaRE  = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)
	loginTokRE  = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	errNoLogins = errors.New("no login form")
)

// tryLogin submits the login form and returns the response.
func (b *browser) tryLogin(user, password string) response {
	b.h.t.Helper()
	page := b.get("/login")
	m := loginTokRE.FindStringSubmatch(page.Body)
	if m == nil {
		b.h.t.Fatalf("login page has no form token (%v): %s", errNoLogins, page.Body)
	}
	return b.post("/login", url.Values{"csrf": {m[1]}, "user": {user}, "password": {password}, "next": {"/"}})
}

// login logs in as the test admin and keeps the CSRF token of the session.
func (b *browser) login() {
	b.h.t.Helper()
	r := b.tryLogin(testAdmin, testPassword)
	if r.Code != http.StatusSeeOther || r.Location != "/" {
		b.h.t.Fatalf("login: %d to %q, want 303 to /: %s", r.Code, r.Location, r.Body)
	}
	b.loadCSRF()
}

// loadCSRF reads the session's CSRF token from the dashboard.
func (b *browser) loadCSRF() {
	b.h.t.Helper()
	page := b.get("/")
	m := csrfMetaRE.FindStringSubmatch(page.Body)
	if m == nil {
		b.h.t.Fatalf("dashboard after login (%d) has no CSRF token: %s", page.Code, page.Body)
	}
	b.csrf = m[1]
}

func mustContain(t testing.TB, what, body string, want ...string) {
	t.Helper()
	body = html.UnescapeString(body) // html/template writes + as &#43;
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s does not contain %q", what, w)
		}
	}
}
