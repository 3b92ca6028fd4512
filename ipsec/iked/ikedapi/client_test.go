package ikedapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flashgate/flashgate/ipsec"
)

// serve runs h on a unix socket in a temporary directory.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "iked.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// TestClientNotRunning: no socket, and a socket nobody listens on, are
// ErrNotRunning, with the dial error still in the chain (the console
// shows its cause).
func TestClientNotRunning(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "none.sock")
	stale := filepath.Join(t.TempDir(), "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	for _, path := range []string{missing, stale} {
		_, err := NewClient(path).Tunnels(ctx)
		var op *net.OpError
		if !errors.Is(err, ErrNotRunning) || !errors.As(err, &op) {
			t.Errorf("%s: %v, want ErrNotRunning wrapping the dial error", filepath.Base(path), err)
		}
		if err := NewClient(path).Up(ctx, "x"); !errors.Is(err, ErrNotRunning) {
			t.Errorf("%s: up: %v, want ErrNotRunning", filepath.Base(path), err)
		}
	}
}

// TestClientRoutesAndErrors: the client's requests match the routes a
// server registers from this package's patterns, names are escaped (and
// arrive whole), and refusals come back as *Error matching the sentinels.
func TestClientRoutesAndErrors(t *testing.T) {
	var got []string
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, code int, v any) {
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc(RouteTunnels, ServeTunnels(func() []ipsec.TunnelStatus {
		return []ipsec.TunnelStatus{{Name: "a", State: ipsec.StateUp}}
	}))
	mux.HandleFunc(RouteTunnel, func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("name") != "a" {
			reply(w, 404, Reply{Error: "no tunnel named " + r.PathValue("name")})
			return
		}
		reply(w, 200, ipsec.TunnelStatus{Name: "a"})
	})
	mux.HandleFunc(RouteUp, func(w http.ResponseWriter, r *http.Request) {
		got = append(got, "up "+r.PathValue("name"))
		reply(w, 409, Reply{Error: "tunnel has no remote address"})
	})
	mux.HandleFunc(RouteDown, func(w http.ResponseWriter, r *http.Request) {
		got = append(got, "down "+r.PathValue("name"))
		reply(w, 200, Reply{Result: ResultDeleted})
	})
	mux.HandleFunc(RouteRekey, func(w http.ResponseWriter, r *http.Request) {
		got = append(got, "rekey "+r.PathValue("name")+" "+r.URL.Query().Get("sa"))
		reply(w, 202, Reply{Result: ResultRekeying})
	})
	mux.HandleFunc(RouteStats, func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, Stats{DataPlane: "memory", IKE: IKECounters{AuthFailures: 3}})
	})
	c := NewClient(serve(t, mux))
	ctx := context.Background()

	if ts, err := c.Tunnels(ctx); err != nil || len(ts) != 1 || ts[0].State != ipsec.StateUp {
		t.Errorf("tunnels: %+v, %v", ts, err)
	}
	if _, err := c.Tunnel(ctx, "a/../b c"); !errors.Is(err, ErrNoTunnel) || !strings.Contains(err.Error(), "a/../b c") {
		t.Errorf("tunnel with a name to escape: %v, want ErrNoTunnel naming it whole", err)
	}
	err := c.Up(ctx, "x y")
	var e *Error
	if !errors.Is(err, ErrConflict) || !errors.As(err, &e) || e.Message != "tunnel has no remote address" {
		t.Errorf("up refused: %v, want ErrConflict with iked's reason", err)
	}
	if err := c.Down(ctx, "x/y"); err != nil {
		t.Errorf("down: %v", err)
	}
	if err := c.Rekey(ctx, "x", true); err != nil {
		t.Errorf("rekey: %v", err)
	}
	if s, err := c.Stats(ctx); err != nil || s.DataPlane != "memory" || s.IKE.AuthFailures != 3 {
		t.Errorf("stats: %+v, %v", s, err)
	}
	want := []string{"up x y", "down x/y", "rekey x ike"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("server saw %q, want %q", got, want)
	}
	ctx2, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Tunnels(ctx2); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

// TestClientPages: Tunnels and TunnelsMatching read every tunnel a page
// at a time, never asking for all of them in one answer; CountTunnels
// reads one; the twin's pages are iked's (offset, limit, the match count).
func TestClientPages(t *testing.T) {
	var ts []ipsec.TunnelStatus
	for i := range 2*TunnelsPageSize + 37 {
		st := ipsec.TunnelStatus{Name: fmt.Sprintf("branch%04d", i), State: ipsec.StateUp, RemoteAddr: fmt.Sprintf("10.9.%d.%d:500", i/250, i%250)}
		if i%50 == 3 {
			st.State, st.Reason = ipsec.StateFailed, "peer answered AUTHENTICATION_FAILED"
		}
		ts = append(ts, st)
	}
	var mu sync.Mutex
	var limits []string
	serveTunnels := ServeTunnels(func() []ipsec.TunnelStatus { return ts })
	mux := http.NewServeMux()
	mux.HandleFunc(RouteTunnels, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		limits = append(limits, r.URL.Query().Get("limit"))
		mu.Unlock()
		serveTunnels(w, r)
	})
	c := NewClient(serve(t, mux))
	ctx := context.Background()
	requests := func() []string {
		mu.Lock()
		defer mu.Unlock()
		l := limits
		limits = nil
		return l
	}

	got, err := c.Tunnels(ctx)
	if err != nil || len(got) != len(ts) {
		t.Fatalf("tunnels: %d of %d, %v", len(got), len(ts), err)
	}
	for i := range got {
		if got[i].Name != ts[i].Name {
			t.Fatalf("tunnel %d is %s, want %s (in name order, each once)", i, got[i].Name, ts[i].Name)
		}
	}
	if l := requests(); len(l) != 3 || l[0] != fmt.Sprint(TunnelsPageSize) || l[2] != fmt.Sprint(TunnelsPageSize) {
		t.Errorf("%d tunnels were asked for with the limits %q, want three pages of %d", len(ts), l, TunnelsPageSize)
	}
	failed, err := c.TunnelsMatching(ctx, TunnelQuery{State: ipsec.StateFailed, Offset: 3, Limit: 1})
	if err != nil || len(failed) != 5 || failed[0].Name != "branch0003" || failed[4].Name != "branch0203" {
		t.Errorf("failed tunnels (offset and limit aside): %+v, %v", failed, err)
	}
	if n, err := c.CountTunnels(ctx, TunnelQuery{Text: "Branch000", Limit: 500}); err != nil || n != 10 {
		t.Errorf("tunnels with branch000 in their name: %d, %v; want 10", n, err)
	}
	for _, l := range requests() {
		if l == "" || l == "0" || len(l) > 3 {
			t.Errorf("a request asked for limit=%q: every one must be bounded", l)
		}
	}
	// An empty answer and an exact multiple of the page end the reading.
	ts = ts[:TunnelsPageSize]
	if got, err := c.Tunnels(ctx); err != nil || len(got) != TunnelsPageSize {
		t.Errorf("a page's worth: %d, %v", len(got), err)
	}
	ts = nil
	if got, err := c.Tunnels(ctx); err != nil || len(got) != 0 {
		t.Errorf("no tunnels: %d, %v", len(got), err)
	}
	if _, _, err := c.TunnelsPage(ctx, TunnelQuery{Text: strings.Repeat("x", MaxTunnelQueryText+1)}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("a query text too long: %v, want ErrBadRequest", err)
	}
}
