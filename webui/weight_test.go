package webui

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// maxPageBytes is the budget of one page with everything it loads: a
// 500 MHz board serving a browser over a slow VPN must stay quick.
const maxPageBytes = 100 * 1000

var assetRE = regexp.MustCompile(`(?:src|href)="(/static/[^"]+)"`)

// weighedPages are the pages a browser loads, by name; every GET page
// route of the router is one of them (TestPageWeight checks).
var weighedPages = []struct{ name, path string }{
	{"login", "/login"},
	{"dashboard", "/"},
	{"tunnels", "/tunnels"},
	{"tunnel_new", "/tunnels/new"},
	{"tunnel_import", "/tunnels/import"},
	{"tunnel", "/tunnels/branch"},
	{"tunnel_edit", "/tunnels/branch/edit"},
	{"firewall", "/firewall"},
	{"rule_new", "/firewall/rules/new"},
	{"rule_edit", "/firewall/rules/branch/edit"},
	{"forward_new", "/firewall/port-forwards/new"},
	{"forward_edit", "/firewall/port-forwards/branch/edit"},
	{"masquerade_new", "/firewall/masquerade/new"},
	{"masquerade_edit", "/firewall/masquerade/branch/edit"},
	{"exemption_new", "/firewall/nat-exemptions/new"},
	{"exemption_edit", "/firewall/nat-exemptions/branch/edit"},
	{"routes", "/routes"},
	{"route_new", "/routes/new"},
	{"route_edit", "/routes/branch/edit"},
	{"interfaces", "/interfaces"},
	{"interface_new", "/interfaces/new"},
	{"interface_edit", "/interfaces/eth0/edit"},
	{"system", "/system"},
	{"certificates", "/certificates"},
	{"logs", "/logs"},
	{"logs_service", "/logs/configd"},
	{"changes", "/changes"},
}

// populate gives every kind an element called branch, committed, and a
// pending change, so pages show their lists and diffs.
func populate(t testing.TB, b *browser) {
	t.Helper()
	for path, form := range map[string]url.Values{
		"/tunnels/new":                 {},
		"/firewall/rules/new":          {"name": {"branch"}, "enabled": {"true"}, "chain": {"forward"}, "action": {"accept"}, "protocol": {"tcp"}, "destination_ports": {"443"}},
		"/firewall/port-forwards/new":  {"name": {"branch"}, "enabled": {"true"}, "in": {"wan"}, "protocol": {"tcp"}, "external_ports": {"8443"}, "destination": {"192.168.1.20"}},
		"/firewall/masquerade/new":     {"name": {"branch"}, "interface": {"eth0"}, "sources": {"192.168.1.0/24"}},
		"/firewall/nat-exemptions/new": {"name": {"branch"}, "destinations": {"172.16.0.0/12"}},
		"/routes/new":                  {"name": {"branch"}, "enabled": {"true"}, "destination": {"10.30.0.0/16"}, "gateway": {"192.168.1.254"}},
	} {
		if path == "/tunnels/new" {
			form = tunnelForm("branch")
		}
		if r := b.post(path, form); r.Code != http.StatusSeeOther {
			t.Fatalf("populate %s: %d %s", path, r.Code, fieldError(r.Body, "name"))
		}
	}
	b.post("/changes/commit", url.Values{"mode": {"plain"}})
	b.post("/tunnels/new", tunnelForm("depot"))
}

// loggedIn returns b, or for the login page (which sends logged-in users
// on) a fresh browser.
func loggedIn(h *harness, b *browser, path string) *browser {
	if path == "/login" {
		return h.browser()
	}
	return b
}

// weigh returns the bytes of a page and of the static files it loads.
func weigh(t testing.TB, b *browser, path string) (page, assets int) {
	t.Helper()
	r := b.get(path)
	if r.Code != http.StatusOK {
		t.Fatalf("GET %s: %d", path, r.Code)
	}
	page = len(r.Body)
	for _, m := range assetRE.FindAllStringSubmatch(r.Body, -1) {
		a := b.get(m[1])
		if a.Code != http.StatusOK {
			t.Errorf("%s loads %s: %d", path, m[1], a.Code)
		}
		assets += len(a.Body)
	}
	return page, assets
}

func TestPageWeight(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()
	populate(t, b)

	listed := map[string]bool{}
	for _, p := range weighedPages {
		listed[p.path] = true
	}
	for _, rc := range allRoutes(t, h.srv.Router()) {
		if rc.Method != "GET" || isAPI(rc.Path) || strings.HasPrefix(rc.Path, "/static/") {
			continue
		}
		if !listed[rc.Path] && !listed[strings.Replace(rc.Path, "/interfaces/branch", "/interfaces/eth0", 1)] {
			t.Errorf("page route %s is not weighed; add it to weighedPages", rc.Template)
		}
	}
	running, _, err := h.cfg.Running(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	account, _ := accountOf(running, testAdmin)
	id, _ := h.srv.sessions.create(testAdmin, account)
	for _, p := range weighedPages {
		page, assets := weigh(t, loggedIn(h, b, p.path), p.path)
		t.Logf("%-16s %6d bytes page + %6d assets = %6d", p.name, page, assets, page+assets)
		// What BenchmarkPage times must be the page itself, not a refusal.
		session := id
		if p.path == "/login" {
			session = ""
		}
		rec := httptest.NewRecorder()
		h.srv.ServeHTTP(rec, benchRequest(h, p.path, session))
		if rec.Code != http.StatusOK {
			t.Errorf("BenchmarkPage's request for %s: %d, want 200", p.path, rec.Code)
		}
		if page+assets > maxPageBytes {
			t.Errorf("%s (%s) weighs %d bytes with its assets, over the %d budget", p.name, p.path, page+assets, maxPageBytes)
		}
	}
}

// benchRequest is the request the benchmarks hand the handler directly
// (no TLS, no network), with the session's cookie unless session is empty.
// It carries the box's own address in Host, as a browser's does: the web
// UI answers any other name with 421 (connlimit.go), which made every
// page of BenchmarkPage fail from 6fe7c0f on, and make bench report none.
func benchRequest(h *harness, path, session string) *http.Request {
	req := httptest.NewRequest("GET", path, nil)
	req.Host = h.ts.Listener.Addr().String()
	if session != "" {
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: session})
	}
	return req
}

// BenchmarkPage measures the server time of each page (no TLS, no
// network: the handler alone) and reports its weight with assets.
func BenchmarkPage(b *testing.B) {
	h := newHarness(b, true)
	br := h.browser()
	br.login()
	populate(b, br)
	running, _, err := h.cfg.Running(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	account, _ := accountOf(running, testAdmin)
	id, _ := h.srv.sessions.create(testAdmin, account)
	for _, p := range weighedPages {
		page, assets := weigh(b, loggedIn(h, br, p.path), p.path)
		b.Run(p.name, func(b *testing.B) {
			session := id
			if p.path == "/login" {
				session = ""
			}
			req := benchRequest(h, p.path, session)
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.srv.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s: %d", p.path, rec.Code)
				}
			}
			b.ReportMetric(float64(page+assets), "bytes/page")
			b.ReportMetric(float64(page), "html_bytes")
		})
	}
}
