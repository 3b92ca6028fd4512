package bench

import (
	"strings"
	"testing"
)

func TestE2EThroughputAgainstPlainRouting(t *testing.T) {
	out := `pkg: github.com/flashgate/flashgate/e2e
BenchmarkE2ETunnelUp-2   	       1	        42.00 Mbit/s	         0 ns/op	        84.00 plain_Mbit/s	        19.50 tunnel_up_s
PASS
`
	res, err := ParseBenchOutput(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	figs := map[string]Figure{}
	for _, f := range e2eFigures(res, "not measured") {
		figs[f.Name] = f
	}
	tcp := figs["e2e.tcp_1stream_mbps"]
	if tcp.Value == nil || *tcp.Value != 42 || tcp.Peer != "plain routing" || tcp.PeerValue == nil || *tcp.PeerValue != 84 ||
		tcp.Ratio == nil || *tcp.Ratio != 0.5 {
		t.Errorf("e2e.tcp_1stream_mbps = %+v, want 42 Mbit/s against plain routing 84, ratio 0.5", tcp)
	}
	if up := figs["e2e.tunnel_up_s"]; up.Value == nil || *up.Value != 19.5 {
		t.Errorf("e2e.tunnel_up_s = %+v, want 19.5", up)
	}

	// Not run: both reported, without values, the peer still named.
	for _, f := range e2eFigures(nil, "not measured: e2e failed") {
		if f.Value != nil || f.Ratio != nil || f.Notes != "not measured: e2e failed" {
			t.Errorf("unmeasured %s = %+v, want no value, no ratio and the reason", f.Name, f)
		}
		if f.Name == "e2e.tcp_1stream_mbps" && f.Peer != "plain routing" {
			t.Errorf("unmeasured %s names peer %q, want plain routing", f.Name, f.Peer)
		}
	}
}

func TestRouteFigures(t *testing.T) {
	out := `pkg: github.com/flashgate/flashgate/bench
BenchmarkRouteTunnelTCP-2   	      11	       1000 policy_Mbit/s	      970.0 route_Mbit/s	         0.9600 route_ratio	         3.100 route_cpu_ns/B	         3.200 policy_cpu_ns/B	         0 ns/op
BenchmarkRouteFailover-2    	       3	         2.5 failover_s	         0 ns/op
PASS
`
	res, err := ParseBenchOutput(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	figs := map[string]Figure{}
	for _, f := range routeFigures(res, "not measured") {
		figs[f.Name] = f
	}
	tcp := figs["esp.route.tcp_1stream_mbps"]
	if tcp.Value == nil || *tcp.Value != 970 || tcp.Peer != "policy tunnel" || tcp.PeerValue == nil || *tcp.PeerValue != 1000 ||
		tcp.Ratio == nil || *tcp.Ratio != 0.96 {
		t.Errorf("esp.route.tcp_1stream_mbps = %+v, want 970 against the policy tunnel's 1000, ratio 0.96 (the rounds' median, not 970/1000)", tcp)
	}
	if !strings.Contains(tcp.Notes, "route 3.10 ns, policy 3.20 ns") {
		t.Errorf("esp.route.tcp_1stream_mbps notes %q lack the CPU per byte of both", tcp.Notes)
	}
	if f := figs["route.failover_s"]; f.Value == nil || *f.Value != 2.5 {
		t.Errorf("route.failover_s = %+v, want 2.5", f)
	}
	for _, f := range routeFigures(nil, "not measured: x") {
		if f.Value != nil || f.Notes != "not measured: x" {
			t.Errorf("unmeasured %s = %+v", f.Name, f)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{0.7, 1.5, 1.0}, 1.0}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
