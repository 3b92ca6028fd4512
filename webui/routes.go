package webui

import (
	"github.com/flashgate/flashgate/webui/markup"

	"context"
	"net/http"

	"github.com/flashgate/flashgate/config"
)

// Static routes: the Routes page lists the candidate's routes (netd
// installs the committed ones), and the generic element forms and API
// handlers add, change and delete them (kindRoutes).

// routeList is the candidate's static routes, for the page and for
// GET /api/v1/routes.
func (s *Server) routeList(ctx context.Context) ([]config.Route, error) {
	cand, err := s.candidate(ctx)
	if err != nil {
		return nil, err
	}
	return cand.Config.Routes, nil
}

// routesView is the Routes page: the routes, and which interfaces are
// route tunnels' (a route through one is there only while it is up).
type routesView struct {
	Routes   []config.Route
	TunnelOf map[string]string // interface -> route tunnel
}

func (s *Server) routesPage(w http.ResponseWriter, r *http.Request) {
	cand, err := s.candidate(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	v := routesView{Routes: cand.Config.Routes, TunnelOf: map[string]string{}}
	for _, t := range cand.Config.Tunnels {
		if t.IsRoute() && t.Interface != "" {
			v.TunnelOf[t.Interface] = t.Name
		}
	}
	s.render(w, r, http.StatusOK, "routes", "Routes", func(p *markup.Writer, pv *view) { routesPage(p, pv, v) })
}
