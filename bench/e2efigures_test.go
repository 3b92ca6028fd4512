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
