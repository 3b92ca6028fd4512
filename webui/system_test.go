package webui

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/config"
)

// upload posts a multipart restore form.
func (b *browser) upload(path string, file []byte, passphrase string) response {
	b.h.t.Helper()
	return b.uploadWithPassword(path, file, passphrase, testPassword)
}

// uploadWithPassword is upload with password as the current password
// ("": none given).
func (b *browser) uploadWithPassword(path string, file []byte, passphrase, password string) response {
	b.h.t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("csrf", b.csrf)
	mw.WriteField("passphrase", passphrase)
	if password != "" {
		mw.WriteField("password", password)
	}
	fw, _ := mw.CreateFormFile("backup", "backup.json")
	fw.Write(file)
	mw.Close()
	req, _ := http.NewRequest("POST", b.h.ts.URL+path, &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return b.do(req)
}

// flashOf returns the message the next page shows after a redirect.
func (b *browser) flashOf(r response) string {
	b.h.t.Helper()
	if r.Code != http.StatusSeeOther {
		b.h.t.Fatalf("want a redirect with a message, got %d: %.300s", r.Code, r.Body)
	}
	page := b.get(r.Location)
	i := strings.Index(page.Body, `<p class="flash`)
	if i < 0 {
		return ""
	}
	end := strings.Index(page.Body[i:], "</p>")
	return page.Body[i : i+end]
}

func TestBackupRestoreRoundTrip(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()
	b.post("/tunnels/new", tunnelForm("branch"))
	b.post("/changes/commit", url.Values{"mode": {"plain"}})

	r := b.post("/system/backup", url.Values{"secrets": {"encrypted"}, "passphrase": {"a long passphrase"}, "password": {testPassword}})
	if r.Code != http.StatusOK || !strings.Contains(r.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("backup: %d %v", r.Code, r.Header)
	}
	backup := []byte(r.Body)
	if bytes.Contains(backup, []byte("long-enough-key")) {
		t.Fatal("an encrypted backup holds the pre-shared key in the clear")
	}
	if !bytes.Contains(backup, []byte(`"flashgate-backup"`)) {
		t.Fatalf("not a backup document: %.200s", backup)
	}

	// Lose the tunnel, then restore it from the backup.
	b.post("/tunnels/branch/delete", nil)
	b.post("/changes/commit", url.Values{"mode": {"plain"}})
	if running, _ := h.store.Running(); running.Tunnel("branch") != nil {
		t.Fatal("tunnel still running after delete and commit")
	}
	msg := b.flashOf(b.upload("/system/restore", backup, "a long passphrase"))
	if !strings.Contains(msg, "pending configuration") {
		t.Fatalf("restore said %q", msg)
	}
	cand, _ := h.store.Candidate()
	if tun := cand.Tunnel("branch"); tun == nil || tun.PSK.Reveal() != "0123456789abcdef-long-enough-key" {
		t.Fatalf("restored candidate tunnel %+v, want branch with its key", tun)
	}
	b.post("/changes/commit", url.Values{"mode": {"plain"}})
	if running, _ := h.store.Running(); running.Tunnel("branch") == nil {
		t.Error("restored tunnel not running after commit")
	}

	// Backups without secrets, and plain ones refused on the page.
	if r := b.post("/system/backup", url.Values{"secrets": {"omitted"}}); r.Code != http.StatusOK || strings.Contains(r.Body, "long-enough-key") {
		t.Errorf("backup without secrets: %d, holds the key: %v", r.Code, strings.Contains(r.Body, "long-enough-key"))
	}
	if r := b.post("/system/backup", url.Values{"secrets": {"encrypted"}, "passphrase": {"short"}, "password": {testPassword}}); !strings.Contains(b.flashOf(r), "passphrase too short") {
		t.Error("a backup with a short passphrase was not refused with the reason")
	}
	if r := b.post("/system/backup", url.Values{"secrets": {"included"}}); r.Code != http.StatusSeeOther {
		t.Errorf("plaintext backup from the page: %d, want a refusal", r.Code)
	}
}

func TestRestoreRefusesBadBackups(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()
	b.post("/tunnels/new", tunnelForm("branch"))
	b.post("/changes/commit", url.Values{"mode": {"plain"}})
	good := []byte(b.post("/system/backup", url.Values{"secrets": {"encrypted"}, "passphrase": {"a long passphrase"}, "password": {testPassword}}).Body)

	var doc map[string]any
	json.Unmarshal(good, &doc)
	foreign, _ := json.Marshal(map[string]any{"format": "opnsense-backup", "config": doc["config"]})
	tampered := bytes.Replace(good, []byte(`"ciphertext": "`), []byte(`"ciphertext": "AAAA`), 1)
	invalid := bytes.Replace(good, []byte(`"198.51.100.7"`), []byte(`"198.51.100.700"`), 1)
	newer := bytes.Replace(good, []byte(`"schema": 2`), []byte(`"schema": 99`), 1)

	cases := []struct {
		name, passphrase, why string
		data                  []byte
	}{
		{"not JSON", "", "not JSON", []byte("\x1f\x8b\x08 this is a gzip file")},
		{"truncated", "a long passphrase", "", good[:len(good)/2]},
		{"foreign", "", "not a flashgate backup", foreign},
		{"wrong passphrase", "another passphrase", "wrong passphrase", good},
		{"no passphrase", "", "passphrase is needed", good},
		{"tampered", "a long passphrase", "", tampered},
		{"invalid value", "a long passphrase", "198.51.100.700", invalid},
		{"newer schema", "a long passphrase", "schema", newer},
		{"empty", "", "", nil},
	}
	before, _ := h.store.Candidate()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := b.flashOf(b.upload("/system/restore", tc.data, tc.passphrase))
			if !strings.Contains(msg, "Restore refused, nothing was changed") || !strings.Contains(msg, tc.why) {
				t.Errorf("restore of a %s backup said %q, want a refusal saying %q", tc.name, msg, tc.why)
			}
		})
	}
	after, _ := h.store.Candidate()
	if d := config.DiffText(before, after); d != "" {
		t.Errorf("refused restores changed the candidate:\n%s", d)
	}

	// Oversized uploads are cut off before they are read in full.
	big := bytes.Repeat([]byte(" "), maxUploadBody+1024)
	r := b.upload("/system/restore", big, "")
	if r.Code != http.StatusRequestEntityTooLarge && !strings.Contains(b.flashOf(r), "refused") {
		t.Errorf("oversized upload: %d, want refused", r.Code)
	}
}

