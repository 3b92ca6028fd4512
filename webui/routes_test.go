package webui

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/config"
)

func TestRoutesAPI(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()

	// Refused PUTs: the status, and the field each problem is reported on.
	for _, tc := range []struct {
		name, body string
		code       int
		field      string // in "fields"; "" for a whole-route or request problem
		says       string // in the body
	}{
		{"no-way", `{"destination":"10.30.0.0/16"}`, http.StatusUnprocessableEntity, "", "gateway, an interface or both"},
		{"bad-dest", `{"destination":"10.30.0.0/33","gateway":"192.168.1.254"}`, http.StatusUnprocessableEntity, "destination", ""},
		{"bad-gw", `{"destination":"10.30.0.0/16","gateway":"192.168.1.300"}`, http.StatusUnprocessableEntity, "gateway", ""},
		{"mixed", `{"destination":"2001:db8::/32","gateway":"192.168.1.254"}`, http.StatusUnprocessableEntity, "gateway", "address family"},
		{"bad-if", `{"destination":"10.30.0.0/16","interface":"eth9"}`, http.StatusUnprocessableEntity, "interface", "eth9"},
		{"bad-metric", `{"destination":"10.30.0.0/16","gateway":"192.168.1.254","metric":70000}`, http.StatusUnprocessableEntity, "metric", "65535"},
		{"unknown", `{"destination":"10.30.0.0/16","colour":"blue"}`, http.StatusUnprocessableEntity, "colour", ""},
		{"bad.name", `{"destination":"10.30.0.0/16","gateway":"192.168.1.254"}`, http.StatusUnprocessableEntity, "name", ""},
		{"not-json", `destination=10.30.0.0/16`, http.StatusBadRequest, "", "request body"},
	} {
		r, m := b.api("PUT", "/api/v1/routes/"+tc.name, tc.body)
		fields, _ := m["fields"].(map[string]any)
		_, hasField := fields[tc.field]
		switch {
		case r.Code != tc.code:
			t.Errorf("PUT route %s %s: %d %s, want %d", tc.name, tc.body, r.Code, r.Body, tc.code)
		case tc.field != "" && !hasField:
			t.Errorf("PUT route %s %s: %s, want a problem on field %q", tc.name, tc.body, r.Body, tc.field)
		case !strings.Contains(r.Body, tc.says):
			t.Errorf("PUT route %s %s: %s, want it to say %q", tc.name, tc.body, r.Body, tc.says)
		}
	}
	if c, _ := h.store.Candidate(); len(c.Routes) != 0 {
		t.Fatalf("refused PUTs left routes in the candidate: %+v", c.Routes)
	}

	r, _ := b.api("PUT", "/api/v1/routes/office", `{"destination":"10.30.0.0/16","gateway":"192.168.1.254","metric":20}`)
	if r.Code != http.StatusCreated {
		t.Fatalf("PUT of a new route: %d %s, want 201", r.Code, r.Body)
	}
	if r, _ := b.api("PUT", "/api/v1/routes/office", `{"interface":"eth1"}`); r.Code != http.StatusOK {
		t.Fatalf("partial PUT of the route: %d %s, want 200", r.Code, r.Body)
	}
	r, _ = b.api("GET", "/api/v1/routes", "")
	var routes []config.Route
	if err := json.Unmarshal([]byte(r.Body), &routes); r.Code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/v1/routes: %d %s (%v)", r.Code, r.Body, err)
	}
	want := config.Route{Name: "office", Enabled: true, Destination: config.MustPrefix("10.30.0.0/16"),
		Gateway: config.MustAddr("192.168.1.254"), Interface: "eth1", Metric: 20}
	if len(routes) != 1 || routes[0] != want {
		t.Errorf("GET /api/v1/routes = %+v, want [%+v] (a new route is enabled; a partial PUT keeps the other fields)", routes, want)
	}
	if r, m := b.api("POST", "/api/v1/commit", `{"message":"route"}`); r.Code != http.StatusOK {
		t.Fatalf("commit: %d %v", r.Code, m)
	}
	if run, _ := h.store.Running(); len(run.Routes) != 1 || run.Routes[0] != want {
		t.Errorf("running routes after commit: %+v, want [%+v]", run.Routes, want)
	}

	if r, _ := b.api("DELETE", "/api/v1/routes/office", ""); r.Code != http.StatusOK {
		t.Errorf("DELETE route: %d %s", r.Code, r.Body)
	}
	if r, m := b.api("DELETE", "/api/v1/routes/office", ""); r.Code != http.StatusNotFound || m["error"] == nil {
		t.Errorf("second DELETE of the route: %d %v, want 404 with an error", r.Code, m)
	}
	if r, _ := b.api("GET", "/api/v1/routes", ""); strings.TrimSpace(r.Body) != "[]" {
		t.Errorf("routes after the delete: %s, want []", r.Body)
	}
}

