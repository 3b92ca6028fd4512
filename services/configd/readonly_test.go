package configd_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/services/configd"
	"github.com/flashgate/flashgate/services/configd/configdapi"
)

// serveReadOnly adds iked's read-only API over e's store.
func serveReadOnly(t *testing.T, e *env) *env {
	t.Helper()
	return serveAnother(t, e, "read.sock", configd.ReadOnly())
}

// iked reads the running configuration with its PSKs and follows it
// through the read-only socket, and can do nothing else there: a process
// taken over through iked's packet parsing cannot change the
// configuration, read drafts or stored files, or try passwords.
func TestReadOnlyAPIReadsRunningAndChangesNothing(t *testing.T) {
	full := serve(t)
	ro := serveReadOnly(t, full)
	ctx := context.Background()
	commitTunnelAndAdmin(t, ctx, full.c, "tunnel")
	if _, err := full.c.PutFile(ctx, "ssh_host_key", []byte("PRIVATE KEY")); err != nil {
		t.Fatal(err)
	}

	running, rev, err := ro.c.Running(ctx)
	if err != nil {
		t.Fatalf("running configuration on the read-only socket: %v", err)
	}
	if len(running.Tunnels) == 0 {
		t.Fatalf("running configuration (revision %d) has no tunnel", rev)
	}
	for name, tun := range running.Tunnels {
		if tun.PSK.Reveal() != pskInTest {
			t.Errorf("tunnel %v: PSK %q on the read-only socket, want the key itself (iked needs it)", name, tun.PSK.Reveal())
		}
	}
	if code, body := ro.raw(t, "GET", "/v1/status", ""); code != http.StatusOK {
		t.Errorf("GET /v1/status: %d %s", code, body)
	}

	for _, req := range []struct{ method, path, body string }{
		{"GET", "/v1/candidate", ""},
		{"PUT", "/v1/candidate", "{}"},
		{"POST", "/v1/candidate/set", `{"path":"system.hostname","value":"owned"}`},
		{"POST", "/v1/candidate/password", `{"user":"admin","password":"attacker-chosen-pw"}`},
		{"POST", "/v1/commit", "{}"},
		{"POST", "/v1/rollback", "{}"},
		{"POST", "/v1/factory-reset", "{}"},
		{"POST", "/v1/export", `{"secrets":"included"}`},
		{"POST", "/v1/verify-password", `{"user":"admin","password":"guess"}`},
		{"GET", "/v1/files/ssh_host_key", ""},
		{"GET", "/v1/history/1", ""},
		{"GET", "/v1//running/../candidate", ""},
	} {
		code, body := ro.raw(t, req.method, req.path, req.body)
		if code != http.StatusForbidden {
			t.Errorf("%s %s on the read-only socket: %d %s, want 403", req.method, req.path, code, body)
		}
		if strings.Contains(body, "PRIVATE KEY") {
			t.Errorf("%s %s hands out a stored file", req.method, req.path)
		}
	}
	if _, rev2, _ := full.c.Running(ctx); rev2 != rev {
		t.Errorf("the running revision moved from %d to %d", rev, rev2)
	}

	// The watch stream: a commit made on the full socket arrives.
	watchSeesCommit(t, ctx, full.c, ro.c)
}

// netd reads the running configuration through the read-only socket
// without secrets (ReadOnly and Restricted together): it gets the tunnels
// (its firewall lets their peers in) but no key, no password hash, no
// stored file, and it can change nothing. A process taken over through
// netd's DHCP parsing learns no PSK to impersonate the box with.
func TestRedactedReadOnlyAPIHandsOutNoSecretsAndChangesNothing(t *testing.T) {
	full := serve(t)
	red := serveAnother(t, full, "redacted.sock", configd.ReadOnly(), configd.Restricted())
	ctx := context.Background()
	commitTunnelAndAdmin(t, ctx, full.c, "tunnel")
	if _, err := full.c.PutFile(ctx, "webui.key", []byte("WEB KEY")); err != nil {
		t.Fatal(err)
	}
	clear, rev, _ := full.c.Running(ctx)
	hash := clear.System.Admins[0].PasswordHash.Reveal()

	running, rev2, err := red.c.Running(ctx)
	if err != nil || rev2 != rev {
		t.Fatalf("running configuration on the redacted socket: revision %d (%v), want %d", rev2, err, rev)
	}
	if len(running.Tunnels) != len(clear.Tunnels) || len(running.Tunnels) == 0 {
		t.Fatalf("the redacted socket shows %d tunnels, want %d", len(running.Tunnels), len(clear.Tunnels))
	}
	for name, tun := range running.Tunnels {
		if !configdapi.IsPSKMark(tun.PSK.Reveal()) {
			t.Errorf("tunnel %v: PSK %q on the redacted socket, want a mark", name, tun.PSK.Reveal())
		}
	}
	for _, path := range []string{"/v1/running", "/v1/running?format=text", "/v1/status"} {
		code, body := red.raw(t, "GET", path, "")
		if code != http.StatusOK {
			t.Errorf("GET %s on the redacted socket: %d %s", path, code, body)
		}
		for _, secret := range []string{pskInTest, hash} {
			if strings.Contains(body, secret) {
				t.Errorf("GET %s on the redacted socket hands out %q", path, secret)
			}
		}
	}
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/v1/candidate", ""},
		{"POST", "/v1/candidate/set", `{"path":"system.hostname","value":"owned"}`},
		{"POST", "/v1/commit", "{}"},
		{"POST", "/v1/export", `{"secrets":"none"}`},
		{"POST", "/v1/verify-password", `{"user":"admin","password":"guess"}`},
		{"GET", "/v1/files/webui.key", ""},
		{"GET", "/v1/history/1", ""},
	} {
		if code, body := red.raw(t, req.method, req.path, req.body); code != http.StatusForbidden || strings.Contains(body, "WEB KEY") {
			t.Errorf("%s %s on the redacted socket: %d %s, want 403", req.method, req.path, code, body)
		}
	}

	// The watch stream: a commit made on the full socket arrives.
	watchSeesCommit(t, ctx, full.c, red.c)
}
