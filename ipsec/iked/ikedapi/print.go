package ikedapi

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flashgate/flashgate/ipsec"
)

// PrintStatus writes tunnels in the layout of swanctl --list-sas: one
// block per tunnel, its IKE_SA, then each CHILD_SA with SPIs, counters and
// selectors. A tunnel that is not up says why in a reason line.
func PrintStatus(w io.Writer, ts []ipsec.TunnelStatus, now time.Time) {
	if len(ts) == 0 {
		fmt.Fprintln(w, "no tunnels configured")
	}
	ago := func(t time.Time) string { return shortDuration(now.Sub(t)) }
	rekey := func(d time.Duration) string {
		if d <= 0 {
			return "no rekey scheduled"
		}
		return "rekeying in " + shortDuration(d)
	}
	for _, t := range ts {
		fmt.Fprintf(w, "%s: %s since %s ago, data plane %s", t.Name, strings.ToUpper(string(t.State)), ago(t.Since), t.DataPlane)
		if t.Driver != "" {
			fmt.Fprintf(w, ", crypto %s", t.Driver)
		}
		if t.Interface != "" {
			fmt.Fprintf(w, ", route-based via %s", t.Interface)
		}
		fmt.Fprintln(w)
		if t.Reason != "" {
			fmt.Fprintf(w, "  reason: %s\n", t.Reason)
		}
		for _, weak := range t.Weak {
			fmt.Fprintf(w, "  weak proposal: %s\n", weak)
		}
		if t.IKE != nil {
			mark := func(init bool) string {
				if init {
					return "*"
				}
				return ""
			}
			natt := ""
			if t.IKE.NATT {
				natt = ", UDP-encapsulated"
			}
			fmt.Fprintf(w, "  IKE_SA %s_i%s %s_r%s, %s <-> %s%s\n", t.IKE.InitiatorSPI, mark(t.IKE.Initiator), t.IKE.ResponderSPI, mark(!t.IKE.Initiator), t.LocalAddr, t.RemoteAddr, natt)
			fmt.Fprintf(w, "    %s, established %s ago, %s\n", t.IKE.Proposal, ago(t.IKE.Established), rekey(t.IKE.RekeyIn))
		}
		for _, c := range t.Children {
			fmt.Fprintf(w, "  CHILD_SA %s, installed %s ago, %s\n", c.Proposal, ago(c.Established), rekey(c.RekeyIn))
			fmt.Fprintf(w, "    in  %s, %10d bytes, %8d packets, %d dropped\n", c.InboundSPI, c.BytesIn, c.PacketsIn, c.Drops)
			fmt.Fprintf(w, "    out %s, %10d bytes, %8d packets\n", c.OutboundSPI, c.BytesOut, c.PacketsOut)
			fmt.Fprintf(w, "    local  %s\n    remote %s\n", strings.Join(c.LocalTS, " "), strings.Join(c.RemoteTS, " "))
		}
	}
}

// shortDuration prints whole seconds without the zero units Duration.String
// keeps ("59m", not "59m0s").
func shortDuration(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return d.String()
	}
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
