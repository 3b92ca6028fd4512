package webui

import (
	"github.com/flashgate/flashgate/webui/markup"

	"fmt"
	"net/http"
	"slices"

	"github.com/gorilla/mux"

	"github.com/flashgate/flashgate/config"
)

func (s *Server) firewallPage(w http.ResponseWriter, r *http.Request) {
	cand, err := s.candidate(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	fw := cand.Config.Firewall
	s.render(w, r, http.StatusOK, "firewall", "Firewall", func(p *markup.Writer, v *view) { firewallPage(p, v, fw) })
}

// moveRule moves a rule one place up or down: rules are evaluated in
// order, so order is part of their meaning.
func (s *Server) moveRule(r *http.Request, name, direction string) error {
	if direction != "up" && direction != "down" {
		return fmt.Errorf("direction must be up or down, not %q", direction)
	}
	return s.editCandidate(r.Context(), func(c *config.Config) error {
		rules := c.Firewall.Rules
		i := slices.IndexFunc(rules, func(x config.Rule) bool { return x.Name == name })
		if i < 0 {
			return fmt.Errorf("there is no rule called %q", name)
		}
		j := i - 1
		if direction == "down" {
			j = i + 1
		}
		if j < 0 || j >= len(rules) {
			return nil // already first or last
		}
		rules[i], rules[j] = rules[j], rules[i]
		return nil
	})
}

func (s *Server) ruleMove(w http.ResponseWriter, r *http.Request) {
	if err := s.moveRule(r, mux.Vars(r)["name"], r.PostFormValue("direction")); err != nil {
		s.redirect(w, r, "/firewall", sentence(err.Error()), true)
		return
	}
	s.redirect(w, r, "/firewall", "", false)
}

// InterfaceRow is a configured interface with what the kernel says.
type InterfaceRow struct {
	Config config.Interface `json:"config"`
	Link   *Link            `json:"link,omitempty"` // nil: no such device on this box
	// DHCPRange is the range the interface's DHCP server hands out
	// ("192.168.1.128-192.168.1.254", the automatic pool when the
	// configuration gives none); empty when it runs no server.
	DHCPRange string `json:"dhcp_range,omitempty"`
}

// dhcpRange is what InterfaceRow.DHCPRange says of ifc.
func dhcpRange(ifc *config.Interface) string {
	if !ifc.ServesDHCP() {
		return ""
	}
	addr, ok := ifc.DHCPAddress()
	if !ok {
		return ""
	}
	first, last, ok := ifc.DHCPServer.DHCPRange(addr)
	if !ok {
		return ""
	}
	return first.String() + "-" + last.String()
}

func (s *Server) interfaceRows(r *http.Request) ([]InterfaceRow, []Link, error) {
	cand, err := s.candidate(r.Context())
	if err != nil {
		return nil, nil, err
	}
	links, _ := s.shownLinks(r.Context())
	var rows []InterfaceRow
	seen := map[string]bool{}
	for _, ifc := range cand.Config.Interfaces {
		row := InterfaceRow{Config: ifc, DHCPRange: dhcpRange(&ifc)}
		for i := range links {
			if links[i].Name == ifc.Name {
				row.Link = &links[i]
				seen[ifc.Name] = true
			}
		}
		rows = append(rows, row)
	}
	var other []Link
	for _, l := range links {
		if !seen[l.Name] {
			other = append(other, l)
		}
	}
	return rows, other, nil
}

func (s *Server) interfacesPage(w http.ResponseWriter, r *http.Request) {
	rows, other, err := s.interfaceRows(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	d := interfacesView{Rows: rows, Other: other}
	s.render(w, r, http.StatusOK, "interfaces", "Interfaces", func(p *markup.Writer, v *view) { interfacesPage(p, v, d) })
}
