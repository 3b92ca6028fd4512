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
	figs = append(figs, ikeFigures(res, why)...)
	return figs
}

// pair reports a figure measured for flashgate and for a peer in the same
// run (sub-benchmarks flashgate and peerKind of bench).
func pair(res []Result, name, bench, unit, metric, peerKind, peerLabel, target, notes, why string) Figure {
	var f Figure
	if v, ok := Find(res, bench+"/flashgate", metric); ok {
		f = Measured(name, v, unit, target, notes)
	} else {
		f = Unmeasured(name, unit, target, why)
	}
	if pv, ok := Find(res, bench+"/"+peerKind, metric); ok {
		return f.Against(peerLabel, pv)
	}
	f.Peer = peerLabel
	return f
}

func ikeFigures(res []Result, why string) []Figure {
	return []Figure{
		pair(res, "ike.setup_ms", "BenchmarkIKESetup", "ms", "ms/setup", "strongswan", "strongSwan", "ratio <= 1.0",
			"IKE_SA + CHILD_SA, PSK, ecp256, serial, initiator to responder of the same kind, data plane install included, netns", why),
		pair(res, "ike.setup_rate_per_s", "BenchmarkIKESetupRate", "SAs/s", "SAs/s", "strongswan", "strongSwan", "ratio >= 1.5",
			"200 setups at once per round (strongSwan: 8 parallel vici initiators), PSK, ecp256, netns", why),
	}
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
