package configd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd"
)

// shortDir returns a temporary directory with a path short enough for a
// unix socket (108 bytes).
func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "cfgd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

type env struct {
	store  *config.Store
	socket string
	c      *configdapi.Client
}

// serve runs the API for a fresh store on a real unix socket.
func serve(t *testing.T) *env {
	t.Helper()
	dir := shortDir(t)
	store, err := config.Open(filepath.Join(dir, "config.db"), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	api := configd.NewServer(store, "card", "", t.Logf)
	srv := &http.Server{Handler: api}
	go srv.Serve(ln)
	t.Cleanup(func() {
		api.StopWatches()
		srv.Close()
		store.Close()
	})
	return &env{store: store, socket: sock, c: configdapi.New(sock)}
}

// raw sends a request with a literal body and returns status and body.
func (e *env) raw(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", e.socket)
	}}}
	req, _ := http.NewRequest(method, "http://configd"+path, strings.NewReader(body))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// commitTunnelAndAdmin commits addTunnel's tunnel and an admin password
// (the secrets the narrower sockets must not hand out) through c.
func commitTunnelAndAdmin(t *testing.T, ctx context.Context, c *configdapi.Client, message string) {
	t.Helper()
	etag := addTunnel(t, ctx, c, "")
	if _, err := c.SetPassword(ctx, etag, "admin", "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Commit(ctx, configdapi.CommitRequest{Who: "t", Message: message}); err != nil {
		t.Fatal(err)
	}
}

// watchSeesCommit checks that a commit made through full arrives on
// watcher's watch stream, after the first event ("current").
func watchSeesCommit(t *testing.T, ctx context.Context, full, watcher *configdapi.Client) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	changes := watcher.Watch(wctx)
	if first, ok := <-changes; !ok || first.Reason != "current" {
		t.Fatalf("first watch event %+v (open %v), want current", first, ok)
	}
	if _, err := full.Set(ctx, "", "tunnels.branch.remote_address", "192.0.2.7"); err != nil {
		t.Fatal(err)
	}
	if _, err := full.Commit(ctx, configdapi.CommitRequest{Who: "t", Message: "second"}); err != nil {
		t.Fatal(err)
	}
	if ch, ok := <-changes; !ok || ch.Reason == "current" {
		t.Errorf("after a commit the watch stream gave %+v (open %v), want the commit", ch, ok)
	}
}

func addTunnel(t *testing.T, ctx context.Context, c *configdapi.Client, etag string) string {
	t.Helper()
	steps := []struct {
		path   string
		values []string
	}{
		{"tunnels.branch.remote_address", []string{"192.0.2.1"}},
		{"tunnels.branch.psk", []string{"a-very-long-preshared-key"}},
		{"tunnels.branch.local_subnets", []string{"192.168.1.0/24"}},
		{"tunnels.branch.remote_subnets", []string{"10.2.0.0/16", "10.3.0.0/16"}},
	}
	for _, s := range steps {
		var err error
		if etag, err = c.Set(ctx, etag, s.path, s.values...); err != nil {
			t.Fatalf("set %s: %v", s.path, err)
		}
	}
	return etag
}

