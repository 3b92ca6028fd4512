package ikedapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/flashgate/flashgate/ipsec"
)

// HeaderMatched is the header of GET /v1/tunnels that says how many
// tunnels matched the query before its offset and limit.
const HeaderMatched = "X-Tunnels-Matched"

// MaxTunnelQueryText bounds the text of a query.
const MaxTunnelQueryText = 64

// TunnelQuery narrows GET /v1/tunnels: the query parameters state, q,
// offset and limit (a head office's thousand tunnels a page at a time).
// The zero value asks for every tunnel.
type TunnelQuery struct {
	Name   string            // exactly this tunnel (GET /v1/tunnels/{name})
	State  ipsec.TunnelState // state=up|down|connecting|failed
	Text   string            // q=: in the name, peer address or reason, any case
	Offset int               // offset=: skip this many matching tunnels
	Limit  int               // limit=: at most this many (0: all)
}

// Values is q as query parameters.
func (q TunnelQuery) Values() url.Values {
	v := url.Values{}
	if q.State != "" {
		v.Set("state", string(q.State))
	}
	if q.Text != "" {
		v.Set("q", q.Text)
	}
	if q.Offset > 0 {
		v.Set("offset", strconv.Itoa(q.Offset))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// ParseTunnelQuery reads the query parameters of GET /v1/tunnels; a bad
// one is an ErrBadRequest saying which.
func ParseTunnelQuery(v url.Values) (TunnelQuery, error) {
	var q TunnelQuery
	switch st := ipsec.TunnelState(v.Get("state")); st {
	case "", ipsec.StateUp, ipsec.StateDown, ipsec.StateConnecting, ipsec.StateFailed:
		q.State = st
	default:
		return q, fmt.Errorf("%w: state=%q: want up, down, connecting or failed", ErrBadRequest, st)
	}
	q.Text = v.Get("q")
	if len(q.Text) > MaxTunnelQueryText {
		return q, fmt.Errorf("%w: q is %d bytes, at most %d", ErrBadRequest, len(q.Text), MaxTunnelQueryText)
	}
	for _, p := range []struct {
		name string
		to   *int
	}{{"offset", &q.Offset}, {"limit", &q.Limit}} {
		s := v.Get(p.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return q, fmt.Errorf("%w: %s=%q: want a number from 0", ErrBadRequest, p.name, s)
		}
		*p.to = n
	}
	return q, nil
}

// Matches reports whether a tunnel with this name, state, peer address
// and reason is selected by q (offset and limit aside).
func (q TunnelQuery) Matches(name string, state ipsec.TunnelState, remote, reason string) bool {
	if q.Name != "" && name != q.Name || q.State != "" && state != q.State {
		return false
	}
	if q.Text == "" {
		return true
	}
	t := strings.ToLower(q.Text)
	return strings.Contains(strings.ToLower(name), t) || strings.Contains(remote, t) || strings.Contains(strings.ToLower(reason), t)
}

// Page is q's answer from ts, a list of tunnels in name order as iked
// keeps them: the tunnels q selects from its offset, at most its limit of
// them, and how many it selects in all. iked walks its own state the same
// way (Daemon.StatusPage); Page is for the in-memory twins of its API.
func (q TunnelQuery) Page(ts []ipsec.TunnelStatus) ([]ipsec.TunnelStatus, int) {
	page := []ipsec.TunnelStatus{}
	matched := 0
	for _, t := range ts {
		if !q.Matches(t.Name, t.State, t.RemoteAddr, t.Reason) {
			continue
		}
		matched++
		if matched > q.Offset && (q.Limit == 0 || matched <= q.Offset+q.Limit) {
			page = append(page, t)
		}
	}
	return page, matched
}

// ServeTunnels answers GET /v1/tunnels from the list of tunnels list
// returns (in name order), as iked does: query, X-Tunnels-Matched and all.
// For the in-memory twins of iked's API in other packages' tests.
func ServeTunnels(list func() []ipsec.TunnelStatus) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, err := ParseTunnelQuery(r.URL.Query())
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(Reply{Error: err.Error()})
			return
		}
		page, matched := q.Page(list())
		w.Header().Set(HeaderMatched, strconv.Itoa(matched))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(page)
	}
}
