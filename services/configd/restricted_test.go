package configd_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd"
)

// serveRestricted adds the web UI's restricted API over e's store.
func serveRestricted(t *testing.T, e *env) *env {
	t.Helper()
	return serveAnother(t, e, "web.sock", configd.Restricted())
}

// serveAnother serves a second API over e's store on socket name, next
// to e's, made with opts (configd's restricted or read-only one).
func serveAnother(t *testing.T, e *env, name string, opts ...configd.ServerOption) *env {
	t.Helper()
	sock := filepath.Join(filepath.Dir(e.socket), name)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	api := configd.NewServer(e.store, "card", "", t.Logf, opts...)
	srv := &http.Server{Handler: api}
	go srv.Serve(ln)
	t.Cleanup(func() { api.StopWatches(); srv.Close() })
	return &env{store: e.store, socket: sock, c: configdapi.New(sock)}
}

const pskInTest = "a-very-long-preshared-key"

// No secret leaves configd through the web UI's socket, whatever is
// asked: configurations, revisions, exports, files. Edits sent back with
// the marks keep the secrets; a mark that stands for nothing and a raw
// password hash are refused.
func TestRestrictedAPIHandsOutNoSecrets(t *testing.T) {
	full := serve(t)
	web := serveRestricted(t, full)
	ctx := context.Background()
	commitTunnelAndAdmin(t, ctx, full.c, "tunnel")
	if _, err := full.c.PutFile(ctx, "ssh_host_key", []byte("PRIVATE KEY")); err != nil {
		t.Fatal(err)
	}
	if _, err := full.c.PutFile(ctx, "webui.key", []byte("WEB KEY")); err != nil {
		t.Fatal(err)
	}
	running, _, _ := full.c.Running(ctx)
	hash := running.System.Admins[0].PasswordHash.Reveal()

	leaks := func(what, body string) {
		t.Helper()
		for _, secret := range []string{pskInTest, hash, "PRIVATE KEY"} {
			if strings.Contains(body, secret) {
				t.Errorf("%s hands out %q", what, secret)
			}
		}
	}
	for _, path := range []string{"/v1/running", "/v1/running/system", "/v1/candidate", "/v1/history/2", "/v1/running?format=text", "/v1/files/ssh_host_key"} {
		_, body := web.raw(t, "GET", path, "")
		leaks("GET "+path, body)
	}
	if code, body := web.raw(t, "GET", "/v1/files/ssh_host_key", ""); code != http.StatusForbidden {
		t.Errorf("GET a stored key other than the web UI's: %d %s, want 403", code, body)
	}
	if data, err := web.c.File(ctx, "webui.key"); err != nil || string(data) != "WEB KEY" {
		t.Errorf("the web UI's own key: %q, %v", data, err)
	}
	code, body := web.raw(t, "POST", "/v1/export", `{"secrets":"included"}`)
	leaks("export", body)
	if code != http.StatusForbidden {
		t.Errorf("export with secrets in the clear: %d, want 403", code)
	}

	// Round trip: the candidate as shown, sent back (with a tunnel
	// renamed), keeps the real secrets.
	cand, err := web.c.Candidate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	shown := cand.Config
	if p := shown.Tunnel("branch").PSK.Reveal(); p == "" || p == pskInTest {
		t.Fatalf("PSK shown as %q, want a redaction mark", p)
	}
	shown.Tunnels[0].Name = "branch2"
	if _, err := web.c.ReplaceCandidate(ctx, cand.Etag, shown); err != nil {
		t.Fatalf("send the shown candidate back: %v", err)
	}
	real, _ := full.store.Candidate()
	if real.Tunnel("branch2") == nil || real.Tunnel("branch2").PSK.Reveal() != pskInTest || real.System.Admins[0].PasswordHash.Reveal() != hash {
		t.Error("the round trip through the web UI's socket lost a secret")
	}
	// A set through the path setter keeps them too.
	if _, err := web.c.Set(ctx, "", "tunnels.branch2.remote_address", "192.0.2.7"); err != nil {
		t.Fatal(err)
	}
	if real, _ := full.store.Candidate(); real.Tunnel("branch2").PSK.Reveal() != pskInTest {
		t.Error("a set through the web UI's socket lost the PSK")
	}

	// A raw hash (one the web UI could have made up) is refused.
	weak, _ := config.HashPassword("guessable")
	cand, _ = web.c.Candidate(ctx)
	forged := cand.Config
	forged.System.Admins[0].PasswordHash = config.NewSecret(weak)
	if _, err := web.c.ReplaceCandidate(ctx, cand.Etag, forged); err == nil || !strings.Contains(err.Error(), "password") {
		t.Errorf("a raw password hash through the web UI's socket: %v, want it refused", err)
	}
	// A mark that stands for no key is refused.
	cand, _ = web.c.Candidate(ctx)
	stale := cand.Config
	stale.Tunnels[0].PSK = config.NewSecret("redacted:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	if _, err := web.c.ReplaceCandidate(ctx, cand.Etag, stale); err == nil {
		t.Error("a mark that stands for no key was accepted")
	}

	// Passwords are checked in configd.
	for _, c := range []struct {
		user, pass string
		want       bool
	}{{"admin", "correct horse battery", true}, {"admin", "wrong", false}, {"nobody", "correct horse battery", false}} {
		if ok, err := web.c.VerifyPassword(ctx, c.user, c.pass); err != nil || ok != c.want {
			t.Errorf("verify %s/%s: %v, %v; want %v", c.user, c.pass, ok, err, c.want)
		}
	}
	// The full socket is unchanged.
	if r, _, _ := full.c.Running(ctx); r.Tunnel("branch").PSK.Reveal() != pskInTest {
		t.Error("the full API no longer hands configd's own clients the PSK")
	}
}

