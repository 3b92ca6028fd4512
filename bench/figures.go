package bench

import (
	"fmt"
	"strings"
)

// Figures turns benchmark results into the named figures of
// ../shared/bench.md. Every named figure is reported: one that no suite
// measured gets a nil value and the reason, never an invented number.
func Figures(res []Result, failures []string) []Figure {
	why := "not measured in this run"
	if len(failures) > 0 {
		why = "not measured: " + strings.Join(failures, "; ")
	}
	var figs []Figure
	figs = append(figs, tunnelFigures(res, why)...)
	return figs
}

// tunnelFigures: esp.tcp_{1,4}stream_mbps, one row per peer. Our value is
// BenchmarkTunnelTCP/flashgate; until that runs, the peers' own figures are
// still reported (as their own rows) so a run is never empty.
func tunnelFigures(res []Result, why string) []Figure {
	var figs []Figure
	for _, streams := range []int{1, 4} {
		name := fmt.Sprintf("esp.tcp_%dstream_mbps", streams)
		get := func(kind string) (float64, bool) {
			return Find(res, fmt.Sprintf("BenchmarkTunnelTCP/%s/streams=%d", kind, streams), "Mbit/s")
		}
		ours, haveOurs := get("flashgate")
		notes := fmt.Sprintf("aes128gcm16, iperf3 10 s, %d stream(s), netns", streams)
		for _, peer := range []struct{ kind, label, target string }{
			{"wireguard-go", "wireguard-go", ">= 1.0 x peer"},
			{"strongswan", "strongSwan kernel-libipsec", ">= 5 x peer"},
			{"plain", "plain routing", ""},
		} {
			var f Figure
			if haveOurs {
				f = Measured(name, ours, "Mbit/s", peer.target, notes)
			} else {
				f = Unmeasured(name, "Mbit/s", peer.target, "flashgate's data plane: "+why)
			}
			if pv, ok := get(peer.kind); ok {
				f = f.Against(peer.label, pv)
			} else {
				f.Peer = peer.label
			}
			figs = append(figs, f)
		}
	}
	return figs
}