func TestAPIEditDiffCommit(t *testing.T) {
	e := serve(t)
	ctx := context.Background()
	st, err := e.c.Status(ctx)
	if err != nil || st.Revision != 1 || st.Schema != config.SchemaVersion {
		t.Fatalf("status = %+v, %v", st, err)
	}
	cand, err := e.c.Candidate(ctx)
	if err != nil || cand.Changed || len(cand.Errors) != 0 {
		t.Fatalf("fresh candidate = %+v, %v", cand, err)
	}
	etag, err := e.c.Set(ctx, cand.Etag, "tunnels.branch.remote_address", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	// Half-built tunnel: the candidate says what is missing.
	errs, err := e.c.Validate(ctx)
	if err != nil || len(errs) == 0 || errs[0].Path != "tunnels[branch].psk" {
		t.Fatalf("validate half-built tunnel: %v, %v", errs, err)
	}
	etag = addTunnel(t, ctx, e.c, etag)
	diff, err := e.c.Diff(ctx, "running", "candidate")
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, d := range diff {
		text = append(text, d.Op+" "+d.Line)
	}
	joined := strings.Join(text, "\n")
	for _, want := range []string{"+ set tunnels branch remote_address 192.0.2.1", "+ set tunnels branch psk <redacted>", "+ set tunnels branch remote_subnets 10.3.0.0/16"} {
		if !strings.Contains(joined, want) {
			t.Errorf("diff lacks %q:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "a-very-long") {
		t.Error("diff shows the PSK")
	}
	info, err := e.c.Commit(ctx, configdapi.CommitRequest{Etag: etag, Who: "alice", Message: "branch office"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Revision != 2 || fmt.Sprint(info.Sections) != "[tunnels]" {
		t.Errorf("commit = %+v", info)
	}
	running, rev, err := e.c.Running(ctx)
	if err != nil || rev != 2 || running.Tunnel("branch").PSK.Reveal() != "a-very-long-preshared-key" {
		t.Fatalf("running after commit: rev %d, %v", rev, err)
	}
	txt, _ := e.c.RunningText(ctx)
	if !strings.Contains(txt, "set tunnels branch psk <redacted>\n") {
		t.Errorf("running text:\n%s", txt)
	}
	h, err := e.c.History(ctx)
	if err != nil || len(h) != 2 || h[0].Who != "alice" {
		t.Fatalf("history = %+v, %v", h, err)
	}
	old, oldInfo, err := e.c.Revision(ctx, 1)
	if err != nil || len(old.Tunnels) != 0 || oldInfo.Revision != 1 {
		t.Fatalf("revision 1: %v %v", oldInfo, err)
	}
	if _, err := e.c.Commit(ctx, configdapi.CommitRequest{Who: "alice"}); !errors.Is(err, config.ErrNoChanges) {
		t.Errorf("empty commit: %v", err)
	}
	if _, _, err := e.c.Revision(ctx, 77); !errors.Is(err, config.ErrNoRevision) {
		t.Errorf("missing revision: %v", err)
	}
}

func TestAPITwoWriters(t *testing.T) {
	e := serve(t)
	ctx := context.Background()
	alice, bob := e.c, configdapi.New(e.socket)
	a, _ := alice.Candidate(ctx)
	b, _ := bob.Candidate(ctx)
	etagA, err := alice.Set(ctx, a.Etag, "system.hostname", "alice")
	if err != nil {
		t.Fatal(err)
	}
	_, err = bob.Set(ctx, b.Etag, "system.hostname", "bob")
	var ae *configdapi.APIError
	if !errors.Is(err, config.ErrCandidateChanged) || !errors.As(err, &ae) || ae.Status != http.StatusConflict ||
		ae.Message != "the candidate changed since you read it" {
		t.Fatalf("stale set: %v", err)
	}
	if _, err := bob.Commit(ctx, configdapi.CommitRequest{Etag: b.Etag, Who: "bob"}); !errors.Is(err, config.ErrCandidateChanged) {
		t.Fatalf("stale commit: %v", err)
	}
	if _, err := alice.Commit(ctx, configdapi.CommitRequest{Etag: etagA, Who: "alice"}); err != nil {
		t.Fatal(err)
	}
}

func TestAPIValidationErrorsCarryPaths(t *testing.T) {
	e := serve(t)
	ctx := context.Background()
	etag := addTunnel(t, ctx, e.c, "")
	etag, err := e.c.Set(ctx, etag, "tunnels.branch.esp_proposals", "3des-sha1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.c.Commit(ctx, configdapi.CommitRequest{Etag: etag, Who: "a"})
	var ve config.ValidationErrors
	if !errors.As(err, &ve) || ve[0].Path != "tunnels[branch].esp_proposals[0]" || !strings.Contains(ve[0].Message, "legacy_algorithms true") {
		t.Fatalf("commit with 3des: %v", err)
	}
	// A bad value is refused at the edit, with its path.
	_, err = e.c.Set(ctx, "", "tunnels.branch.remote_subnets", "10.0.0.0/33")
	var ae *configdapi.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || len(ae.Fields) != 1 || ae.Fields[0].Path != "tunnels.branch.remote_subnets" ||
		!strings.Contains(ae.Fields[0].Message, "10.0.0.0/33 is not a network") {
		t.Fatalf("set bad subnet: %#v", err)
	}
}

func TestAPIBadInput(t *testing.T) {
	e := serve(t)
	huge := `{"path":"system.hostname","values":["` + strings.Repeat("x", 70<<10) + `"]}`
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"invalid JSON", "POST", "/v1/candidate/set", `{"path":`, 400, "request body"},
		{"unknown field", "POST", "/v1/candidate/set", `{"path":"system.hostname","value":"x"}`, 400, `unknown field \"value\"`},
		{"trailing data", "POST", "/v1/commit", `{"who":"a"} {"who":"b"}`, 400, "data after the JSON document"},
		{"oversized", "POST", "/v1/candidate/set", huge, 413, "too_large"},
		{"oversized document", "PUT", "/v1/candidate", `{"system":{"hostname":"` + strings.Repeat("x", 1200<<10) + `"}}`, 413, "too_large"},
		{"unknown config field", "PUT", "/v1/candidate", `{"system":{"hostnam":"x"}}`, 400, "hostnam"},
		{"wrong type", "PUT", "/v1/candidate", `{"interfaces":[{"name":"eth0","mtu":"big"}]}`, 400, "interfaces.mtu"},
		{"bad patch", "PATCH", "/v1/candidate", `[1,2`, 400, "invalid JSON"},
		{"bad confirm timeout", "POST", "/v1/commit", `{"who":"a","confirm_timeout":"forever"}`, 400, "confirm_timeout"},
		{"factory reset unconfirmed", "POST", "/v1/factory-reset", `{"who":"a"}`, 400, "factory-reset"},
		{"bad revision", "GET", "/v1/history/abc", ``, 400, "not a revision number"},
		{"bad diff target", "GET", "/v1/diff?from=yesterday", ``, 400, "not running, candidate or a revision number"},
		{"import garbage", "POST", "/v1/import", `{"backup":"hello"}`, 400, "expected a JSON object"},
		{"wrong method", "DELETE", "/v1/running", ``, 405, ""},
	}
	for _, tt := range tests {
		status, body := e.raw(t, tt.method, tt.path, tt.body)
		if status != tt.status || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %d %s; want %d and %q", tt.name, status, strings.TrimSpace(body), tt.status, tt.want)
		}
	}
	if c, _ := e.store.Candidate(); c.System.Hostname != "flashgate" {
		t.Errorf("bad input changed the candidate: hostname %q", c.System.Hostname)
	}
}

func TestAPIWatchAndConfirm(t *testing.T) {
	e := serve(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes := e.c.Watch(ctx)
	next := func() config.Change {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-time.After(5 * time.Second):
			t.Fatal("no change from the watch stream")
		}
		return config.Change{}
	}
	if c := next(); c.Reason != "current" || c.Revision != 1 || len(c.Sections) != len(config.Sections) {
		t.Fatalf("first watch message = %+v", c)
	}
	etag := addTunnel(t, ctx, e.c, "")
	info, err := e.c.Commit(ctx, configdapi.CommitRequest{Etag: etag, Who: "a", ConfirmTimeout: "10m"})
	if err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Revision != info.Revision || c.Reason != "commit-confirmed" || fmt.Sprint(c.Sections) != "[tunnels]" {
		t.Errorf("change = %+v", c)
	}
	st, _ := e.c.Status(ctx)
	if st.Pending == nil || st.Pending.Revision != info.Revision {
		t.Fatalf("status pending = %+v", st.Pending)
	}
	if err := e.c.Confirm(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Confirm(ctx); !errors.Is(err, config.ErrNothingPending) {
		t.Errorf("second confirm: %v", err)
	}
	if _, err := e.c.Rollback(ctx, 1, "b"); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Reason != "rollback" || c.Who != "b" {
		t.Errorf("change after rollback = %+v", c)
	}
}

func TestAPIExportImportPasswordReset(t *testing.T) {
	e := serve(t)
	ctx := context.Background()
	etag := addTunnel(t, ctx, e.c, "")
	etag, err := e.c.SetPassword(ctx, etag, "admin", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.SetPassword(ctx, etag, "admin", "short"); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Errorf("short password: %v", err)
	}
	if _, err := e.c.Commit(ctx, configdapi.CommitRequest{Who: "a"}); err != nil {
		t.Fatal(err)
	}
	running, _, _ := e.c.Running(ctx)
	if a := running.Admin("admin"); a == nil || !a.VerifyPassword("correct horse battery") {
		t.Fatal("admin password not set")
	}

	backup, err := e.c.Export(ctx, config.SecretsEncrypted, "backup passphrase")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(backup, []byte("a-very-long-preshared-key")) || bytes.Contains(backup, []byte("$argon2id")) {
		t.Fatal("encrypted backup holds a secret in the clear")
	}
	if _, err := e.c.FactoryReset(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	cand, _ := e.c.Candidate(ctx)
	if _, err := e.c.Import(ctx, cand.Etag, backup, "wrong passphrase"); err == nil || !strings.Contains(err.Error(), "wrong passphrase") {
		t.Fatalf("import with a wrong passphrase: %v", err)
	}
	if after, _ := e.c.Candidate(ctx); after.Etag != cand.Etag || after.Changed {
		t.Fatal("a refused import changed the candidate")
	}
	if _, err := e.c.Import(ctx, cand.Etag, backup, "backup passphrase"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Commit(ctx, configdapi.CommitRequest{Who: "restore"}); err != nil {
		t.Fatal(err)
	}
	restored, _, _ := e.c.Running(ctx)
	if restored.Tunnel("branch").PSK.Reveal() != "a-very-long-preshared-key" || !restored.Admin("admin").VerifyPassword("correct horse battery") {
		t.Error("restore did not bring the secrets back")
	}
}

func TestAPIPatchAndReplace(t *testing.T) {
	e := serve(t)
	ctx := context.Background()
	etag, err := e.c.PatchCandidate(ctx, "", []byte(`{"system":{"ntp_servers":["192.0.2.123","ntp.example.org"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	cand, _ := e.c.Candidate(ctx)
	if cand.Etag != etag || len(cand.Config.System.NTPServers) != 2 || !cand.Changed {
		t.Fatalf("after patch: %+v", cand.Config.System)
	}
	cfg := cand.Config
	cfg.System.Hostname = "replaced"
	if _, err := e.c.ReplaceCandidate(ctx, "stale-etag", cfg); !errors.Is(err, config.ErrCandidateChanged) {
		t.Fatalf("replace with a stale etag: %v", err)
	}
	if _, err := e.c.ReplaceCandidate(ctx, etag, cfg); err != nil {
		t.Fatal(err)
	}
	if txt, _ := e.c.CandidateText(ctx); !strings.Contains(txt, "set system hostname replaced\n") {
		t.Errorf("candidate text:\n%s", txt)
	}
	if _, err := e.c.Discard(ctx); err != nil {
		t.Fatal(err)
	}
	if cand, _ := e.c.Candidate(ctx); cand.Changed {
		t.Error("candidate still changed after discard")
	}
}

func TestMain_ServesAndRefusesSecondInstance(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, "c.sock")
	db := filepath.Join(dir, "config.db")
	done := make(chan int, 1)
	go func() { done <- configd.Main([]string{"-db", db, "-socket", sock, "-cfg", ""}) }()
	c := configdapi.New(sock)
	ctx := context.Background()
	var st configdapi.Status
	var err error
	for range 100 {
		if st, err = c.Status(ctx); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || st.Database != db || st.Revision != 1 {
		t.Fatalf("status from Main: %+v, %v", st, err)
	}
	fi, _ := os.Stat(sock)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	if rc := configd.Main([]string{"-db", filepath.Join(dir, "other.db"), "-socket", sock, "-cfg", ""}); rc == 0 {
		t.Error("a second configd on the same socket started")
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case rc := <-done:
		if rc != 0 {
			t.Errorf("Main returned %d", rc)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Main did not stop on SIGTERM")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}

func TestMain_CorruptDatabaseIsReported(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, "c.sock")
	db := filepath.Join(dir, "config.db")
	os.WriteFile(db, bytes.Repeat([]byte("junk"), 4096), 0o600)
	go configd.Main([]string{"-db", db, "-socket", sock, "-cfg", ""})
	c := configdapi.New(sock)
	var st configdapi.Status
	var err error
	for range 100 {
		if st, err = c.Status(context.Background()); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || !strings.Contains(st.Recovered, "set-aside") {
		t.Fatalf("status after a corrupt database: %+v, %v", st, err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	time.Sleep(200 * time.Millisecond)
}

func TestWatchReconnectsAfterRestart(t *testing.T) {
	dir := shortDir(t)
	store, err := config.Open(filepath.Join(dir, "config.db"), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sock := filepath.Join(dir, "api.sock")
	start := func() (*configd.Server, *http.Server) {
		os.Remove(sock)
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		api := configd.NewServer(store, "card", "", t.Logf)
		srv := &http.Server{Handler: api}
		go srv.Serve(ln)
		return api, srv
	}
	api, srv := start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes := configdapi.New(sock).Watch(ctx)
	recv := func() config.Change {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no message from the watch stream")
		}
		return config.Change{}
	}
	if c := recv(); c.Reason != "current" {
		t.Fatalf("first message %+v", c)
	}
	// configd goes away and comes back (the supervisor restarted it).
	api.StopWatches()
	srv.Close()
	store.SetPath("", "system.hostname", "while-down")
	if _, err := store.Commit("t", ""); err != nil {
		t.Fatal(err)
	}
	api, srv = start()
	defer func() { api.StopWatches(); srv.Close() }()
	if c := recv(); c.Reason != "current" || c.Revision != 2 {
		t.Fatalf("after reconnecting: %+v, want the current state at revision 2", c)
	}
	cancel()
	for range changes {
	}
}
