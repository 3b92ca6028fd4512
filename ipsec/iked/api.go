package iked

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/flashgate/flashgate/internal/localapi"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
)

// Handler is iked's local API, as package ikedapi describes it: HTTP in
// and out, the logic in Up, Down, Rekey, Status, Counters and Stats.
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
		localapi.WriteJSON(w, http.StatusOK, ts)
	})
	mux.HandleFunc(ikedapi.RouteTunnel, func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		ts, _ := d.StatusPage(ikedapi.TunnelQuery{Name: name})
		if len(ts) == 1 {
			localapi.WriteJSON(w, http.StatusOK, ts[0])
			return
		}
		writeError(w, noTunnel(name))
	})
	mux.HandleFunc(ikedapi.RouteUp, func(w http.ResponseWriter, r *http.Request) {
		if err := d.Up(r.PathValue("name")); err != nil {
			writeError(w, err)
			return
		}
		localapi.WriteJSON(w, http.StatusAccepted, ikedapi.Reply{Result: ikedapi.ResultInitiating})
	})
	mux.HandleFunc(ikedapi.RouteDown, func(w http.ResponseWriter, r *http.Request) {
		if err := d.Down(r.PathValue("name")); err != nil {
			writeError(w, err)
			return
		}
		localapi.WriteJSON(w, http.StatusOK, ikedapi.Reply{Result: ikedapi.ResultDeleted})
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
		localapi.WriteJSON(w, http.StatusAccepted, ikedapi.Reply{Result: ikedapi.ResultRekeying})
	})
	mux.HandleFunc(ikedapi.RouteStats, func(w http.ResponseWriter, r *http.Request) {
		localapi.WriteJSON(w, http.StatusOK, d.Stats())
	})
	mux.HandleFunc(ikedapi.RouteCounters, func(w http.ResponseWriter, r *http.Request) {
		localapi.WriteJSON(w, http.StatusOK, d.Counters())
	})
	return mux
}

// Serve serves the local API on the unix socket at path until ctx ends.
// access says who may use it besides root: on the appliance the web UI's
// group (tunnel status, connect and disconnect; the API hands out no keys).
func (d *Daemon) Serve(ctx context.Context, path string, access localapi.Access) error {
	l, err := localapi.Listen(path, access)
	if err != nil {
		return fmt.Errorf("iked API: %w", err)
	}
	return localapi.Serve(ctx, l, d.Handler())
}

// writeError answers err with the status ikedapi gives it (404 for a
// tunnel that does not exist, 400 for a bad request, 409 otherwise).
func writeError(w http.ResponseWriter, err error) {
	localapi.WriteError(w, ikedapi.StatusOf(err), err.Error())
}
