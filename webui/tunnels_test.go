package webui

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec/hwcrypto"
)

// tunnelForm is a valid new-tunnel form.
func tunnelForm(name string) url.Values {
	return url.Values{
		"name":           {name},
		"enabled":        {"true"},
		"remote_address": {"198.51.100.7"},
		"local_address":  {""},
		"remote_id":      {""},
		"local_id":       {""},
		"psk":            {"0123456789abcdef-long-enough-key"},
		"local_subnets":  {"192.168.1.0/24"},
		"remote_subnets": {"10.20.0.0/16\n10.21.0.0/16"},
		"ike_proposals":  {config.DefaultIKEProposal},
		"esp_proposals":  {config.DefaultESPProposal},
		"start_action":   {"initiate"},
		"data_plane":     {"auto"},
		"ike_lifetime":   {"4h"},
		"child_lifetime": {"1h"},
		"dpd_interval":   {"30s"},
		"dpd_timeout":    {"150s"},
	}
}

// fieldError returns the message shown under a form field, or "".
func fieldError(body, key string) string {
	id := "f-" + strings.ReplaceAll(key, ".", "-") + "-err"
	m := regexp.MustCompile(`<p class="err" id="` + regexp.QuoteMeta(id) + `">([^<]*)</p>`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

func TestTunnelFormErrorsNextToFields(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()
	before, _ := h.store.Candidate()

	cases := []struct {
		name   string
		edit   func(url.Values)
		field  string
		substr string
	}{
		{"bad peer", func(f url.Values) { f.Set("remote_address", "198.51.100.300") }, "remote_address", "is not an IP address"},
		{"no peer", func(f url.Values) { f.Set("remote_address", "") }, "remote_address", "missing address"},
		{"short key", func(f url.Values) { f.Set("psk", "short") }, "psk", "too short"},
		{"no key", func(f url.Values) { f.Set("psk", "") }, "psk", "missing pre-shared key"},
		{"bad subnet", func(f url.Values) { f.Set("remote_subnets", "10.20.0.0/33") }, "remote_subnets", "is not a network"},
		{"host bits", func(f url.Values) { f.Set("local_subnets", "192.168.1.1/24") }, "local_subnets", "did you mean 192.168.1.0/24"},
		{"inside local", func(f url.Values) { f.Set("remote_subnets", "192.168.1.128/25") }, "remote_subnets", "lies within"},
		{"no networks", func(f url.Values) { f.Set("local_subnets", "") }, "local_subnets", "at least one local subnet"},
		{"bad proposal", func(f url.Values) { f.Del("ike_proposals"); f.Set("ike_proposals_custom", "aes128-md5-modp2048") }, "ike_proposals", "md5 is broken"},
		{"no proposal", func(f url.Values) { f.Del("esp_proposals") }, "esp_proposals", "at least one proposal"},
		{"bad duration", func(f url.Values) { f.Set("ike_lifetime", "forever") }, "ike_lifetime", "is not a duration"},
		{"lifetime range", func(f url.Values) { f.Set("child_lifetime", "48h") }, "child_lifetime", "out of range"},
		{"dpd order", func(f url.Values) { f.Set("dpd_timeout", "10s") }, "dpd_timeout", "shorter than the DPD interval"},
		{"fragment size", func(f url.Values) { f.Set("ike_fragment_size", "100") }, "ike_fragment_size", "576"},
		{"bad start", func(f url.Values) { f.Set("start_action", "sometimes") }, "start_action", "is not one of"},
		{"bad name", func(f url.Values) { f.Set("name", "no spaces please") }, "name", "is not a valid name"},
		{"bad id", func(f url.Values) { f.Set("remote_id", "a\x01b") }, "remote_id", "printable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tunnelForm("branch")
			tc.edit(f)
			r := b.post("/tunnels/new", f)
			if r.Code != http.StatusUnprocessableEntity {
				t.Fatalf("%d, want 422 with the form again", r.Code)
			}
			msg := fieldError(r.Body, tc.field)
			if !strings.Contains(strings.ToLower(msg), strings.ToLower(tc.substr)) {
				t.Errorf("message under %s is %q, want one containing %q", tc.field, msg, tc.substr)
			}
			// The form keeps what was typed.
			if v := f.Get("remote_address"); v != "" && !strings.Contains(r.Body, `value="`+v+`"`) {
				t.Errorf("the form lost the typed peer address %q", v)
			}
		})
	}
	after, _ := h.store.Candidate()
	if after.Text() != before.Text() {
		t.Errorf("refused forms changed the candidate:\n%s", config.DiffText(before, after))
	}

	// Several problems at once are all shown, each at its field.
	f := tunnelForm("branch")
	f.Set("remote_address", "nope")
	f.Set("psk", "short")
	f.Set("remote_subnets", "10.0.0.0/33")
	r := b.post("/tunnels/new", f)
	for _, key := range []string{"remote_address", "psk", "remote_subnets"} {
		if fieldError(r.Body, key) == "" {
			t.Errorf("no message under %s when three fields are wrong", key)
		}
	}
}

func TestTunnelCreateEditDeleteCommit(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()

	r := b.post("/tunnels/new", tunnelForm("branch"))
	if r.Code != http.StatusSeeOther || r.Location != "/tunnels" {
		t.Fatalf("create: %d to %q: %s", r.Code, r.Location, r.Body)
	}
	if r := b.post("/tunnels/new", tunnelForm("branch")); !strings.Contains(fieldError(r.Body, "name"), "already exists") {
		t.Errorf("second tunnel with the same name: %d, name error %q", r.Code, fieldError(r.Body, "name"))
	}
	list := b.get("/tunnels")
	mustContain(t, "tunnel list", list.Body, "branch", "pending", "not committed yet")

	cand, _ := h.store.Candidate()
	tun := cand.Tunnel("branch")
	if tun == nil || tun.PSK.Reveal() != "0123456789abcdef-long-enough-key" || len(tun.RemoteSubnets) != 2 {
		t.Fatalf("candidate tunnel %+v", tun)
	}

	// The edit form never shows the key; leaving it empty keeps it.
	edit := b.get("/tunnels/branch/edit")
	if strings.Contains(edit.Body, "0123456789abcdef-long-enough-key") {
		t.Error("the edit form sends the pre-shared key to the browser")
	}
	f := tunnelForm("branch")
	f.Del("name")
	f.Set("psk", "")
	f.Set("remote_address", "198.51.100.8")
	f.Set("ike_fragment_size", "1200")
	if r := b.post("/tunnels/branch/edit", f); r.Code != http.StatusSeeOther {
		t.Fatalf("edit: %d: %s", r.Code, fieldError(r.Body, "psk"))
	}
	cand, _ = h.store.Candidate()
	if tun := cand.Tunnel("branch"); tun.PSK.Reveal() != "0123456789abcdef-long-enough-key" || tun.RemoteAddress.String() != "198.51.100.8" || tun.IKEFragmentSize != 1200 {
		t.Errorf("after edit: psk kept=%v, peer %s, IKE fragment size %d (want 1200)", tun.PSK.Reveal() == "0123456789abcdef-long-enough-key", tun.RemoteAddress, tun.IKEFragmentSize)
	}

	changes := b.get("/changes")
	mustContain(t, "pending changes", changes.Body, "+ set tunnels branch remote_address 198.51.100.8", "<redacted>")
	if strings.Contains(changes.Body, "long-enough-key") {
		t.Error("the diff shows the pre-shared key")
	}
	if r := b.post("/changes/commit", url.Values{"message": {"first tunnel"}, "mode": {"plain"}}); r.Code != http.StatusSeeOther {
		t.Fatalf("commit: %d", r.Code)
	}
	running, _ := h.store.Running()
	if running.Tunnel("branch") == nil {
		t.Fatal("the committed tunnel is not running")
	}
	list = b.get("/tunnels")
	mustContain(t, "tunnel list after commit", list.Body, "branch", "iked is not running", ">unknown<")

	detail := b.get("/tunnels/branch")
	mustContain(t, "tunnel detail", detail.Body, "198.51.100.8", "10.20.0.0/16", "pre-shared key set (not shown)")

	if r := b.post("/tunnels/branch/delete", nil); r.Code != http.StatusSeeOther {
		t.Fatalf("delete: %d", r.Code)
	}
	cand, _ = h.store.Candidate()
	if cand.Tunnel("branch") != nil {
		t.Error("deleted tunnel still in the candidate")
	}
	if r := b.post("/changes/discard", nil); r.Code != http.StatusSeeOther {
		t.Fatalf("discard: %d", r.Code)
	}
	cand, _ = h.store.Candidate()
	if cand.Tunnel("branch") == nil {
		t.Error("discard did not bring the tunnel back")
	}
}

func TestCommitConfirmedAndRollback(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()
	b.post("/tunnels/new", tunnelForm("branch"))
	r := b.post("/changes/commit", url.Values{"mode": {"confirmed"}, "confirm_minutes": {"5"}})
	if r.Code != http.StatusSeeOther {
		t.Fatalf("commit-confirmed: %d", r.Code)
	}
	page := b.get("/changes")
	mustContain(t, "page during commit-confirmed", page.Body, "must be confirmed within", "data-countdown=", `action="/changes/confirm"`)
	if p := h.store.Pending(); p == nil {
		t.Fatal("no commit pending confirmation")
	}
	if r := b.post("/changes/confirm", nil); r.Code != http.StatusSeeOther {
		t.Fatalf("confirm: %d", r.Code)
	}
	if p := h.store.Pending(); p != nil {
		t.Errorf("still pending after confirm: %+v", p)
	}
	if r := b.post("/changes/commit", url.Values{"mode": {"confirmed"}, "confirm_minutes": {"900"}}); r.Code != http.StatusSeeOther {
		t.Errorf("commit with 900 minutes: %d", r.Code)
	}
	_, rev := h.store.Running()
	// Roll back to the revision with only the admin account.
	if r := b.post("/changes/rollback/"+strconv.FormatUint(rev-1, 10), nil); r.Code != http.StatusSeeOther {
		t.Fatalf("rollback: %d", r.Code)
	}
	running, _ := h.store.Running()
	if running.Tunnel("branch") != nil {
		t.Error("rollback did not remove the tunnel")
	}
	hist := b.get("/changes")
	mustContain(t, "history", hist.Body, "rollback", "commit-confirmed", "admin (web)")
}

// TestProposalsMarkedForGeode reads the ALIX fixture of hwcrypto (a Geode
// LX with geode-aes registered): AES-128-CBC proposals are done in
// hardware there, GCM and ChaCha are not.
func TestProposalsMarkedForGeode(t *testing.T) {
	report, err := hwcrypto.Detect("../ipsec/hwcrypto/testdata/alix")
	if err != nil {
		t.Fatal(err)
	}
	c := newProposalCatalog(report)
	marked := map[string]bool{}
	for _, p := range append(c.IKE, c.ESP...) {
		if p.Accelerated {
			marked[p.Proposal] = true
			if p.Engine == "" {
				t.Errorf("%s accelerated by no named engine", p.Proposal)
			}
		}
	}
	for _, want := range []string{"aes128-sha256-ecp256", "aes128-sha1", "aes128-sha256"} {
		if !marked[want] {
			t.Errorf("%s not marked accelerated on a Geode (marked: %v)", want, marked)
		}
	}
	for _, not := range []string{config.DefaultIKEProposal, "chacha20poly1305", "aes256-sha256"} {
		if marked[not] {
			t.Errorf("%s marked accelerated on a Geode, which does AES-128-CBC only", not)
		}
	}
	if c.Engine == "" {
		t.Error("no engine named for the Geode fixture")
	}
	// The form shows the marks.
	h := newHarness(t, true, func(o *Options) { o.Crypto = report })
	b := h.browser()
	b.login()
	mustContain(t, "tunnel form on a Geode", b.get("/tunnels/new").Body, "⚡ "+c.Engine)
}

func TestProposalCatalogIsValidAndMarked(t *testing.T) {
	c := newProposalCatalog(nil)
	if len(c.IKE) != len(ikeProposals) || len(c.ESP) != len(espProposals) {
		t.Errorf("catalog dropped proposals config refuses: %d/%d IKE, %d/%d ESP", len(c.IKE), len(ikeProposals), len(c.ESP), len(espProposals))
	}
	for _, p := range c.IKE {
		if p.Accelerated {
			t.Errorf("%s marked accelerated without any engine", p.Proposal)
		}
	}
}

// A route tunnel through the forms: mode, interface, inner address and
// MTU are saved; a bad interface name comes back next to its field; the
// tunnel's page shows the interface and the routes through it, and the
// Routes page marks such a route as the tunnel's.
func TestRouteTunnelForms(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()
	f := tunnelForm("aws1")
	f.Set("mode", config.ModeRoute)
	f.Set("local_subnets", "")
	f.Set("remote_subnets", "")
	f.Set("interface", "vti0")
	f.Set("inner_addresses", "169.254.10.2/30")
	f.Set("mtu", "1399")
	if r := b.post("/tunnels/new", f); r.Code != http.StatusUnprocessableEntity || !strings.Contains(fieldError(r.Body, "interface"), "is not ipsecN") {
		t.Fatalf("route tunnel with interface vti0: %d, interface error %q", r.Code, fieldError(r.Body, "interface"))
	}
	f.Set("interface", "ipsec0")
	if r := b.post("/tunnels/new", f); r.Code != http.StatusSeeOther {
		t.Fatalf("route tunnel form: %d: %s", r.Code, r.Body)
	}
	cand, _ := h.store.Candidate()
	tun := cand.Tunnel("aws1")
	if tun == nil || !tun.IsRoute() || tun.Interface != "ipsec0" || tun.MTU != 1399 || len(tun.InnerAddresses) != 1 ||
		tun.InnerAddresses[0].String() != "169.254.10.2/30" || len(tun.RemoteSubnets) != 0 {
		t.Fatalf("candidate route tunnel %+v", tun)
	}
	mustContain(t, "a route tunnel's page without routes", b.get("/tunnels/aws1").Body,
		"route-based: interface", "ipsec0", "if_id 1", "MTU 1399", "169.254.10.2/30", "0.0.0.0/0", "with interface ipsec0")
	if r := b.post("/routes/new", url.Values{"name": {"vpc"}, "enabled": {"on"}, "destination": {"172.31.0.0/16"},
		"interface": {"ipsec0"}, "metric": {"100"}}); r.Code != http.StatusSeeOther {
		t.Fatalf("route through ipsec0: %d %s", r.Code, fieldError(r.Body, "interface"))
	}
	mustContain(t, "the route tunnel's page", b.get("/tunnels/aws1").Body, "172.31.0.0/16 metric 100")
	mustContain(t, "the tunnel list", b.get("/tunnels").Body, `<span class="tag">ipsec0</span>`)
	mustContain(t, "the dashboard", b.get("/").Body, "via ipsec0")
	mustContain(t, "the routes page", b.get("/routes").Body, `href="/tunnels/aws1"`, "tunnel aws1")
	// The edit form shows what was saved.
	mustContain(t, "the edit form", b.get("/tunnels/aws1/edit").Body, `value="ipsec0"`, `value="1399"`, "169.254.10.2/30")
}
