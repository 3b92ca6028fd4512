package webui

import (
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/netd/netdapi"
)

// addPortForm is the Add port form for a third NIC as an admin fills it in.
func addPortForm(name string) url.Values {
	return url.Values{"name": {name}, "description": {"DMZ"}, "enabled": {"on"}, "role": {"opt"},
		"addressing": {"static"}, "addresses": {"10.50.0.1/24"}, "mtu": {"1500"},
		"dhcp_server.enabled": {"on"}, "dhcp_server.range_start": {"10.50.0.100"}, "dhcp_server.range_end": {"10.50.0.150"}}
}

func TestInterfacesAddAndDeletePort(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()

	mustContain(t, "the interfaces page", b.get("/interfaces").Body,
		`href="/interfaces/new"`, "Add port", `action="/interfaces/eth1/delete"`, "data-confirm=")
	r := b.get("/interfaces/new")
	mustContain(t, "the Add port form", r.Body, `name="name"`, `placeholder="eth2"`, `name="dhcp_server.range_start"`, `name="mtu"`)

	// Problems come back next to their field from config's validator, and
	// nothing is saved.
	for _, tc := range []struct {
		what, key, value, field string
	}{
		{"a name longer than a kernel name", "name", "eth-far-too-long0", "name"},
		{"an MTU below the minimum", "mtu", "100", "mtu"},
		{"an address overlapping the LAN", "addresses", "192.168.1.2/24", "addresses"},
		{"a DHCP range ending before it starts", "dhcp_server.range_end", "10.50.0.50", "dhcp_server.range_end"},
	} {
		form := addPortForm("eth2")
		form.Set(tc.key, tc.value)
		r := b.post("/interfaces/new", form)
		if r.Code != http.StatusUnprocessableEntity || fieldError(r.Body, tc.field) == "" {
			t.Errorf("Add port with %s: %d, error at %s %q; want 422 with the error next to the field", tc.what, r.Code, tc.field, fieldError(r.Body, tc.field))
		}
	}
	if c, _ := h.store.Candidate(); c.Interface("eth2") != nil {
		t.Fatalf("a refused Add port form saved eth2: %+v", c.Interface("eth2"))
	}

	r = b.post("/interfaces/new", addPortForm("eth2"))
	if r.Code != http.StatusSeeOther || r.Location != "/interfaces" {
		t.Fatalf("Add port form: %d to %q, want 303 to /interfaces: %s", r.Code, r.Location, r.Body)
	}
	mustContain(t, "the interfaces page with eth2", b.get("/interfaces").Body,
		"saved to the pending changes", "eth2", "DMZ", "10.50.0.1/24", `action="/interfaces/eth2/delete"`)
	c, _ := h.store.Candidate()
	got := c.Interface("eth2")
	if got == nil || got.Role != config.RoleOpt || !got.Enabled || got.MTU != 1500 || got.Description != "DMZ" ||
		len(got.Addresses) != 1 || got.Addresses[0].String() != "10.50.0.1/24" || got.DHCPServer.RangeStart.String() != "10.50.0.100" {
		t.Fatalf("eth2 in the candidate after the form: %+v", got)
	}
	if r := b.post("/interfaces/new", addPortForm("eth2")); r.Code != http.StatusUnprocessableEntity || fieldError(r.Body, "name") == "" {
		t.Errorf("adding eth2 twice: %d, name error %q; want 422 saying it exists", r.Code, fieldError(r.Body, "name"))
	}

	// A port a route still names is not deleted; the message names the route.
	if r := b.post("/routes/new", url.Values{"name": {"dmz-net"}, "enabled": {"on"}, "destination": {"10.51.0.0/16"}, "interface": {"eth2"}}); r.Code != http.StatusSeeOther {
		t.Fatalf("route on eth2: %d %s", r.Code, r.Body)
	}
	if r := b.post("/interfaces/eth2/delete", nil); r.Code != http.StatusSeeOther || r.Location != "/interfaces" {
		t.Fatalf("delete of a used port: %d to %q, want 303 to /interfaces", r.Code, r.Location)
	}
	mustContain(t, "the interfaces page after deleting a used port", b.get("/interfaces").Body, "still in use", "routes[dmz-net].interface")
	if c, _ := h.store.Candidate(); c.Interface("eth2") == nil {
		t.Fatalf("eth2 was deleted while route dmz-net names it")
	}

	if r := b.post("/routes/dmz-net/delete", nil); r.Code != http.StatusSeeOther {
		t.Fatalf("delete route: %d", r.Code)
	}
	if r := b.post("/interfaces/eth2/delete", nil); r.Code != http.StatusSeeOther {
		t.Fatalf("delete port: %d", r.Code)
	}
	mustContain(t, "the interfaces page after deleting eth2", b.get("/interfaces").Body, "Interface eth2 deleted")
	if c, _ := h.store.Candidate(); c.Interface("eth2") != nil || c.Interface("eth1") == nil {
		t.Errorf("after the delete button: eth2 %+v (want gone), eth1 %+v (want kept)", c.Interface("eth2"), c.Interface("eth1"))
	}
}

