package ikedapi

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
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
	mux.HandleFunc(RouteTunnels, func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, []ipsec.TunnelStatus{{Name: "a", State: ipsec.StateUp}})
	})
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
