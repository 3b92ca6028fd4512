package webui

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/config/importer"
	"github.com/flashgate/flashgate/upgrade/remote"
)

// Tunnels → Import: the preview shows the tunnel and the unmapped line
// and saves nothing; the save puts the tunnel into the candidate; a second
// save is refused, as is a post without the CSRF token.
func TestImportPage(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()
	data, err := os.ReadFile("testdata/isakmpd-flashboot-vpn.conf")
	if err != nil {
		t.Fatal(err)
	}
	r := b.post("/tunnels/import", url.Values{"text": {string(data)}, "action": {"preview"}})
	if r.Code != http.StatusOK {
		t.Fatalf("preview: %d %s", r.Code, r.Body)
	}
	mustContain(t, "preview", r.Body, `data-tunnel="VPN-A-B"`, "IKEv1", "aes128-sha1-modp1024", "192.168.2.0/24", "192.168.4.0/24",
		"weak algorithms", "modp1024 (a 1024-bit group", "BLF-SHA: blowfish is refused", `id="import-save"`)
	if c, _ := h.store.Candidate(); len(c.Tunnels) != 0 {
		t.Fatal("the preview saved tunnels")
	}
	if r := b.post("/tunnels/import", url.Values{"csrf": {"wrong"}, "text": {string(data)}, "action": {"save"}}); r.Code == http.StatusSeeOther && r.Location == "/changes" {
		t.Fatal("import saved without the CSRF token")
	}
	r = b.post("/tunnels/import", url.Values{"text": {string(data)}, "action": {"save"}})
	if r.Code != http.StatusSeeOther || r.Location != "/changes" {
		t.Fatalf("save: %d to %q: %s", r.Code, r.Location, r.Body)
	}
	c, _ := h.store.Candidate()
	tun := c.Tunnel("VPN-A-B")
	if tun == nil || tun.IKEVersion != config.IKEv1 || !tun.LegacyAlgorithms || tun.PSK.Reveal() != "yoursharedsecret" {
		t.Fatalf("candidate tunnel: %+v", tun)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("candidate after the import does not validate: %v", err)
	}
	r = b.post("/tunnels/import", url.Values{"text": {string(data)}, "action": {"save"}})
	mustContain(t, "second save", r.Body, "Nothing was saved: the candidate already has tunnels called VPN-A-B")
	if r := b.post("/tunnels/import", url.Values{"text": {"hello"}, "action": {"preview"}}); r.Code != http.StatusUnprocessableEntity {
		t.Errorf("garbage: %d", r.Code)
	}
}

// A tunnel with legacy algorithms is marked weak in the tunnel list, on
// its page (with why and what to use instead) and in the API's rows.
func TestWeakTunnelShown(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()
	data, err := os.ReadFile("testdata/isakmpd-flashboot-vpn.conf")
	if err != nil {
		t.Fatal(err)
	}
	if r := b.post("/tunnels/import", url.Values{"text": {string(data)}, "action": {"save"}}); r.Code != http.StatusSeeOther {
		t.Fatalf("save: %d %s", r.Code, r.Body)
	}
	mustContain(t, "tunnel list", b.get("/tunnels").Body, "weak algorithms", "aes128-sha1-modp1024: sha1, modp1024.")
	mustContain(t, "tunnel page", b.get("/tunnels/VPN-A-B").Body, `id="weak-proposals"`, "allowed by legacy_algorithms", "IKEv1",
		"modp1024 (a 1024-bit group is within reach of a well-funded attacker: Logjam; use modp2048 or ecp256)")
	mustContain(t, "edit form", b.get("/tunnels/VPN-A-B/edit").Body, `<option value="1" selected>1</option>`,
		`id="f-legacy_algorithms" checked`)
	// Turning legacy_algorithms off in the form is refused: the
	// proposals need it, and the message says which setting allows them.
	r, _ := b.api("PUT", "/api/v1/tunnels/VPN-A-B", `{"legacy_algorithms":false}`)
	if r.Code != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "accepted only in a tunnel with legacy_algorithms true") {
		t.Errorf("legacy off: %d %s", r.Code, r.Body)
	}
	r, _ = b.api("GET", "/api/v1/tunnels", "")
	mustContain(t, "GET /api/v1/tunnels", strings.Join(strings.Fields(r.Body), ""), `"weak":[{"kind":"ike","proposal":"aes128-sha1-modp1024"`)
}

// `flashgate import -box`: remote.Box.ImportTunnels saves the imported
// tunnel through the JSON API field by field (ike_version and
// legacy_algorithms included), and refuses the whole import when the name
// is taken.
func TestImportThroughAPI(t *testing.T) {
	h := newHarness(t, true)
	sum := sha256.Sum256(h.ts.Certificate().Raw)
	box := &remote.Box{URL: h.ts.URL, Fingerprint: hex.EncodeToString(sum[:]), User: testAdmin, Password: testPassword}
	ctx := context.Background()
	if err := box.Login(ctx); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/isakmpd-flashboot-vpn.conf")
	if err != nil {
		t.Fatal(err)
	}
	res, err := importer.Import(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := box.ImportTunnels(ctx, res.Tunnels); err != nil {
		t.Fatal(err)
	}
	c, _ := h.store.Candidate()
	got := c.Tunnel("VPN-A-B")
	if got == nil {
		t.Fatal("no tunnel in the candidate")
	}
	want := res.Tunnels[0]
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) || !got.PSK.Equal(want.PSK) {
		t.Errorf("saved through the API:\n%s\nimported:\n%s", gj, wj)
	}
	if err := box.ImportTunnels(ctx, res.Tunnels); err == nil || !strings.Contains(err.Error(), "already has tunnels called VPN-A-B") {
		t.Errorf("second import: %v", err)
	}
}