func TestSystemSettingsAndPassword(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()
	r := b.post("/system/settings", url.Values{"hostname": {"bad_host!"}, "timezone": {"Europe/Berlin"},
		"ntp_servers": {"pool.ntp.org"}, "remote_syslog.host": {"192.0.2.9"}, "remote_syslog.port": {"70000"}, "remote_syslog.protocol": {"udp"}})
	if r.Code != http.StatusUnprocessableEntity {
		t.Fatalf("bad settings: %d", r.Code)
	}
	if fieldError(r.Body, "hostname") == "" || fieldError(r.Body, "remote_syslog.port") == "" {
		t.Errorf("no messages under hostname (%q) and syslog port (%q)", fieldError(r.Body, "hostname"), fieldError(r.Body, "remote_syslog.port"))
	}
	r = b.post("/system/settings", url.Values{"hostname": {"gw-berlin"}, "timezone": {"Europe/Berlin"},
		"ntp_servers": {"0.pool.ntp.org\n1.pool.ntp.org"}, "remote_syslog.host": {""}, "remote_syslog.port": {""}, "remote_syslog.protocol": {""}})
	if r.Code != http.StatusSeeOther {
		t.Fatalf("good settings: %d %s", r.Code, r.Body)
	}
	cand, _ := h.store.Candidate()
	if cand.System.Hostname != "gw-berlin" || len(cand.System.NTPServers) != 2 {
		t.Errorf("candidate system %+v", cand.System)
	}

	// Password: the current one is needed, and the new one is committed
	// at once when nothing else is pending.
	b.post("/changes/discard", nil)
	r = b.post("/system/password", url.Values{"current": {"wrong"}, "new": {"another password"}, "repeat": {"another password"}})
	if r.Code != http.StatusUnprocessableEntity || !strings.Contains(r.Body, "not your current password") {
		t.Errorf("password change with a wrong current password: %d", r.Code)
	}
	other := h.browser()
	other.login()
	r = b.post("/system/password", url.Values{"current": {testPassword}, "new": {"another password"}, "repeat": {"another password"}})
	if msg := b.flashOf(r); !strings.Contains(msg, "Password changed") {
		t.Fatalf("password change said %q", msg)
	}
	if r := other.get("/"); r.Code != http.StatusSeeOther {
		t.Error("another session of the same account survived the password change")
	}
	if r := h.browser().tryLogin(testAdmin, "another password"); r.Code != http.StatusSeeOther {
		t.Errorf("login with the new password: %d", r.Code)
	}
}