func TestRoutesPage(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()

	r := b.get("/routes")
	mustContain(t, "the empty routes page", r.Body, "No static routes", `href="/routes/new"`)
	if !strings.Contains(b.get("/").Body, `href="/routes"`) {
		t.Errorf("the navigation does not link the routes page")
	}

	// A form with a problem comes back with it next to the field, and
	// nothing saved.
	r = b.post("/routes/new", url.Values{"name": {"office"}, "enabled": {"on"}, "destination": {"10.30.0.0/16"}, "gateway": {"10.99.0.1"}, "metric": {"-1"}})
	if r.Code != http.StatusUnprocessableEntity || fieldError(r.Body, "metric") == "" {
		t.Fatalf("route form with metric -1: %d, metric error %q; want 422 with the error next to the field", r.Code, fieldError(r.Body, "metric"))
	}
	if c, _ := h.store.Candidate(); len(c.Routes) != 0 {
		t.Fatalf("a refused form saved routes: %+v", c.Routes)
	}

	r = b.post("/routes/new", url.Values{"name": {"office"}, "enabled": {"on"}, "destination": {"10.30.0.0/16"}, "gateway": {"192.168.1.254"}})
	if r.Code != http.StatusSeeOther || r.Location != "/routes" {
		t.Fatalf("new route form: %d to %q, want 303 to /routes", r.Code, r.Location)
	}
	mustContain(t, "the routes page with a route", b.get("/routes").Body,
		"saved to the pending changes", `href="/routes/office/edit"`, "10.30.0.0/16", "192.168.1.254", `action="/routes/office/delete"`)
	mustContain(t, "the route's edit form", b.get("/routes/office/edit").Body, `value="10.30.0.0/16"`, `value="192.168.1.254"`)

	r = b.post("/routes/office/edit", url.Values{"destination": {"10.30.0.0/16"}, "interface": {"eth1"}})
	if r.Code != http.StatusSeeOther {
		t.Fatalf("edit route form: %d %s", r.Code, r.Body)
	}
	c, _ := h.store.Candidate()
	if len(c.Routes) != 1 || c.Routes[0].Enabled || c.Routes[0].Gateway.IsSet() || c.Routes[0].Interface != "eth1" {
		t.Errorf("route after the edit form (unchecked enabled, empty gateway, interface eth1): %+v", c.Routes)
	}
	mustContain(t, "the routes page with a disabled route", b.get("/routes").Body, "disabled", "eth1")

	if r := b.post("/routes/office/delete", nil); r.Code != http.StatusSeeOther {
		t.Fatalf("delete route: %d", r.Code)
	}
	if c, _ := h.store.Candidate(); len(c.Routes) != 0 {
		t.Errorf("routes after the delete button: %+v", c.Routes)
	}
}

// The walk of every route for sessions and CSRF tokens covers the routes
// pages and API (it walks the router, so this guards the walk itself).
func TestRouteWalkCoversStaticRoutes(t *testing.T) {
	h := newHarness(t, true)
	seen := map[string]bool{}
	for _, rc := range allRoutes(t, h.srv.Router()) {
		seen[rc.Method+" "+rc.Template] = true
	}
	for _, want := range []string{
		"GET /routes", "GET /routes/new", "POST /routes/new", "GET /routes/{name}/edit", "POST /routes/{name}/edit", "POST /routes/{name}/delete",
		"GET /api/v1/routes", "PUT /api/v1/routes/{name}", "DELETE /api/v1/routes/{name}",
	} {
		if !seen[want] {
			t.Errorf("the route walk of the auth and CSRF tests misses %s", want)
		}
	}
}
