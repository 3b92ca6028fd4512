package webui

import (
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

func (s *Server) routesPage(w http.ResponseWriter, r *http.Request) {
	routes, err := s.routeList(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	s.render(w, r, http.StatusOK, "routes", "Routes", routes)
}
