package netd

import (
	"context"
	"net/http"

	"github.com/flashgate/flashgate/internal/localapi"
	"github.com/flashgate/flashgate/services/netd/netdapi"
)

// The local API's routes and wire types are netdapi's.

// Handler serves the local API.
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(netdapi.RouteStatus, func(w http.ResponseWriter, r *http.Request) {
		localapi.WriteJSON(w, http.StatusOK, d.Status())
	})
	mux.HandleFunc(netdapi.RouteLinks, d.serveLinks)
	mux.HandleFunc(netdapi.RouteFirewall, func(w http.ResponseWriter, r *http.Request) {
		_, specs, _ := d.Rec.Current()
		fs := netdapi.FirewallStatus{Table: "inet " + TableName, Rules: specStrings(specs), Hits: []netdapi.HitCounter{}, Kernel: []netdapi.RuleCounter{}}
		rules, err := d.Rec.NFT.Rules()
		if err != nil {
			fs.Error = err.Error()
		} else {
			fs.Kernel, fs.Hits = rules, Hits(rules)
		}
		localapi.WriteJSON(w, http.StatusOK, fs)
	})
	mux.HandleFunc(netdapi.RouteReconcile, func(w http.ResponseWriter, r *http.Request) {
		err := d.Reconcile()
		_, _, res := d.Rec.Current()
		code := http.StatusOK
		if err != nil {
			code = http.StatusConflict
		}
		localapi.WriteJSON(w, code, struct {
			netdapi.ApplyResult
			Problem string `json:"problem,omitempty"`
		}{res, errString(err)})
	})
	return mux
}

// WebHandler serves the part of the local API the web UI may use, on
// netdapi.WebSocket: the kernel's links, nothing that changes the box.
func (d *Daemon) WebHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(netdapi.RouteLinks, d.serveLinks)
	return mux
}

// serveWeb serves WebHandler on path, for group gid (-1: root only).
func serveWeb(ctx context.Context, d *Daemon, path string, gid int) error {
	ln, err := localapi.Listen(path, localapi.Group(gid))
	if err != nil {
		return err
	}
	go localapi.Serve(ctx, ln, d.WebHandler())
	return nil
}

func (d *Daemon) serveLinks(w http.ResponseWriter, r *http.Request) {
	links, err := d.Links()
	if err != nil {
		localapi.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	localapi.WriteJSON(w, http.StatusOK, links)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
