package webui

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A backup with secrets, a restore and a factory reset need the current
// password again, on the pages and in the API: without it or with a wrong
// one nothing happens and the page says why. (The firmware upload's
// re-authentication is in TestUpgradeAPI.)
func TestReauthenticationGuardsTheDangerousActions(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()
	b.post("/tunnels/new", tunnelForm("branch"))
	b.post("/changes/commit", url.Values{"mode": {"plain"}})

	// Backup with secrets: the page.
	backup := func(password string) response {
		form := url.Values{"secrets": {"encrypted"}, "passphrase": {"a long passphrase"}}
		if password != "" {
			form.Set("password", password)
		}
		return b.post("/system/backup", form)
	}
	if msg := b.flashOf(backup("")); !strings.Contains(msg, "Backup refused") || !strings.Contains(msg, "Enter your current password") {
		t.Errorf("backup with secrets and no password: %q", msg)
	}
	if msg := b.flashOf(backup("not the password")); !strings.Contains(msg, "Wrong password") {
		t.Errorf("backup with secrets and a wrong password: %q", msg)
	}
	r := backup(testPassword)
	if r.Code != http.StatusOK || !strings.Contains(r.Body, `"flashgate-backup"`) {
		t.Fatalf("backup with secrets and the password: %d %.200s", r.Code, r.Body)
	}
	good := []byte(r.Body)
	if r := b.post("/system/backup", url.Values{"secrets": {"omitted"}}); r.Code != http.StatusOK {
		t.Errorf("backup without secrets needs no password, got %d", r.Code)
	}
	// The API.
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"secrets":"encrypted","passphrase":"a long passphrase"}`, http.StatusUnauthorized},
		{`{"secrets":"encrypted","passphrase":"a long passphrase","password":"nope"}`, http.StatusForbidden},
	} {
		if r, _ := b.api("POST", "/api/v1/system/backup", tc.body); r.Code != tc.want || strings.Contains(r.Body, "flashgate-backup") {
			t.Errorf("API backup %s: %d %.200s, want %s", tc.body, r.Code, r.Body, strconv.Itoa(tc.want))
		}
	}
	if r, _ := b.api("POST", "/api/v1/system/backup", `{"secrets":"encrypted","passphrase":"a long passphrase","password":"`+testPassword+`"}`); r.Code != http.StatusOK {
		t.Errorf("API backup with the password: %d %.200s", r.Code, r.Body)
	}

	// Restore: refused before configd sees the file.
	b.post("/tunnels/branch/delete", nil)
	b.post("/changes/commit", url.Values{"mode": {"plain"}})
	for _, pw := range []string{"", "not the password"} {
		msg := b.flashOf(b.uploadWithPassword("/system/restore", good, "a long passphrase", pw))
		if !strings.Contains(msg, "Restore refused, nothing was changed") || !strings.Contains(msg, "password") {
			t.Errorf("restore with password %q: %q", pw, msg)
		}
	}
	if cand, _ := h.store.Candidate(); cand.Tunnel("branch") != nil {
		t.Fatal("a restore without the password changed the candidate")
	}
	if msg := b.flashOf(b.upload("/system/restore", good, "a long passphrase")); !strings.Contains(msg, "pending configuration") {
		t.Errorf("restore with the password: %q", msg)
	}
	b.post("/changes/discard", nil)

	// Factory reset: the API, then the page.
	if r, _ := b.api("POST", "/api/v1/system/factory-reset", `{"confirm":"factory-reset"}`); r.Code != http.StatusUnauthorized {
		t.Errorf("API factory reset without the password: %d %s", r.Code, r.Body)
	}
	if r, _ := b.api("POST", "/api/v1/system/factory-reset", `{"confirm":"factory-reset","password":"nope"}`); r.Code != http.StatusForbidden || !strings.Contains(r.Body, "Wrong password") {
		t.Errorf("API factory reset with a wrong password: %d %s", r.Code, r.Body)
	}
	if msg := b.flashOf(b.post("/system/factory-reset", url.Values{"confirm": {"factory-reset"}, "password": {"nope"}})); !strings.Contains(msg, "Factory reset refused") {
		t.Errorf("factory reset with a wrong password: %q", msg)
	}
	if running, _ := h.store.Running(); running.Admin(testAdmin) == nil {
		t.Fatal("a factory reset with a wrong password reset the box")
	}
	if r := b.post("/system/factory-reset", url.Values{"confirm": {"factory-reset"}, "password": {testPassword}}); r.Code != http.StatusSeeOther || r.Location != "/login" {
		t.Errorf("factory reset with the password: %d to %q", r.Code, r.Location)
	}
	if running, _ := h.store.Running(); running.Admin(testAdmin) != nil {
		t.Error("the factory reset with the password did not reset")
	}
}

// A wrong password given to re-authenticate counts as a failed login: it
// is logged with the action's name, and enough of them lock the address
// out of logins and re-authentication alike.
func TestReauthenticationCountsAgainstTheLoginLimiter(t *testing.T) {
	var logs logCapture
	h := newHarness(t, true, func(o *Options) { o.Logf = logs.Logf })
	b := h.browser()
	b.login()
	for i := 0; i < 5; i++ {
		b.api("POST", "/api/v1/system/factory-reset", `{"confirm":"factory-reset","password":"guess`+string(rune('a'+i))+`"}`)
	}
	r, _ := b.api("POST", "/api/v1/system/factory-reset", `{"confirm":"factory-reset","password":"`+testPassword+`"}`)
	if r.Code != http.StatusTooManyRequests || !strings.Contains(r.Body, "Too many wrong passwords") {
		t.Errorf("factory reset with the right password after 5 wrong ones: %d %s, want 429", r.Code, r.Body)
	}
	if running, _ := h.store.Running(); running.Admin(testAdmin) == nil {
		t.Fatal("the locked-out address reset the box")
	}
	if r := h.browser().tryLogin(testAdmin, testPassword); r.Location == "/" {
		t.Error("the address that guessed passwords through re-authentication can still log in at once")
	}
	if !logs.contains(`factory reset of "admin" from 127.0.0.1 failed: wrong password`) || !logs.contains("locked out") {
		t.Errorf("log: %q; want the failed re-authentications and the lockout", logs.all())
	}
}

// logCapture keeps what the server logs.
type logCapture struct {
	mu    sync.Mutex
	lines []string
}

func (l *logCapture) Logf(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *logCapture) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func (l *logCapture) contains(s string) bool { return strings.Contains(l.all(), s) }
