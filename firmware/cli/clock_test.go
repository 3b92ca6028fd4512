package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/services/netd/netdapi"
)

func TestWriteTimeSync(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		st   *netdapi.TimeStatus
		want []string // lines, in order
	}{
		{"no client", nil, []string{"NTP: this netd runs no NTP client"}},
		{"off", &netdapi.TimeStatus{State: "off", Servers: []string{}}, []string{"NTP: off (no servers: set system.ntp_servers)"}},
		{"synchronized", &netdapi.TimeStatus{State: "synchronized", Servers: []string{"pool.ntp.org"}, Server: "pool.ntp.org (192.0.2.1)",
			Stratum: 2, LastSync: now.Add(-90 * time.Second), OffsetSeconds: -0.0123, DelaySeconds: 0.0042, Correction: "slewed",
			NextPoll: now.Add(64 * time.Second)},
			[]string{"NTP: synchronized with pool.ntp.org (192.0.2.1) (stratum 2), 1m30s ago",
				"  last correction -0.012 s (slewed), round trip 4.2 ms", "  next poll in 1m4s"}},
		{"failing", &netdapi.TimeStatus{State: "unsynchronized", Servers: []string{"ntp.example", "192.0.2.9"},
			LastError: "ntp.example: no answer in 5s", NextPoll: now.Add(8 * time.Second)},
			[]string{"NTP: unsynchronized, servers ntp.example, 192.0.2.9", "  last poll failed: ntp.example: no answer in 5s", "  next poll in 8s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			writeTimeSync(&b, tc.st, now)
			if got, want := b.String(), strings.Join(tc.want, "\n")+"\n"; got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