func TestFirewallAndInterfaces(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()
	rule := url.Values{"name": {"ssh-in"}, "enabled": {"true"}, "chain": {"input"}, "action": {"accept"}, "in": {"lan"},
		"protocol": {"tcp"}, "destination_ports": {"22"}}
	if r := b.post("/firewall/rules/new", rule); r.Code != http.StatusSeeOther {
		t.Fatalf("new rule: %d %s", r.Code, r.Body)
	}
	rule.Set("name", "web-out")
	rule.Set("chain", "forward")
	rule.Set("destination_ports", "443")
	b.post("/firewall/rules/new", rule)
	bad := url.Values{"name": {"bad"}, "chain": {"input"}, "action": {"accept"}, "protocol": {"icmp"}, "destination_ports": {"22"}, "out": {"wan"}}
	r := b.post("/firewall/rules/new", bad)
	if !strings.Contains(fieldError(r.Body, "protocol"), "ports need tcp or udp") || fieldError(r.Body, "out") == "" {
		t.Errorf("bad rule errors: protocol %q, out %q", fieldError(r.Body, "protocol"), fieldError(r.Body, "out"))
	}
	b.post("/firewall/rules/web-out/move", url.Values{"direction": {"up"}})
	cand, _ := h.store.Candidate()
	if len(cand.Firewall.Rules) != 2 || cand.Firewall.Rules[0].Name != "web-out" {
		t.Errorf("rules after moving web-out up: %+v", cand.Firewall.Rules)
	}
	fwd := url.Values{"name": {"ike"}, "enabled": {"true"}, "in": {"wan"}, "protocol": {"udp"}, "external_ports": {"500"}, "destination": {"192.168.1.5"}}
	if r := b.post("/firewall/port-forwards/new", fwd); !strings.Contains(fieldError(r.Body, "external_ports"), "IKE") {
		t.Errorf("forwarding udp 500 from the WAN: %q, want a refusal naming IKE", fieldError(r.Body, "external_ports"))
	}
	if r := b.post("/firewall/nat-exemptions/new", url.Values{"name": {"partner"}, "destinations": {""}}); !strings.Contains(fieldError(r.Body, "destinations"), "At least one destination") {
		t.Errorf("NAT exemption without destinations: %q", fieldError(r.Body, "destinations"))
	}
	if r := b.post("/firewall/nat-exemptions/new", url.Values{"name": {"partner"}, "destinations": {"172.16.0.0/12"}}); r.Code != http.StatusSeeOther {
		t.Errorf("NAT exemption: %d", r.Code)
	}
	page := b.get("/firewall")
	mustContain(t, "firewall page", page.Body, "ssh-in", "web-out", "lan-out-eth0", "partner", "172.16.0.0/12")

	ifc := url.Values{"description": {"office LAN"}, "enabled": {"true"}, "role": {"lan"}, "addressing": {"static"},
		"addresses": {"192.168.1.1/24\n192.168.1.0/24"}, "mtu": {"100"}}
	r = b.post("/interfaces/eth1/edit", ifc)
	if fieldError(r.Body, "addresses") == "" || fieldError(r.Body, "mtu") == "" {
		t.Errorf("bad interface: addresses %q, mtu %q", fieldError(r.Body, "addresses"), fieldError(r.Body, "mtu"))
	}
	ifc.Set("addresses", "192.168.7.1/24")
	ifc.Set("mtu", "")
	if r := b.post("/interfaces/eth1/edit", ifc); r.Code != http.StatusSeeOther {
		t.Fatalf("interface edit: %d", r.Code)
	}
	page = b.get("/interfaces")
	mustContain(t, "interfaces page", page.Body, "office LAN", "192.168.7.1/24", "eth0")
	if r := b.post("/interfaces/new", nil); r.Code != http.StatusUnprocessableEntity || fieldError(r.Body, "name") == "" {
		t.Errorf("Add port without a name: %d, name error %q; want 422 with the error at the name", r.Code, fieldError(r.Body, "name"))
	}
}

// The System page names the running kernel, whose release says which
// Debian source it was built from.
func TestSystemShowsKernel(t *testing.T) {
	h := newHarness(t, true, func(o *Options) { o.Board.Kernel = "6.1.192-3-flashgate" })
	b := h.browser()
	b.login()
	r := b.get("/system")
	if r.Code != http.StatusOK || !strings.Contains(r.Body, "Linux 6.1.192-3-flashgate") {
		t.Errorf("System page (%d) does not name the kernel", r.Code)
	}
}
