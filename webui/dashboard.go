package webui

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"

	"github.com/gorilla/mux"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/hwcrypto"
	"github.com/flashgate/flashgate/webui/markup"
)

// stateUnknown is shown when iked cannot be asked: the UI never guesses a
// tunnel's state.
const stateUnknown ipsec.TunnelState = "unknown"

// tunnelRow is a configured tunnel with its live state.
type tunnelRow struct {
	Name      string              `json:"name"`
	Enabled   bool                `json:"enabled"`
	Remote    string              `json:"remote_address"`
	Interface string              `json:"interface,omitempty"` // a route tunnel's ipsecN
	Committed bool                `json:"committed"`           // false: only in the pending changes
	State     ipsec.TunnelState   `json:"state"`
	Reason    string              `json:"reason,omitempty"`
	Status    *ipsec.TunnelStatus `json:"status,omitempty"`
	Rates     []Rate              `json:"rates,omitempty"`
	BytesIn   uint64              `json:"bytes_in"`
	BytesOut  uint64              `json:"bytes_out"`
	Graph     markup.Trusted      `json:"-"`
	// Weak lists the tunnel's proposals with weak algorithms, from its
	// configuration (so it shows without iked too).
	Weak []config.WeakProposal `json:"weak,omitempty"`
}

// tunnelRows merges the configured tunnels (running, then those only in
// the candidate) with what iked reports.
func (s *Server) tunnelRows(ctx context.Context) ([]tunnelRow, error) {
	running, _, err := s.running(ctx)
	if err != nil {
		return nil, err
	}
	// The tunnels only in the candidate are read from it when there are
	// pending changes: without any, it is the running configuration.
	var pending []config.Tunnel
	if st, err := s.status(ctx); err != nil || st.CandidateChanged {
		cand, err := s.candidate(ctx)
		if err != nil {
			return nil, err
		}
		pending = cand.Config.Tunnels
	}
	tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	statuses, serr := s.opts.Tunnels.Tunnels(tctx)
	cancel()
	byName := map[string]*ipsec.TunnelStatus{}
	for i := range statuses {
		byName[statuses[i].Name] = &statuses[i]
	}
	var rows []tunnelRow
	add := func(t config.Tunnel, committed bool) {
		row := tunnelRow{Name: t.Name, Enabled: t.Enabled, Remote: t.RemoteAddress.String(), Committed: committed, State: stateUnknown,
			Weak: t.WeakProposals()}
		if t.IsRoute() {
			row.Interface = t.Interface
		}
		switch st := byName[t.Name]; {
		case !committed:
			row.Reason = "not committed yet"
		case serr != nil && errors.Is(serr, ikedapi.ErrNotRunning):
			row.Reason = "iked is not running"
		case serr != nil:
			row.Reason = "iked did not answer: " + serr.Error()
		case st == nil:
			row.Reason = "iked does not report this tunnel (it may still be applying the last commit)"
		default:
			row.State, row.Reason, row.Status = st.State, st.Reason, st
			for _, c := range st.Children {
				row.BytesIn += c.BytesIn
				row.BytesOut += c.BytesOut
			}
		}
		row.Rates = s.sampler.rates(t.Name) // graphs are drawn for the rows shown
		rows = append(rows, row)
	}
	// By name, not running.Tunnel per candidate tunnel: that search made
	// every render (and every 5 s refresh) of a head office's 1000
	// tunnels half a million string comparisons (issue 22).
	committed := make(map[string]bool, len(running.Tunnels))
	for _, t := range running.Tunnels {
		add(t, true)
		committed[t.Name] = true
	}
	for _, t := range pending {
		if !committed[t.Name] {
			add(t, false)
		}
	}
	return rows, nil
}

