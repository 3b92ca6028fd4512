package webui

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/flashgate/flashgate/ipsec"
)

// tunnelsPerPage is how many rows the tunnel list shows at once: a head
// office with a thousand branches gets pages and a filter, not one page of
// a thousand rows with a thousand graphs (webui.page_bytes.tunnels).
const tunnelsPerPage = 50

// dashboardTunnels is how many tunnel cards the dashboard shows: the ones
// not up first, then the busiest.
const dashboardTunnels = 12

// maxFilterLen bounds the filter text taken from the query.
const maxFilterLen = 64

// tunnelQuery is what the tunnel list shows: a filter and a page.
type tunnelQuery struct {
	Filter string            // substring of the name, peer address or reason, any case
	State  ipsec.TunnelState // "" for every state
	Page   int               // from 1
}

func parseTunnelQuery(v url.Values) tunnelQuery {
	q := tunnelQuery{Filter: strings.TrimSpace(v.Get("q")), State: ipsec.TunnelState(v.Get("state")), Page: 1}
	if len(q.Filter) > maxFilterLen {
		q.Filter = q.Filter[:maxFilterLen]
	}
	switch q.State {
	case ipsec.StateUp, ipsec.StateDown, ipsec.StateConnecting, ipsec.StateFailed, stateUnknown, "":
	default:
		q.State = ""
	}
	if p, err := strconv.Atoi(v.Get("page")); err == nil && p > 1 {
		q.Page = p
	}
	return q
}

// values is the query as URL parameters, page included when not 1.
func (q tunnelQuery) values(page int) url.Values {
	v := url.Values{}
	if q.Filter != "" {
		v.Set("q", q.Filter)
	}
	if q.State != "" {
		v.Set("state", string(q.State))
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	return v
}

func (q tunnelQuery) matches(r *tunnelRow) bool {
	if q.State != "" && r.State != q.State {
		return false
	}
	if q.Filter == "" {
		return true
	}
	f := strings.ToLower(q.Filter)
	for _, s := range []string{r.Name, r.Remote, r.Reason} {
		if strings.Contains(strings.ToLower(s), f) {
			return true
		}
	}
	return false
}

// stateCount is one state's number of tunnels, for the filter links.
type stateCount struct {
	State ipsec.TunnelState
	N     int
	URL   string
}

// tunnelList is the tunnel list page's data: one page of the tunnels that
// match the query, and the counts around it.
type tunnelList struct {
	Rows     []tunnelRow
	Query    tunnelQuery
	Total    int // configured (running and pending)
	Matched  int // matching the query
	From, To int // the rows shown, 1-based, of Matched
	Page     int
	Pages    int
	Prev     string // URL of the previous page, "" on the first
	Next     string
	States   []stateCount
	LiveURL  string // the live region's URL, with the same query
	ClearURL string // the list without a filter
}

// pageTunnels selects one page of the rows matching q and draws the
// graphs of those alone.
func (s *Server) pageTunnels(rows []tunnelRow, q tunnelQuery) tunnelList {
	l := tunnelList{Query: q, Total: len(rows), ClearURL: "/tunnels"}
	counts := map[ipsec.TunnelState]int{}
	var match []tunnelRow
	for i := range rows {
		counts[rows[i].State]++
		if q.matches(&rows[i]) {
			match = append(match, rows[i])
		}
	}
	for st, n := range counts {
		sq := tunnelQuery{Filter: q.Filter, State: st}
		l.States = append(l.States, stateCount{State: st, N: n, URL: "/tunnels?" + sq.values(1).Encode()})
	}
	sort.Slice(l.States, func(i, j int) bool { return l.States[i].State < l.States[j].State })
	l.Matched = len(match)
	l.Pages = max(1, (len(match)+tunnelsPerPage-1)/tunnelsPerPage)
	l.Page = min(q.Page, l.Pages)
	start := (l.Page - 1) * tunnelsPerPage
	end := min(start+tunnelsPerPage, len(match))
	l.Rows = match[start:end]
	for i := range l.Rows {
		l.Rows[i].Graph = rateGraph(l.Rows[i].Rates, 240, 48)
	}
	if len(l.Rows) > 0 {
		l.From, l.To = start+1, end
	}
	if l.Page > 1 {
		l.Prev = "/tunnels?" + q.values(l.Page-1).Encode()
	}
	if l.Page < l.Pages {
		l.Next = "/tunnels?" + q.values(l.Page+1).Encode()
	}
	l.LiveURL = "/live/tunnels"
	if v := q.values(l.Page).Encode(); v != "" {
		l.LiveURL += "?" + v
	}
	return l
}

// Filtered says whether the list is narrowed by a filter or a state.
func (l tunnelList) Filtered() bool { return l.Query.Filter != "" || l.Query.State != "" }

// Summary is the list's position in words.
func (l tunnelList) Summary() string {
	switch {
	case l.Matched == 0 && l.Filtered():
		return fmt.Sprintf("No tunnel of %d matches.", l.Total)
	case l.Filtered():
		return fmt.Sprintf("%d–%d of the %d tunnels that match (of %d).", l.From, l.To, l.Matched, l.Total)
	case l.Pages > 1:
		return fmt.Sprintf("%d–%d of %d tunnels.", l.From, l.To, l.Total)
	}
	return ""
}

// dashboardRows picks the dashboard's tunnel cards: those not up first
// (by name), then the busiest up ones, at most dashboardTunnels.
func dashboardRows(rows []tunnelRow) []tunnelRow {
	out := make([]tunnelRow, len(rows))
	copy(out, rows)
	if len(out) > dashboardTunnels {
		sort.SliceStable(out, func(i, j int) bool {
			ui, uj := out[i].State == ipsec.StateUp, out[j].State == ipsec.StateUp
			if ui != uj {
				return !ui
			}
			if ui {
				return out[i].BytesIn+out[i].BytesOut > out[j].BytesIn+out[j].BytesOut
			}
			return out[i].Name < out[j].Name
		})
		out = out[:dashboardTunnels]
	}
	for i := range out {
		out[i].Graph = rateGraph(out[i].Rates, 240, 48)
	}
	return out
}
