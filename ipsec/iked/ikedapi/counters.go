package ikedapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/flashgate/flashgate/ipsec"
)

// TunnelCounters is one tunnel's CHILD_SA byte counters, the answer of GET
// /v1/counters: all that the web UI's throughput graphs sample, every 5 s
// while someone is logged in. A tunnel's full status carries its IKE SA,
// proposals, selectors, times and events too: at a thousand tunnels
// reading every status cost iked 44 ms and 11 MB of garbage (iked's
// BenchmarkStatusRead), the counters a small part of that
// (BenchmarkCountersRead).
type TunnelCounters struct {
	Name     string          `json:"name"`
	Children []ChildCounters `json:"children,omitempty"`
}

// ChildCounters are one CHILD_SA's byte counters, keyed by its inbound
// SPI: a rekey replaces the SA and its counters start again from zero.
type ChildCounters struct {
	InboundSPI uint32 `json:"in_spi"`
	BytesIn    uint64 `json:"bytes_in"`
	BytesOut   uint64 `json:"bytes_out"`
}

// Counters returns every tunnel's CHILD_SA byte counters, in name order.
func (c *Client) Counters(ctx context.Context) ([]TunnelCounters, error) {
	var out []TunnelCounters
	err := c.do(ctx, http.MethodGet, "/v1/counters", &out)
	return out, err
}

// CountersOf is the counters part of tunnel statuses, as GET /v1/counters
// answers it for the same tunnels. For the in-memory twins of iked's API.
func CountersOf(ts []ipsec.TunnelStatus) []TunnelCounters {
	out := make([]TunnelCounters, 0, len(ts))
	for _, t := range ts {
		tc := TunnelCounters{Name: t.Name}
		for _, c := range t.Children {
			spi, err := strconv.ParseUint(c.InboundSPI, 16, 32)
			if err != nil {
				continue // not an SA's SPI: nothing to count it by
			}
			tc.Children = append(tc.Children, ChildCounters{InboundSPI: uint32(spi), BytesIn: c.BytesIn, BytesOut: c.BytesOut})
		}
		out = append(out, tc)
	}
	return out
}

// ServeCounters answers GET /v1/counters from the list of tunnels list
// returns (in name order), as iked does. For the in-memory twins of iked's
// API in other packages' tests.
func ServeCounters(list func() []ipsec.TunnelStatus) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(CountersOf(list()))
	}
}