// Dashboard is the dashboard's data, also GET /api/v1/dashboard.
type Dashboard struct {
	Board      BoardInfo `json:"board"`
	Hostname   string    `json:"hostname"`
	Uptime     string    `json:"uptime"`
	CPUPercent *float64  `json:"cpu_percent"` // null until two samples exist
	Memory     Memory    `json:"memory"`
	MemPercent float64   `json:"memory_used_percent"`
	Links      []Link    `json:"interfaces"`
	// Tunnels are the dashboard's cards: every tunnel when there are a
	// few, else the ones not up and then the busiest (dashboardRows);
	// TunnelsTotal and TunnelsUp count them all.
	Tunnels      []tunnelRow `json:"tunnels"`
	TunnelsTotal int         `json:"tunnels_total"`
	TunnelsUp    int         `json:"tunnels_up"`
	Crypto       string      `json:"crypto_engine"`
	Problems     []string    `json:"problems,omitempty"` // what could not be read, in words
	// Firmware notes: the last upgrade's outcome, and a warning when the
	// box accepts unsigned firmware.
	Firmware []string `json:"firmware_notes,omitempty"`
}

func (s *Server) dashboard(ctx context.Context) Dashboard {
	d := Dashboard{Board: s.opts.Board, Crypto: s.cryptoSummary(), Links: []Link{}, Tunnels: []tunnelRow{}, Firmware: s.firmwareNotes(ctx)}
	if up, err := readUptime(s.opts.Root); err == nil {
		d.Uptime = roundDuration(up)
	} else {
		d.Problems = append(d.Problems, "uptime: "+err.Error())
	}
	if cpu, ok := s.sampler.cpuPercent(); ok {
		d.CPUPercent = &cpu
	}
	if m, err := readMemory(s.opts.Root); err == nil {
		d.Memory, d.MemPercent = m, m.UsedPercent()
	} else {
		d.Problems = append(d.Problems, "memory: "+err.Error())
	}
	if links, err := s.shownLinks(ctx); err == nil {
		d.Links = links
	} else {
		d.Problems = append(d.Problems, "interfaces: "+err.Error())
	}
	if rows, err := s.tunnelRows(ctx); err == nil {
		d.Tunnels, d.TunnelsTotal = dashboardRows(rows), len(rows)
		for _, r := range rows {
			if r.State == ipsec.StateUp {
				d.TunnelsUp++
			}
		}
	} else {
		d.Problems = append(d.Problems, "tunnels: "+err.Error())
	}
	if sys, err := s.runningSystem(ctx); err == nil {
		d.Hostname = sys.Hostname
	}
	return d
}

// cryptoSummary says which engine does the ESP work, in words.
func (s *Server) cryptoSummary() string {
	r := s.opts.Crypto
	if r == nil {
		return "unknown (crypto engines were not detected)"
	}
	for _, e := range r.Engines {
		if e.State == hwcrypto.Usable && e.InUse {
			return e.Name + " (in use)"
		}
	}
	if u := r.Usable(); len(u) > 0 {
		return u[0].Name + " (ready; no SA uses it yet)"
	}
	if len(r.Engines) > 0 {
		return "software: " + r.Engines[0].Name + " is " + r.Engines[0].State.String() + " (" + r.Engines[0].Reason + ")"
	}
	return "software (this board has no crypto engine)"
}

func (s *Server) dashboardPage(w http.ResponseWriter, r *http.Request) {
	d := s.dashboard(r.Context())
	s.render(w, r, http.StatusOK, "dashboard", "Dashboard", func(p *markup.Writer, v *view) { dashboardPage(p, v, d) })
}

func (s *Server) liveDashboard(w http.ResponseWriter, r *http.Request) {
	d := s.dashboard(r.Context())
	s.execute(w, http.StatusOK, "dashboard live", func(p *markup.Writer) { dashboardLive(p, d) })
}

func (s *Server) liveTunnels(w http.ResponseWriter, r *http.Request) {
	rows, err := s.tunnelRows(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	d := s.pageTunnels(rows, parseTunnelQuery(r.URL.Query()))
	s.execute(w, http.StatusOK, "tunnels live", func(p *markup.Writer) { tunnelsLive(p, d) })
}

func (s *Server) liveTunnel(w http.ResponseWriter, r *http.Request) {
	d, ok := s.tunnelDetail(r.Context(), mux.Vars(r)["name"])
	if !ok {
		http.Error(w, "no such tunnel", http.StatusNotFound)
		return
	}
	s.execute(w, http.StatusOK, "tunnel live", func(p *markup.Writer) { tunnelLive(p, d) })
}
