package webui

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// apiClient is a browser speaking JSON with the CSRF header.
func (b *browser) api(method, path, body string) (response, map[string]any) {
	b.h.t.Helper()
	req, _ := http.NewRequest(method, b.h.ts.URL+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.csrf != "" {
		req.Header.Set(csrfHeader, b.csrf)
	}
	r := b.do(req)
	var m map[string]any
	json.Unmarshal([]byte(r.Body), &m)
	return r, m
}

func TestAPI(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()

	if r := b.apiLogin(testAdmin, "wrong"); r.Code != http.StatusUnauthorized || !strings.Contains(r.Body, wrongLogin) {
		t.Errorf("API login with a wrong password: %d %s", r.Code, r.Body)
	}
	req, _ := http.NewRequest("POST", h.ts.URL+"/api/v1/login", strings.NewReader("user=admin&password=x"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if r := b.do(req); r.Code != http.StatusUnsupportedMediaType {
		t.Errorf("API login as a form post: %d, want 415 (a foreign page could send that)", r.Code)
	}
	r := b.apiLogin(testAdmin, testPassword)
	var info SessionInfo
	if err := json.Unmarshal([]byte(r.Body), &info); r.Code != http.StatusOK || err != nil || len(info.CSRFToken) < 43 {
		t.Fatalf("API login: %d %s", r.Code, r.Body)
	}
	b.csrf = info.CSRFToken

	_, psk := b.api("GET", "/api/v1/psk", "")
	if s, _ := psk["psk"].(string); len(s) != 43 {
		t.Errorf("generated PSK %q, want 43 base64 characters (256 bits)", s)
	}

	r, m := b.api("PUT", "/api/v1/tunnels/branch", `{"remote_address":"nope","psk":"short","local_subnets":["192.168.1.0/24"],"remote_subnets":["10.9.0.0/16"]}`)
	fields, _ := m["fields"].(map[string]any)
	if r.Code != http.StatusUnprocessableEntity || fields["remote_address"] == nil || fields["psk"] == nil {
		t.Errorf("PUT of a bad tunnel: %d %s, want 422 with remote_address and psk errors", r.Code, r.Body)
	}
	if r, _ := b.api("PUT", "/api/v1/tunnels/branch", `{"colour":"blue"}`); r.Code != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "colour") {
		t.Errorf("PUT with an unknown field: %d %s", r.Code, r.Body)
	}
	r, _ = b.api("PUT", "/api/v1/tunnels/branch", `{"remote_address":"198.51.100.7","psk":"0123456789abcdef-long-enough-key",
		"local_subnets":["192.168.1.0/24"],"remote_subnets":["10.9.0.0/16"],"enabled":true}`)
	if r.Code != http.StatusCreated {
		t.Fatalf("PUT of a good tunnel: %d %s", r.Code, r.Body)
	}
	r, _ = b.api("PUT", "/api/v1/tunnels/branch", `{"dpd_interval":"10s","dpd_timeout":"60s"}`)
	if r.Code != http.StatusOK {
		t.Fatalf("partial PUT: %d %s", r.Code, r.Body)
	}
	r, _ = b.api("GET", "/api/v1/tunnels/branch", "")
	if strings.Contains(r.Body, "long-enough-key") || !strings.Contains(r.Body, `"psk_set": true`) {
		t.Errorf("tunnel detail leaks the key or does not say one is set: %s", r.Body)
	}
	r, m = b.api("GET", "/api/v1/changes", "")
	if diff, _ := m["diff"].([]any); r.Code != http.StatusOK || len(diff) == 0 {
		t.Errorf("changes: %d %s", r.Code, r.Body)
	}
	req, _ = http.NewRequest("POST", h.ts.URL+"/api/v1/commit", strings.NewReader(`{"message":"api"}`))
	req.Header.Set("Content-Type", "application/json")
	if r := b.do(req); r.Code != http.StatusForbidden {
		t.Errorf("commit without X-CSRF-Token: %d, want 403", r.Code)
	}
	r, m = b.api("POST", "/api/v1/commit", `{"message":"api","confirm_minutes":5}`)
	if r.Code != http.StatusOK || m["revision"] == nil {
		t.Fatalf("commit: %d %s", r.Code, r.Body)
	}
	if r, _ := b.api("POST", "/api/v1/commit", `{"message":"again"}`); r.Code != http.StatusConflict {
		t.Errorf("commit with nothing to commit: %d, want 409", r.Code)
	}
	if r, _ := b.api("POST", "/api/v1/confirm", `{}`); r.Code != http.StatusOK {
		t.Errorf("confirm: %d %s", r.Code, r.Body)
	}
	running, _ := h.store.Running()
	if tun := running.Tunnel("branch"); tun == nil || tun.DPDInterval.String() != "10s" {
		t.Fatalf("running tunnel %+v", tun)
	}
	r, _ = b.api("GET", "/api/v1/tunnels", "")
	var rows []tunnelRow
	if err := json.Unmarshal([]byte(r.Body), &rows); err != nil || len(rows) != 1 || rows[0].State != stateUnknown || rows[0].Reason != "iked is not running" {
		t.Errorf("tunnels: %s", r.Body)
	}

	// The web UI cannot export secrets in the clear: its configd socket
	// hands out none (encrypted with a passphrase they can go).
	r, _ = b.api("POST", "/api/v1/system/backup", `{"secrets":"included"}`)
	if r.Code == http.StatusOK || strings.Contains(r.Body, "long-enough-key") {
		t.Errorf("API backup with secrets in the clear: %d, want it refused", r.Code)
	}
	if r, _ := b.api("DELETE", "/api/v1/tunnels/branch", ""); r.Code != http.StatusOK {
		t.Errorf("delete: %d %s", r.Code, r.Body)
	}
	if r, _ := b.api("DELETE", "/api/v1/tunnels/branch", ""); r.Code != http.StatusNotFound {
		t.Errorf("second delete: %d, want 404", r.Code)
	}
	if r, _ := b.api("PUT", "/api/v1/interfaces/eth9", `{"mtu":100}`); r.Code != http.StatusUnprocessableEntity {
		t.Errorf("PUT creating an interface with MTU 100: %d, want 422", r.Code)
	}
	if r, _ := b.api("PUT", "/api/v1/system", `{"hostname":"gw-1","ntp_servers":["192.0.2.1"]}`); r.Code != http.StatusOK {
		t.Errorf("PUT system: %d %s", r.Code, r.Body)
	}
	cand, _ := h.store.Candidate()
	if cand.System.Hostname != "gw-1" || cand.Tunnel("branch") != nil || cand.Interface("eth9") != nil {
		t.Errorf("candidate after API edits: host %q, branch %v, refused eth9 %v", cand.System.Hostname, cand.Tunnel("branch"), cand.Interface("eth9"))
	}
	r, _ = b.api("GET", "/api/v1/history", "")
	if r.Code != http.StatusOK {
		t.Errorf("history: %d", r.Code)
	}
	if r, _ := b.api("POST", "/api/v1/system/factory-reset", `{"confirm":"yes"}`); r.Code != http.StatusUnprocessableEntity {
		t.Errorf("factory reset without the confirm word: %d", r.Code)
	}
	if r, _ := b.api("POST", "/api/v1/system/reboot", `{}`); r.Code != http.StatusBadGateway {
		t.Errorf("reboot without a supervisor: %d, want 502 saying so", r.Code)
	}
	if r, _ := b.api("POST", "/api/v1/logout", `{}`); r.Code != http.StatusOK {
		t.Errorf("logout: %d", r.Code)
	}
	if r, _ := b.api("GET", "/api/v1/session", ""); r.Code != http.StatusUnauthorized {
		t.Errorf("session after logout: %d, want 401", r.Code)
	}
}