func TestInterfacesAPI(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()

	if r, m := b.api("PUT", "/api/v1/interfaces/eth2", `{"role":"opt","addresses":["10.50.0.1/24"],"mtu":100}`); r.Code != http.StatusUnprocessableEntity || m["fields"].(map[string]any)["mtu"] == nil {
		t.Errorf("PUT of a new port with MTU 100: %d %s, want 422 with a problem on mtu", r.Code, r.Body)
	}
	if r, _ := b.api("PUT", "/api/v1/interfaces/eth2", `{"role":"opt","addresses":["10.50.0.1/24"],"description":"USB NIC"}`); r.Code != http.StatusCreated {
		t.Fatalf("PUT of a new port: %d %s, want 201", r.Code, r.Body)
	}
	if r, _ := b.api("PUT", "/api/v1/interfaces/eth2", `{"mtu":1400}`); r.Code != http.StatusOK {
		t.Fatalf("partial PUT of the port: %d %s, want 200", r.Code, r.Body)
	}
	c, _ := h.store.Candidate()
	want := config.Interface{Name: "eth2", Description: "USB NIC", Role: config.RoleOpt, Enabled: true,
		Addressing: config.AddressingStatic, Addresses: []config.Prefix{config.MustPrefix("10.50.0.1/24")}, MTU: 1400}
	if got := c.Interface("eth2"); got == nil || !reflect.DeepEqual(got.Addresses, want.Addresses) ||
		got.Name != want.Name || got.Description != want.Description || got.Role != want.Role || got.Enabled != want.Enabled ||
		got.Addressing != want.Addressing || got.MTU != want.MTU {
		t.Fatalf("eth2 after PUTs: %+v, want %+v (a new port is enabled and static; a partial PUT keeps the rest)", got, want)
	}

	if r, _ := b.api("PUT", "/api/v1/rules/from-dmz", `{"chain":"forward","action":"accept","in":"eth2"}`); r.Code != http.StatusCreated {
		t.Fatalf("PUT of a rule on eth2: %d %s", r.Code, r.Body)
	}
	if r, m := b.api("DELETE", "/api/v1/interfaces/eth2", ""); r.Code != http.StatusConflict || !strings.Contains(r.Body, "firewall.rules[from-dmz].in") {
		t.Errorf("DELETE of a port a rule names: %d %v, want 409 naming firewall.rules[from-dmz].in", r.Code, m)
	}
	if r, _ := b.api("DELETE", "/api/v1/rules/from-dmz", ""); r.Code != http.StatusOK {
		t.Fatalf("DELETE rule: %d %s", r.Code, r.Body)
	}
	if r, _ := b.api("DELETE", "/api/v1/interfaces/eth2", ""); r.Code != http.StatusOK {
		t.Errorf("DELETE port: %d %s", r.Code, r.Body)
	}
	if r, m := b.api("DELETE", "/api/v1/interfaces/eth2", ""); r.Code != http.StatusNotFound || m["error"] == nil {
		t.Errorf("second DELETE of the port: %d %v, want 404 with an error", r.Code, m)
	}
	if c, _ := h.store.Candidate(); c.Interface("eth2") != nil {
		t.Errorf("eth2 still in the candidate after DELETE: %+v", c.Interface("eth2"))
	}
}

func TestRouteWalkCoversPorts(t *testing.T) {
	h := newHarness(t, true)
	seen := map[string]bool{}
	for _, rc := range allRoutes(t, h.srv.Router()) {
		seen[rc.Method+" "+rc.Template] = true
	}
	for _, want := range []string{
		"GET /interfaces/new", "POST /interfaces/new", "POST /interfaces/{name}/delete",
		"PUT /api/v1/interfaces/{name}", "DELETE /api/v1/interfaces/{name}",
	} {
		if !seen[want] {
			t.Errorf("the route walk of the auth and CSRF tests misses %s", want)
		}
	}
}

func TestUnconfiguredPorts(t *testing.T) {
	var links []netdapi.LinkStatus
	for _, l := range []struct {
		name string
		port bool
	}{{"br0", false}, {"enx00e04c680001", true}, {"eth0", true}, {"eth1", true}, {"eth2", true}, {"ipsec0", false}, {"lo", false}, {"tun0", false}} {
		links = append(links, netdapi.LinkStatus{Name: l.name, Present: true, Port: l.port, Operstate: "up", Addresses: []string{}})
	}
	got := unconfiguredPorts(links, config.Default())
	want := []string{"enx00e04c680001", "eth2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("unconfiguredPorts with eth0, eth1 configured = %q, want %q (ports only: no lo, tun0, br0, ipsec0)", got, want)
	}
	// The Add port form offers them as hints for the name.
	h := newHarness(t, true, func(o *Options) { o.Links = linkTable{links: links} })
	b := h.browser()
	b.login()
	mustContain(t, "the Add port form on a box with eth2 and a USB NIC", b.get("/interfaces/new").Body,
		`list="f-name-ports"`, `<option value="eth2">`, `<option value="enx00e04c680001">`, "not in the configuration: enx00e04c680001, eth2.")

	// Without netd's answer there are no hints, and the form still works.
	h = newHarness(t, true, func(o *Options) { o.Links = linkTable{err: errors.New("netd is down")} })
	b = h.browser()
	b.login()
	if r := b.get("/interfaces/new"); r.Code != http.StatusOK || strings.Contains(r.Body, `list="f-name-ports"`) || !strings.Contains(r.Body, `name="name"`) {
		t.Errorf("the Add port form without netd: %d, hints shown %v; want the form without hints", r.Code, strings.Contains(r.Body, `list="f-name-ports"`))
	}
}
