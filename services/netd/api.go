package netd

import (
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

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
