package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/ipsec"
)

// TestShowTunnelsMany: beyond ten tunnels show tunnels prints the counts
// and one line a tunnel, and a state or text narrows it.
func TestShowTunnelsMany(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var ts []ipsec.TunnelStatus
	for i := range 300 {
		st := ipsec.TunnelStatus{Name: fmt.Sprintf("branch%03d", i), State: ipsec.StateUp, RemoteAddr: fmt.Sprintf("10.99.1.%d:4500", i%250), Since: now.Add(-3 * time.Hour)}
		if i%100 == 7 {
			st.State, st.Reason = ipsec.StateFailed, "peer answered NO_PROPOSAL_CHOSEN to IKE_SA_INIT: we offered aes128gcm16-prfsha256-ecp256 and a long tail"
		}
		ts = append(ts, st)
	}
	var b strings.Builder
	printTunnelLines(&b, ts, len(ts), now)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 301 || !strings.HasPrefix(lines[0], "300 tunnels, 297 up, 3 failed") {
		t.Fatalf("%d lines, first %q", len(lines), lines[0])
	}
	if want := "branch007 failed     10.99.1.7:4500      3h peer answered NO_PROPOSAL_CHOSEN to IKE_SA_INIT: we offer..."; lines[8] != want {
		t.Errorf("line of a failed tunnel:\n%q\nwant\n%q", lines[8], want)
	}
	for _, tc := range []struct {
		word string
		want int
	}{{"failed", 3}, {"FAILED", 3}, {"up", 297}, {"down", 0}, {"branch01", 10}, {"10.99.1.7:", 2}, {"no_proposal", 3}} {
		if got := filterTunnels(ts, tc.word); len(got) != tc.want {
			t.Errorf("show tunnels %s: %d tunnels, want %d", tc.word, len(got), tc.want)
		}
	}
}
