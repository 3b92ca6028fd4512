package webui

import (
	"html"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/config"
)

// lanForm is the interface form of the default LAN (eth1) as a browser
// submits it with the DHCP server box ticked.
func lanForm() url.Values {
	return url.Values{"enabled": {"true"}, "role": {"lan"}, "addressing": {"static"}, "addresses": {"192.168.1.1/24"},
		"dhcp_server.enabled": {"true"}}
}

func TestInterfaceFormDHCPServer(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()

	page := b.get("/interfaces/eth1/edit")
	if page.Code != http.StatusOK {
		t.Fatalf("LAN edit page: %d", page.Code)
	}
	mustContain(t, "LAN edit page", page.Body, "DHCP server", `name="dhcp_server.range_start"`, `name="dhcp_server.static_leases"`,
		`name="dhcp_server.enabled" value="true" id="f-dhcp_server-enabled" checked`)
	if wan := b.get("/interfaces/eth0/edit"); strings.Contains(wan.Body, `id="f-dhcp_server-enabled" checked`) {
		t.Errorf("the WAN's edit page shows its DHCP server on; a WAN has none")
	}

	// Saving the LAN unchanged leaves the default unsaid.
	if r := b.post("/interfaces/eth1/edit", lanForm()); r.Code != http.StatusSeeOther {
		t.Fatalf("LAN saved unchanged: %d %s", r.Code, r.Body)
	}
	cand, _ := h.store.Candidate()
	if s := cand.Interface("eth1").DHCPServer; !s.IsZero() {
		t.Errorf("saving the LAN unchanged wrote a dhcp_server block %+v; want none (the default stays the default)", s)
	}

	// Errors appear next to their fields.
	bad := lanForm()
	bad.Set("dhcp_server.range_start", "192.168.1.1")
	bad.Set("dhcp_server.range_end", "192.168.1.50")
	bad.Set("dhcp_server.lease_time", "1m")
	bad.Set("dhcp_server.static_leases", "02:00:5e:10:00:01,10.9.9.9")
	r := b.post("/interfaces/eth1/edit", bad)
	for key, want := range map[string]string{
		"dhcp_server.range_start":   "contains the box's own address",
		"dhcp_server.lease_time":    "out of range",
		"dhcp_server.static_leases": "outside eth1's network",
	} {
		if got := html.UnescapeString(fieldError(r.Body, key)); !strings.Contains(got, want) {
			t.Errorf("error next to %s: %q, want one containing %q", key, got, want)
		}
	}

	// A range, a lease time and static leases, one per line (their commas
	// are part of the value).
	good := lanForm()
	good.Set("dhcp_server.range_start", "192.168.1.100")
	good.Set("dhcp_server.range_end", "192.168.1.199")
	good.Set("dhcp_server.lease_time", "1h")
	good.Set("dhcp_server.static_leases", "02:00:5e:10:00:01,192.168.1.20,printer\r\n02:00:5e:10:00:02,192.168.1.21\r\n")
	if r := b.post("/interfaces/eth1/edit", good); r.Code != http.StatusSeeOther {
		t.Fatalf("LAN with DHCP settings: %d; errors %q %q", r.Code, fieldError(r.Body, "dhcp_server.static_leases"), fieldError(r.Body, ""))
	}
	cand, _ = h.store.Candidate()
	s := cand.Interface("eth1").DHCPServer
	if s.RangeStart.String() != "192.168.1.100" || s.RangeEnd.String() != "192.168.1.199" || s.LeaseDuration().String() != "1h0m0s" ||
		len(s.StaticLeases) != 2 || s.StaticLeases[0].Hostname != "printer" || s.StaticLeases[1].Address.String() != "192.168.1.21" {
		t.Errorf("candidate dhcp_server %+v, want the range, 1h and both static leases", s)
	}
	page = b.get("/interfaces/eth1/edit")
	mustContain(t, "LAN edit page after saving", page.Body, "02:00:5e:10:00:01,192.168.1.20,printer\n02:00:5e:10:00:02,192.168.1.21", `value="1h"`)
	mustContain(t, "interfaces page", b.get("/interfaces").Body, "DHCP server 192.168.1.100-192.168.1.199")

	// Unticking the box turns the server off (a browser sends nothing).
	off := lanForm()
	off.Del("dhcp_server.enabled")
	if r := b.post("/interfaces/eth1/edit", off); r.Code != http.StatusSeeOther {
		t.Fatalf("LAN with the DHCP server off: %d", r.Code)
	}
	cand, _ = h.store.Candidate()
	if ifc := cand.Interface("eth1"); ifc.ServesDHCP() {
		t.Errorf("unticked DHCP server: the LAN still serves (%+v)", ifc.DHCPServer)
	}
	if page := b.get("/interfaces/eth1/edit"); strings.Contains(page.Body, `id="f-dhcp_server-enabled" checked`) {
		t.Errorf("the edit page shows the server on after it was turned off")
	}
}

