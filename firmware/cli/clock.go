package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/flashgate/flashgate/services/netd/netdapi"
)

// `show clock` answers "is the clock right, and if not, why": the time in
// the configured zone and in UTC, and netd's NTP client as it reports it in
// GET /v1/status (time). A wrong clock breaks nothing in IKE with PSKs, but
// it makes every log line and the web UI's "since" columns lie.

func showClock(ctx context.Context, s *session, b *strings.Builder, args []string) error {
	if err := noArgs(args, "show clock"); err != nil {
		return err
	}
	now := time.Now()
	zone, _ := now.Zone()
	fmt.Fprintf(b, "time: %s (%s), %s UTC\n", now.Format("2006-01-02 15:04:05"), zone, now.UTC().Format("15:04:05"))
	st, err := s.netd.Status(ctx)
	if err != nil {
		fmt.Fprintf(b, "NTP: netd is not answering (%s)\n", reason(err))
		return nil
	}
	writeTimeSync(b, st.Time, now)
	return nil
}

// writeTimeSync prints the NTP client's state, saying why the clock is
// not kept when it is not.
func writeTimeSync(b *strings.Builder, t *netdapi.TimeStatus, now time.Time) {
	if t == nil {
		b.WriteString("NTP: this netd runs no NTP client\n")
		return
	}
	switch t.State {
	case "off":
		b.WriteString("NTP: off (no servers: set system.ntp_servers)\n")
		return
	case "synchronized":
		fmt.Fprintf(b, "NTP: synchronized with %s (stratum %d), %s ago\n", t.Server, t.Stratum, roundSeconds(now.Sub(t.LastSync)))
		fmt.Fprintf(b, "  last correction %+.3f s (%s), round trip %.1f ms\n", t.OffsetSeconds, orDash(t.Correction), t.DelaySeconds*1000)
	default:
		fmt.Fprintf(b, "NTP: %s, servers %s\n", t.State, strings.Join(t.Servers, ", "))
		if !t.LastSync.IsZero() {
			fmt.Fprintf(b, "  last synchronized with %s %s ago\n", t.Server, roundSeconds(now.Sub(t.LastSync)))
		}
	}
	if t.LastError != "" {
		fmt.Fprintf(b, "  last poll failed: %s\n", t.LastError)
	}
	if !t.NextPoll.IsZero() {
		fmt.Fprintf(b, "  next poll in %s\n", roundSeconds(t.NextPoll.Sub(now)))
	}
}

// roundSeconds prints a duration to the second: "17m4s".
func roundSeconds(d time.Duration) string { return max(d, 0).Round(time.Second).String() }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
