package webui

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/config"
)

// addTunnels commits n more respond tunnels, branch0000 ..., the way a head
// office has them (one peer address and subnet each).
func addTunnels(t testing.TB, h *harness, n int) {
	t.Helper()
	ctx := context.Background()
	cand, err := h.cfg.Candidate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := cand.Config
	for i := range n {
		tu := config.NewTunnel(fmt.Sprintf("branch%04d", i))
		tu.RemoteAddress = config.MustAddr(fmt.Sprintf("10.99.%d.%d", 1+i/250, 1+i%250))
		tu.RemoteID = fmt.Sprintf("branch%04d.example", i)
		tu.PSK = config.NewSecret(fmt.Sprintf("0123456789abcdef-branch-%04d", i))
		tu.LocalSubnets = []config.Prefix{config.MustPrefix("192.168.1.0/24")}
		tu.RemoteSubnets = []config.Prefix{config.MustPrefix(fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256))}
		tu.StartAction = config.StartRespond
		c.Tunnels = append(c.Tunnels, tu)
	}
	if _, err := h.cfg.ReplaceCandidate(ctx, cand.Etag, c); err != nil {
		t.Fatalf("candidate with %d tunnels: %v", n, err)
	}
	if _, err := h.cfg.Commit(ctx, configdapi.CommitRequest{Who: "test", Message: "branches"}); err != nil {
		t.Fatalf("commit %d tunnels: %v", n, err)
	}
}

var tunnelLinkRE = regexp.MustCompile(`<a href="/tunnels/(branch\d+)"><strong>`)

func listed(body string) []string {
	var names []string
	for _, m := range tunnelLinkRE.FindAllStringSubmatch(body, -1) {
		names = append(names, m[1])
	}
	return names
}

// TestTunnelListPages: beyond a page of tunnels the list pages and filters,
// and every tunnel can be reached.
func TestTunnelListPages(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()
	addTunnels(t, h, 120)

	r := b.get("/tunnels")
	if r.Code != http.StatusOK {
		t.Fatalf("GET /tunnels: %d", r.Code)
	}
	if got := listed(r.Body); len(got) != tunnelsPerPage || got[0] != "branch0000" {
		t.Fatalf("first page lists %d tunnels from %v, want %d from branch0000", len(got), got[:min(1, len(got))], tunnelsPerPage)
	}
	if !strings.Contains(r.Body, "1–50 of 120 tunnels") || !strings.Contains(r.Body, `href="/tunnels?page=2"`) {
		t.Errorf("first page: no position or next link:\n%s", r.Body)
	}
	seen := map[string]bool{}
	for p := 1; p <= 3; p++ {
		for _, n := range listed(b.get(fmt.Sprintf("/tunnels?page=%d", p)).Body) {
			seen[n] = true
		}
	}
	if len(seen) != 120 {
		t.Errorf("three pages list %d distinct tunnels, want 120", len(seen))
	}
	if got := listed(b.get("/tunnels?page=99").Body); len(got) != 20 {
		t.Errorf("a page past the end shows the last one: %d rows, want 20", len(got))
	}

	r = b.get("/tunnels?q=BRANCH011")
	if got := listed(r.Body); strings.Join(got, ",") != "branch0110,branch0111,branch0112,branch0113,branch0114,branch0115,branch0116,branch0117,branch0118,branch0119" {
		t.Errorf("filter branch011 (any case) lists %v", got)
	}
	if got := listed(b.get("/tunnels?q=10.99.1.7").Body); len(got) != 11 { // .7, .70-.79
		t.Errorf("filter by peer address 10.99.1.7 lists %d tunnels: %v", len(got), got)
	}
	r = b.get("/tunnels?q=nothing-like-this")
	if len(listed(r.Body)) != 0 || !strings.Contains(r.Body, "No tunnel of 120 matches.") {
		t.Errorf("a filter that matches nothing says so")
	}
	// The live region refreshes the same page of the same filter.
	if !strings.Contains(b.get("/tunnels?q=branch00&page=2").Body, `data-live="/live/tunnels?page=2&amp;q=branch00"`) {
		t.Errorf("the live region does not keep the query")
	}
	if got := listed(b.get("/live/tunnels?q=branch00&page=2").Body); len(got) != 50 || got[0] != "branch0050" {
		t.Errorf("live page 2 of branch00: %d rows from %v", len(got), got[:min(1, len(got))])
	}
	long := strings.Repeat("x", 5000)
	if r := b.get("/tunnels?q=" + long + "&page=-3&state=bogus"); r.Code != http.StatusOK {
		t.Errorf("bad query: %d, want the list", r.Code)
	}

	// The dashboard shows a dozen cards and the counts.
	r = b.get("/")
	if n := strings.Count(r.Body, `class="tunnel" href="/tunnels/`); n != dashboardTunnels {
		t.Errorf("dashboard shows %d tunnel cards, want %d", n, dashboardTunnels)
	}
	if !strings.Contains(r.Body, "of 120 up") {
		t.Errorf("dashboard does not count the tunnels")
	}
}