// TestInterfaceFormDHCPServerOnOpt turns the LAN port into an opt network:
// its form keeps the DHCP section, the server is off until the box is
// ticked, and ticked it serves the automatic pool.
func TestInterfaceFormDHCPServerOnOpt(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()

	opt := lanForm()
	opt.Set("role", config.RoleOpt)
	opt.Del("dhcp_server.enabled")
	if r := b.post("/interfaces/eth1/edit", opt); r.Code != http.StatusSeeOther {
		t.Fatalf("eth1 made opt: %d %s", r.Code, fieldError(r.Body, ""))
	}
	cand, _ := h.store.Candidate()
	if ifc := cand.Interface("eth1"); ifc.Role != config.RoleOpt || ifc.ServesDHCP() {
		t.Fatalf("eth1 made opt with the box unticked: role %s, serves %v; want opt, not serving", ifc.Role, ifc.ServesDHCP())
	}
	page := b.get("/interfaces/eth1/edit")
	mustContain(t, "opt edit page", page.Body, "DHCP server", `name="dhcp_server.range_start"`, `name="dhcp_server.static_leases"`)
	if strings.Contains(page.Body, `id="f-dhcp_server-enabled" checked`) {
		t.Errorf("the opt edit page shows the DHCP server on before it was turned on")
	}
	if strings.Contains(b.get("/interfaces").Body, "DHCP server 192.168.1.") {
		t.Errorf("the interfaces page shows a DHCP server on the opt port before it was turned on")
	}

	opt.Set("dhcp_server.enabled", "true")
	if r := b.post("/interfaces/eth1/edit", opt); r.Code != http.StatusSeeOther {
		t.Fatalf("opt with the DHCP server ticked: %d %s", r.Code, fieldError(r.Body, "dhcp_server.enabled"))
	}
	cand, _ = h.store.Candidate()
	if ifc := cand.Interface("eth1"); !ifc.ServesDHCP() || !ifc.DHCPServer.Enabled.IsSet() {
		t.Errorf("opt with the box ticked: serves %v, block %+v; want it serving, enabled written out", ifc.ServesDHCP(), ifc.DHCPServer)
	}
	mustContain(t, "opt edit page, server on", b.get("/interfaces/eth1/edit").Body, `id="f-dhcp_server-enabled" checked`)
	mustContain(t, "interfaces page", b.get("/interfaces").Body, "DHCP server 192.168.1.128-192.168.1.254")
}

func TestAPIInterfaceDHCPServer(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()

	r, m := b.api("PUT", "/api/v1/interfaces/eth1", `{"dhcp_server.enabled": false, "dhcp_server.lease_time": "30m",
		"dhcp_server.static_leases": ["02:00:5e:10:00:01,192.168.1.20,printer"]}`)
	if r.Code != http.StatusOK {
		t.Fatalf("PUT DHCP settings: %d %v", r.Code, m)
	}
	cand, _ := h.store.Candidate()
	s := cand.Interface("eth1").DHCPServer
	if s.Enabled.Or(true) || s.LeaseDuration().String() != "30m0s" || len(s.StaticLeases) != 1 {
		t.Errorf("candidate dhcp_server after PUT %+v, want off, 30m and the printer", s)
	}
	// Absent fields are kept: only the range changes.
	if r, m := b.api("PUT", "/api/v1/interfaces/eth1", `{"dhcp_server.enabled": true, "dhcp_server.range_start": "192.168.1.10", "dhcp_server.range_end": "192.168.1.20"}`); r.Code != http.StatusOK {
		t.Fatalf("PUT range: %d %v", r.Code, m)
	}
	r, m = b.api("PUT", "/api/v1/interfaces/eth1", `{"dhcp_server.range_end": "192.168.2.20"}`)
	fields, _ := m["fields"].(map[string]any)
	if msg, _ := fields["dhcp_server.range_end"].(string); r.Code != http.StatusUnprocessableEntity || !strings.Contains(msg, "outside eth1's network") {
		t.Errorf("PUT of a range end outside the network: %d %v, want 422 naming dhcp_server.range_end", r.Code, m)
	}

	_, list := b.api("GET", "/api/v1/interfaces", "")
	rows, _ := list["configured"].([]any)
	var lan map[string]any
	for _, row := range rows {
		if rm, _ := row.(map[string]any); rm != nil {
			if c, _ := rm["config"].(map[string]any); c != nil && c["name"] == "eth1" {
				lan = rm
			}
		}
	}
	if lan == nil || lan["dhcp_range"] != "192.168.1.10-192.168.1.20" {
		t.Fatalf("GET /api/v1/interfaces: eth1 row %v, want dhcp_range 192.168.1.10-192.168.1.20", lan)
	}
	block, _ := lan["config"].(map[string]any)["dhcp_server"].(map[string]any)
	leases, _ := block["static_leases"].([]any)
	if len(leases) != 1 || leases[0].(map[string]any)["hostname"] != "printer" {
		t.Errorf("GET /api/v1/interfaces: eth1 dhcp_server %v, want the printer's static lease as an object", block)
	}
}

func TestDHCPFieldDefaults(t *testing.T) {
	c := config.Default()
	lan, _ := kindInterfaces.values(c, "eth1")
	wan, _ := kindInterfaces.values(c, "eth0")
	if !slices.Equal(lan["dhcp_server.enabled"], []string{"true"}) || !slices.Equal(wan["dhcp_server.enabled"], []string{"false"}) {
		t.Errorf("DHCP server box without a block: LAN %q, WAN %q; want true, false", lan["dhcp_server.enabled"], wan["dhcp_server.enabled"])
	}
	c.Interfaces[1].Role = config.RoleOpt
	if opt, _ := kindInterfaces.values(c, "eth1"); !slices.Equal(opt["dhcp_server.enabled"], []string{"false"}) {
		t.Errorf("DHCP server box of an opt interface without a block: %q; want false (only a LAN serves by default)", opt["dhcp_server.enabled"])
	}
	if got := splitLines([]string{"a,b,c\r\n\n d,e \n"}); !slices.Equal(got, []string{"a,b,c", "d,e"}) {
		t.Errorf("splitLines: %q, want the lines with their commas", got)
	}
}
