package bench

import (
	"strings"
	"testing"
)

func TestParseBenchOutput(t *testing.T) {
	out := `goos: linux
pkg: github.com/flashgate/flashgate/bench
BenchmarkTunnelTCP/plain/streams=1-2         	       1	     11389 Mbit/s	        58.65 receiver-cpu-%
BenchmarkEncap/aes128gcm16/1400-2   	 1000000	      1203 ns/op	1163.75 MB/s	       0 B/op	       0 allocs/op
PASS
`
	res, err := ParseBenchOutput(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("got %d results, want 2: %+v", len(res), res)
	}
	for _, c := range []struct {
		name, unit string
		want       float64
	}{
		{"BenchmarkTunnelTCP/plain/streams=1", "Mbit/s", 11389},
		{"BenchmarkTunnelTCP/plain/streams=1", "receiver-cpu-%", 58.65},
		{"BenchmarkEncap/aes128gcm16/1400", "allocs/op", 0},
		{"BenchmarkEncap/aes128gcm16/1400", "MB/s", 1163.75},
	} {
		got, ok := Find(res, c.name, c.unit)
		if !ok || got != c.want {
			t.Errorf("%s %s = %v (found %v), want %v", c.name, c.unit, got, ok, c.want)
		}
	}
	if res[0].Package != "github.com/flashgate/flashgate/bench" {
		t.Errorf("package = %q", res[0].Package)
	}
}

func TestFigureRatio(t *testing.T) {
	f := Measured("esp.tcp_1stream_mbps", 2710, "Mbit/s", ">= 1.0 x peer", "").Against("wireguard-go", 2540)
	if f.Ratio == nil || *f.Ratio < 1.066 || *f.Ratio > 1.067 {
		t.Fatalf("ratio = %v, want 2710/2540 = 1.0669", f.Ratio)
	}
	u := Unmeasured("ike.setup_ms", "ms", "ratio <= 1.0", "iked not built yet").Against("strongSwan", 2.4)
	if u.Ratio != nil {
		t.Fatalf("an unmeasured figure got a ratio: %v", *u.Ratio)
	}
}