// BenchmarkTunnelList weighs the tunnel list and the dashboard of a head
// office with 1000 tunnels (webui.page_bytes.tunnels_1000) and times them.
//
// iked is a twin that reports every tunnel up with one CHILD_SA, as a head
// office's would: the rows, the counts and the dashboard's busiest cards
// are then what an admin sees, and allocs/op is what one render costs the
// web UI and configd (both run in this process) at 1000 tunnels.
func BenchmarkTunnelList(b *testing.B) {
	iked := startFakeIked(b)
	var up []ipsec.TunnelStatus
	for i := range 1000 {
		up = append(up, upTunnel(fmt.Sprintf("branch%04d", i), uint64(1000*i), uint64(2000*i), fmt.Sprintf("c%07x", i)))
	}
	iked.set(up...)
	h := newHarness(b, true, func(o *Options) { o.Tunnels = ikedapi.NewClient(iked.sock) })
	br := h.browser()
	br.login()
	addTunnels(b, h, 1000)
	running, _, err := h.cfg.Running(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	account, _ := accountOf(running, testAdmin)
	id, _ := h.srv.sessions.create(testAdmin, account)
	for _, p := range []struct{ name, path string }{{"tunnels_1000", "/tunnels"}, {"dashboard_1000", "/"}, {"tunnels_1000_filtered", "/tunnels?q=branch09"}} {
		page, assets := weigh(b, br, p.path)
		b.Run(p.name, func(b *testing.B) {
			req := benchRequest(h, p.path, id)
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.srv.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s: %d", p.path, rec.Code)
				}
			}
			b.ReportMetric(float64(page+assets), "bytes/page")
			b.ReportMetric(float64(page), "html_bytes")
		})
	}
}

// TestTunnelRowsFollowCommits: the pages read the running configuration
// from the web UI's copy of one revision (runningCache); a commit made
// elsewhere (the console, the API) shows at the next render, and the copy
// goes when the last session has.
func TestTunnelRowsFollowCommits(t *testing.T) {
	h := newHarness(t, true)
	b := h.browser()
	b.login()
	addTunnels(t, h, 3)
	if got := listed(b.get("/tunnels").Body); len(got) != 3 {
		t.Fatalf("before: %v", got)
	}
	if h.srv.runCache.get(mustRevision(t, h)) == nil {
		t.Fatalf("the page kept no copy of the running configuration")
	}
	ctx := context.Background()
	if _, err := h.cfg.Delete(ctx, "", "tunnels.branch0002"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.cfg.Commit(ctx, configdapi.CommitRequest{Who: "test", Message: "less"}); err != nil {
		t.Fatal(err)
	}
	if got := listed(b.get("/tunnels").Body); strings.Join(got, ",") != "branch0000,branch0001" {
		t.Errorf("after a commit elsewhere the list shows %v", got)
	}
	if _, err := h.cfg.Set(ctx, "", "tunnels.branch0001.enabled", "false"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.cfg.Commit(ctx, configdapi.CommitRequest{Who: "test", Message: "off"}); err != nil {
		t.Fatal(err)
	}
	rows, err := h.srv.tunnelRows(context.WithValue(ctx, snapshotKey{}, &snapshot{}))
	if err != nil || len(rows) != 2 || !rows[0].Enabled || rows[1].Enabled || !rows[1].Committed {
		t.Errorf("rows after disabling branch0001: %+v, %v", rows, err)
	}
	h.srv.sampler.onStop()
	if h.srv.runCache.get(mustRevision(t, h)) != nil {
		t.Errorf("the copy outlived the sessions")
	}
}

func mustRevision(t *testing.T, h *harness) uint64 {
	t.Helper()
	st, err := h.cfg.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Revision
}
