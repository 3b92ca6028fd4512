package iked

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
)

// TestStatusQuery: a hub with 40 respond tunnels finds its peer's among
// them (peerFor's index), and GET /v1/tunnels narrows and pages.
func TestStatusQuery(t *testing.T) {
	n := newMemNet(t)
	var hub []config.Tunnel
	for i := range 39 {
		tu := memTunnel(memB, netip.AddrFrom4([4]byte{10, 99, 1, byte(1 + i)}), memLANB, memLANA, config.StartRespond)
		tu.Name = fmt.Sprintf("branch%02d", i)
		hub = append(hub, tu)
	}
	hub = append(hub, memTunnel(memB, memA, memLANB, memLANA, config.StartRespond))
	b := n.gateway(memB, hub...)
	n.gateway(memA, memTunnel(memA, memB, memLANA, memLANB, config.StartInitiate))
	n.step(5*time.Second, 100*time.Millisecond)
	b.want(t, "s2s", ipsec.StateUp, "")

	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	get := func(query string) ([]ipsec.TunnelStatus, int, int) {
		resp, err := http.Get(srv.URL + "/v1/tunnels" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ts []ipsec.TunnelStatus
		json.NewDecoder(resp.Body).Decode(&ts)
		matched, _ := strconv.Atoi(resp.Header.Get(ikedapi.HeaderMatched))
		return ts, matched, resp.StatusCode
	}
	for _, tc := range []struct {
		query          string
		rows, matched  int
		first          string
		wantStatusCode int
	}{
		{"", 40, 40, "branch00", 200},
		{"?state=up", 1, 1, "s2s", 200},
		{"?state=down&limit=5&offset=10", 5, 39, "branch10", 200},
		{"?q=BRANCH1", 10, 10, "branch10", 200},
		{"?q=10.99.1.3", 11, 11, "branch02", 200}, // .3, .30-.39
		{"?offset=38", 2, 40, "branch38", 200},
		{"?offset=99", 0, 40, "", 200},
		{"?state=bogus", 0, 0, "", 400},
		{"?limit=-1", 0, 0, "", 400},
	} {
		ts, matched, code := get(tc.query)
		first := ""
		if len(ts) > 0 {
			first = ts[0].Name
		}
		if code != tc.wantStatusCode || len(ts) != tc.rows || code == 200 && matched != tc.matched || first != tc.first {
			t.Errorf("GET /v1/tunnels%s: %d, %d rows of %d matched from %q; want %d, %d of %d from %q",
				tc.query, code, len(ts), matched, first, tc.wantStatusCode, tc.rows, tc.matched, tc.first)
		}
	}
	if ts, _, _ := get("?state=up"); len(ts) == 1 && (ts[0].IKE == nil || len(ts[0].Children) != 1) {
		t.Errorf("the up tunnel's page lacks its SAs: %+v", ts[0])
	}
}