// On the web UI's socket a factory reset, an import and an export with
// secrets need an admin's current password in the request, which configd
// checks itself: without it or with a wrong one they are refused with
// CodeWrongPassword and nothing changes. Root's socket needs none.
func TestRestrictedAPINeedsThePasswordForWholesaleActions(t *testing.T) {
	full := serve(t)
	web := serveRestricted(t, full)
	ctx := context.Background()
	commitTunnelAndAdmin(t, ctx, full.c, "tunnel")
	backup, err := full.c.Export(ctx, config.SecretsEncrypted, "a long passphrase")
	if err != nil {
		t.Fatalf("export on root's socket: %v", err)
	}
	wrongPassword := func(what string, err error) {
		t.Helper()
		var apiErr *configdapi.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != configdapi.CodeWrongPassword || apiErr.Status != http.StatusForbidden {
			t.Errorf("%s: %v, want refused for the password (403 %s)", what, err, configdapi.CodeWrongPassword)
		}
	}
	for _, c := range []struct {
		name string
		c    *configdapi.Client
	}{{"no password", web.c}, {"a wrong password", web.c.WithPassword("admin", "not it")}, {"an unknown user", web.c.WithPassword("root", "correct horse battery")}} {
		_, err := c.c.Export(ctx, config.SecretsEncrypted, "a long passphrase")
		wrongPassword("export with secrets, "+c.name, err)
		cand, _ := web.c.Candidate(ctx)
		_, err = c.c.Import(ctx, cand.Etag, backup, "a long passphrase")
		wrongPassword("import, "+c.name, err)
		_, err = c.c.FactoryReset(ctx, "t")
		wrongPassword("factory reset, "+c.name, err)
	}
	if running, _ := full.store.Running(); running.Admin("admin") == nil || running.Tunnel("branch") == nil {
		t.Fatal("a refused factory reset changed the configuration")
	}
	if _, err := web.c.Export(ctx, config.SecretsOmitted, ""); err != nil {
		t.Errorf("export without secrets needs no password: %v", err)
	}
	withPassword := web.c.WithPassword("admin", "correct horse battery")
	if _, err := withPassword.Export(ctx, config.SecretsEncrypted, "a long passphrase"); err != nil {
		t.Errorf("export with secrets and the password: %v", err)
	}
	if _, err := withPassword.FactoryReset(ctx, "t"); err != nil {
		t.Errorf("factory reset with the password: %v", err)
	}
	if running, _ := full.store.Running(); running.Admin("admin") != nil {
		t.Error("the factory reset with the password did not reset")
	}
}
