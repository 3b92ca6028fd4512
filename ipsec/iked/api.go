package iked

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
)

// Handler is iked's local API, as package ikedapi describes it: HTTP in
// and out, the logic in Up, Down, Rekey, Status and Stats.
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(ikedapi.RouteTunnels, func(w http.ResponseWriter, r *http.Request) {
		q, err := ikedapi.ParseTunnelQuery(r.URL.Query())
		if err != nil {
			writeError(w, err)
			return
		}
		ts, matched := d.StatusPage(q)
		w.Header().Set(ikedapi.HeaderMatched, strconv.Itoa(matched))
		writeJSON(w, http.StatusOK, ts)
	})
	mux.HandleFunc(ikedapi.RouteTunnel, func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		ts, _ := d.StatusPage(ikedapi.TunnelQuery{Name: name})
		if len(ts) == 1 {
			writeJSON(w, http.StatusOK, ts[0])
			return
		}
		writeError(w, noTunnel(name))
	})
	mux.HandleFunc(ikedapi.RouteUp, func(w http.ResponseWriter, r *http.Request) {
		if err := d.Up(r.PathValue("name")); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusAccepted, ikedapi.Reply{Result: ikedapi.ResultInitiating})
	})
	mux.HandleFunc(ikedapi.RouteDown, func(w http.ResponseWriter, r *http.Request) {
		if err := d.Down(r.PathValue("name")); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, ikedapi.Reply{Result: ikedapi.ResultDeleted})
	})
	mux.HandleFunc(ikedapi.RouteRekey, func(w http.ResponseWriter, r *http.Request) {
		which := r.URL.Query().Get("sa")
		if which != "" && which != "ike" && which != "child" {
			writeError(w, fmt.Errorf("%w: sa=%q: want ike or child", ikedapi.ErrBadRequest, which))
			return
		}
		if err := d.Rekey(r.PathValue("name"), which == "ike"); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusAccepted, ikedapi.Reply{Result: ikedapi.ResultRekeying})
	})
	mux.HandleFunc(ikedapi.RouteStats, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, d.Stats())
	})
	return mux
}

// Serve serves the local API on a unix socket until ctx ends.
func (d *Daemon) Serve(ctx context.Context, path string) error {
	return d.ServeGroup(ctx, path, -1)
}

// ServeGroup is Serve with the socket's group set to gid (-1: root's),
// whose members may then use the API: the web UI's group on the
// appliance (tunnel status, connect and disconnect; the API hands out no
// keys).
func (d *Daemon) ServeGroup(ctx context.Context, path string, gid int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("iked API: %w", err)
	}
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("iked API: %w", err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			l.Close()
			return fmt.Errorf("iked API: socket group %d: %w", gid, err)
		}
	}
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return fmt.Errorf("iked API: %w", err)
	}
	srv := &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// writeError answers err with the status ikedapi gives it (404 for a
// tunnel that does not exist, 400 for a bad request, 409 otherwise).
func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, ikedapi.StatusOf(err), ikedapi.Reply{Error: err.Error()})
}
