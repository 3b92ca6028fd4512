package webui

import (
	"github.com/flashgate/flashgate/webui/markup"

	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/flashgate/flashgate/config"
)

func (s *Server) tunnelsPage(w http.ResponseWriter, r *http.Request) {
	rows, err := s.tunnelRows(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	d := s.pageTunnels(rows, parseTunnelQuery(r.URL.Query()))
	s.render(w, r, http.StatusOK, "tunnels", "Tunnels", func(p *markup.Writer, v *view) { tunnelsPage(p, v, d) })
}

// TunnelDetail is one tunnel's configuration (secrets left out) and live
// state, for the detail page and GET /api/v1/tunnels/{name}.
type TunnelDetail struct {
	Config     tunnelConfigView `json:"config"`
	Row        tunnelRow        `json:"live"`
	Controlled bool             `json:"-"` // iked can be asked to bring it up or down
	// Routes are the routes through a route tunnel's interface.
	Routes []config.Route `json:"routes,omitempty"`
}

// tunnelConfigView is a tunnel without its PSK.
type tunnelConfigView struct {
	config.Tunnel
	PSK    *struct{} `json:"psk,omitempty"` // shadows the secret: never sent
	PSKSet bool      `json:"psk_set"`
}

func (s *Server) tunnelDetail(ctx context.Context, name string) (TunnelDetail, bool) {
	cand, err := s.candidate(ctx)
	if err != nil {
		return TunnelDetail{}, false
	}
	t := cand.Config.Tunnel(name)
	if t == nil {
		// Deleted in the pending changes but still running: still shown.
		running, _, err := s.running(ctx)
		if err != nil {
			return TunnelDetail{}, false
		}
		if t = running.Tunnel(name); t == nil {
			return TunnelDetail{}, false
		}
	}
	_, control := s.opts.Tunnels.(TunnelControl)
	d := TunnelDetail{Config: tunnelConfigView{Tunnel: *t, PSKSet: t.PSK.IsSet()}, Controlled: control}
	d.Config.Tunnel.PSK = config.Secret{}
	if t.IsRoute() {
		for _, r := range cand.Config.Routes {
			if r.Interface == t.Interface {
				d.Routes = append(d.Routes, r)
			}
		}
	}
	rows, err := s.tunnelRows(ctx)
	if err == nil {
		for _, row := range rows {
			if row.Name == name {
				d.Row = row
				d.Row.Graph = rateGraph(row.Rates, 240, 48)
			}
		}
	}
	return d, true
}

func (s *Server) tunnelDetailPage(w http.ResponseWriter, r *http.Request) {
	name := mux.Vars(r)["name"]
	d, ok := s.tunnelDetail(r.Context(), name)
	if !ok {
		http.Error(w, "no tunnel called "+name, http.StatusNotFound)
		return
	}
	s.render(w, r, http.StatusOK, "tunnel", "Tunnel "+name, func(p *markup.Writer, v *view) { tunnelPage(p, v, d) })
}

// tunnelAction asks iked to bring a committed tunnel up or down now.
func (s *Server) tunnelAction(ctx context.Context, name, action string) error {
	ctl, ok := s.opts.Tunnels.(TunnelControl)
	if !ok {
		return errors.New("tunnels cannot be started or stopped here")
	}
	running, _, err := s.running(ctx)
	if err != nil {
		return err
	}
	if running.Tunnel(name) == nil {
		return fmt.Errorf("tunnel %s is not running: commit it first", name)
	}
	switch action {
	case "up":
		return ctl.Up(ctx, name)
	case "down":
		return ctl.Down(ctx, name)
	}
	return fmt.Errorf("unknown tunnel action %q", action)
}

func (s *Server) tunnelActionPage(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := mux.Vars(r)["name"]
		if err := s.tunnelAction(r.Context(), name, action); err != nil {
			s.redirect(w, r, "/tunnels/"+name, "Not done: "+err.Error()+".", true)
			return
		}
		msg := "iked is bringing tunnel " + name + " up."
		if action == "down" {
			msg = "iked took tunnel " + name + " down; it comes back by its start action."
		}
		s.redirect(w, r, "/tunnels/"+name, msg, false)
	}
}
