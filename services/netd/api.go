package netd

import (
	"encoding/json"
	"net/http"
)

// The local API, HTTP+JSON on netd's unix socket:
//
//	GET  /v1/status     links (state, addresses, counters), leases, the last apply, the NTP client
//	GET  /v1/firewall   the ruleset in nft syntax and the hit counters
//	POST /v1/reconcile  apply the current configuration again now

// FirewallStatus is the answer of GET /v1/firewall.
type FirewallStatus struct {
	Table  string        `json:"table"`
	Rules  []string      `json:"rules"` // as built, in nft syntax
	Hits   []HitCounter  `json:"hits"`  // by policy element
	Kernel []RuleCounter `json:"kernel"`
	Error  string        `json:"error,omitempty"`
}

// Handler serves the local API.
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, d.Status())
	})
	mux.HandleFunc("GET /v1/firewall", func(w http.ResponseWriter, r *http.Request) {
		_, specs, _ := d.Rec.Current()
		fs := FirewallStatus{Table: "inet " + TableName, Rules: specStrings(specs), Hits: []HitCounter{}, Kernel: []RuleCounter{}}
		rules, err := d.Rec.NFT.Rules()
		if err != nil {
			fs.Error = err.Error()
		} else {
			fs.Kernel, fs.Hits = rules, Hits(rules)
		}
		writeJSON(w, http.StatusOK, fs)
	})
	mux.HandleFunc("POST /v1/reconcile", func(w http.ResponseWriter, r *http.Request) {
		err := d.Reconcile()
		_, _, res := d.Rec.Current()
		code := http.StatusOK
		if err != nil {
			code = http.StatusConflict
		}
		writeJSON(w, code, struct {
			ApplyResult
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

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
