package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
)

// TestShowTunnelsMany: beyond ten tunnels show tunnels prints the counts
// and one line a tunnel, and a state or text narrows it; show status
// counts them and names the first few that are not up. A head office's
// iked is asked for counts and pages, never for every tunnel in one
// answer.
func TestShowTunnelsMany(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var ts []ipsec.TunnelStatus
	for i := range 300 {
		st := ipsec.TunnelStatus{Name: fmt.Sprintf("branch%03d", i), State: ipsec.StateUp, RemoteAddr: fmt.Sprintf("10.99.1.%d:4500", i%250), Since: now.Add(-3 * time.Hour)}
		if i%100 == 7 {
			st.State, st.Reason = ipsec.StateFailed, "peer answered NO_PROPOSAL_CHOSEN to IKE_SA_INIT: we offered aes128gcm16-prfsha256-ecp256 and a long tail"
		}
		if i >= 280 {
			st.State, st.Reason = ipsec.StateConnecting, "IKE_SA_INIT sent"
		}
		ts = append(ts, st)
	}
	var b strings.Builder
	printTunnelLines(&b, ts, len(ts), now)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 301 || !strings.HasPrefix(lines[0], "300 tunnels, 277 up, 20 connecting, 3 failed") {
		t.Fatalf("%d lines, first %q", len(lines), lines[0])
	}
	if want := "branch007 failed     10.99.1.7:4500      3h peer answered NO_PROPOSAL_CHOSEN to IKE_SA_INIT: we offer..."; lines[8] != want {
		t.Errorf("line of a failed tunnel:\n%q\nwant\n%q", lines[8], want)
	}

	var mu sync.Mutex
	var limits []string
	serve := ikedapi.ServeTunnels(func() []ipsec.TunnelStatus { return ts })
	sock := serveJSON(t, t.TempDir(), "iked", map[string]any{
		"GET /v1/tunnels": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			limits = append(limits, r.URL.Query().Get("limit"))
			mu.Unlock()
			serve(w, r)
		}),
	})
	s := &session{ctx: context.Background(), iked: ikedapi.NewClient(sock)}
	bounded := func(what string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, l := range limits {
			if l == "" || l == "0" {
				t.Errorf("%s asked iked for every tunnel in one answer (limit=%q)", what, l)
			}
		}
		limits = nil
	}
	for _, tc := range []struct {
		word  string
		lines int
		first string
	}{
		{"failed", 3, "branch007: FAILED"}, {"FAILED", 3, "branch007: FAILED"},
		{"up", 277, "277 tunnels of 300, 277 up"}, {"connecting", 20, "20 tunnels of 300, 20 connecting"},
		{"branch01", 10, "branch010: UP"}, {"branch1", 100, "100 tunnels of 300, 99 up, 1 failed"}, {"10.99.1.7:", 2, "branch007: FAILED"},
		{"no_proposal", 3, "branch007: FAILED"},
	} {
		b.Reset()
		if err := showTunnels(s.ctx, s, &b, []string{tc.word}); err != nil {
			t.Fatalf("show tunnels %s: %v", tc.word, err)
		}
		out := b.String()
		if n := strings.Count(out, "\n"); tc.lines > 10 && n != tc.lines+1 {
			t.Errorf("show tunnels %s: %d lines, want %d", tc.word, n, tc.lines)
		}
		if tc.lines <= 10 && strings.Count(out, ": FAILED")+strings.Count(out, ": UP") != tc.lines {
			t.Errorf("show tunnels %s:\n%s\nwant %d tunnels in full", tc.word, out, tc.lines)
		}
		if !strings.HasPrefix(out, tc.first) {
			t.Errorf("show tunnels %s starts %q, want %q", tc.word, firstLine(out), tc.first)
		}
		bounded("show tunnels " + tc.word)
	}
	b.Reset()
	if err := showTunnels(s.ctx, s, &b, []string{"down"}); err != nil || !strings.Contains(b.String(), "no tunnel of 300 is down") {
		t.Errorf("show tunnels down: %q, %v", b.String(), err)
	}
	b.Reset()
	if err := showTunnels(s.ctx, s, &b, nil); err != nil || strings.Count(b.String(), "\n") != 301 {
		t.Errorf("show tunnels: %d lines, %v", strings.Count(b.String(), "\n"), err)
	}
	bounded("show tunnels")

	b.Reset()
	showTunnelCounts(s.ctx, s, &b)
	got := b.String()
	for _, want := range []string{"tunnels: 277 of 300 up\n", "  branch007 failed: peer answered", "  branch207 failed",
		"  branch280 connecting: IKE_SA_INIT sent\n", "  and 10 more connecting (show tunnels connecting)\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("show status's tunnels:\n%s\nwant %q", got, want)
		}
	}
	if strings.Contains(got, "branch290") || strings.Count(got, "\n") != 15 {
		t.Errorf("show status names the first %d not up per state, then counts the rest:\n%s", notUpInStatus, got)
	}
	bounded("show status")

	b.Reset()
	if err := showTunnel(s.ctx, s, &b, []string{"nosuch"}); err == nil || !strings.Contains(err.Error(), `no tunnel named "nosuch" (300 tunnels: show tunnels TEXT finds them)`) {
		t.Errorf("show tunnel nosuch among 300: %v", err)
	}
	bounded("show tunnel")
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
