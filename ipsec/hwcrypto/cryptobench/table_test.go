package cryptobench

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
)

// consoleRun is WriteTable's output of r as the appliance's console shows
// it to e2e's Shell: the echoed command, then the prompt with the table's
// title on its line, CRLF line ends, Shell's end mark and the next prompt.
func consoleRun(t *testing.T, r *Report) string {
	t.Helper()
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll("flashgate cryptobench -t 50ms -sizes 64,1024 -alg aes-128-cbc; echo '__'DONE\n$ "+buf.String()+"__DONE\n$ ", "\n", "\r\n")
}

// TestParseTableFromTheAppliance: the output of the qemu appliance's
// console as e2e's TestTwoAppliancesAndStrongSwan logged it (2026-12-03).
func TestParseTableFromTheAppliance(t *testing.T) {
	out := strings.ReplaceAll(`flashgate cryptobench -t 50ms -sizes 64,1024 -alg aes-128-cbc; echo '__'DONE
$ cryptobench: encryption in MB/s (10^6 bytes per second), 50ms per cell
algorithm    implementation                64 B   1024 B
aes-128-cbc  go crypto/aes                 7.78     8.47
aes-128-cbc  af_alg cbc(aes-generic)       1.43     8.13
__DONE
$ `, "\n", "\r\n")
	r, err := ParseTable(out)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Measured("aes-128-cbc")
	if err != nil || res.Driver != "cbc(aes-generic)" || !reflect.DeepEqual(res.MBps, []float64{1.43, 8.13}) {
		t.Errorf("Measured = %+v, %v; want cbc(aes-generic) at 1.43 and 8.13", res, err)
	}
	if r.Results[0].Driver != "go crypto/aes" || r.Results[0].Impl != "go" {
		t.Errorf("Go's row: %+v", r.Results[0])
	}
}

// TestParseTable: the table reads back as it was written, between a
// console's echo and prompt, numbers of nine characters (no space between cells) included.
func TestParseTable(t *testing.T) {
	want := &Report{Sizes: []int{64, 1024}, PerCell: 50 * time.Millisecond, Results: []Result{
		{Algorithm: "aes-128-cbc", Impl: "go", Driver: "go crypto/aes", MBps: []float64{312.5, 123456.78}},
		{Algorithm: "aes-128-cbc", Impl: "af_alg", Driver: "cbc-aes-aesni", MBps: []float64{45.67, 234567.89}},
		{Algorithm: "aes-128-cbc", Impl: "af_alg", Driver: "geode-cbc", Engine: "geode-aes", MBps: []float64{3.1, 20}},
		{Algorithm: "aes-128-cbc", Impl: "af_alg", Driver: "cbc(aes-generic)", Error: "differs from Go's output: driver broken"},
	}}
	got, err := ParseTable(consoleRun(t, want))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseTable(WriteTable(r)) =\n%+v\nwant\n%+v", got, want)
	}
	if res, err := got.Measured("aes-128-cbc"); err != nil || res.Driver != "cbc-aes-aesni" {
		t.Errorf("Measured(aes-128-cbc) = %+v, %v; want the cbc-aes-aesni row", res, err)
	}
}

// TestMeasuredFailsWithoutARow: what the appliance test checks fails on
// every output that is not a measured af_alg row, the echoed command that
// names "cbc" above all (the check this replaced matched it).
func TestMeasuredFailsWithoutARow(t *testing.T) {
	full := &Report{Sizes: []int{64, 1024}, PerCell: 50 * time.Millisecond, Results: []Result{
		{Algorithm: "aes-128-cbc", Impl: "go", Driver: "crypto/aes", MBps: []float64{312.5, 900}},
		{Algorithm: "aes-128-cbc", Impl: "af_alg", Driver: "cbc(aes-generic)", MBps: []float64{45.67, 80}},
	}}
	out := consoleRun(t, full)
	lines := strings.SplitAfter(out, "\n")
	for _, tc := range []struct{ name, out string }{
		{"the echoed command alone", lines[0]},
		{"title and header, no row", strings.Join(lines[:3], "")},
		{"cut after the go row", strings.Join(lines[:4], "")},
		{"no AF_ALG", consoleRun(t, &Report{Sizes: []int{64, 1024}, Results: []Result{full.Results[0],
			{Algorithm: "aes-128-cbc", Impl: "af_alg", Driver: "-", Error: "AF_ALG not available: address family not supported by protocol"}}})},
		{"a zero throughput", consoleRun(t, &Report{Sizes: []int{64, 1024}, Results: []Result{full.Results[0],
			{Algorithm: "aes-128-cbc", Impl: "af_alg", Driver: "cbc(aes-generic)", MBps: []float64{0, 80}}}})},
		{"another algorithm", consoleRun(t, &Report{Sizes: []int{64, 1024}, Results: []Result{
			{Algorithm: "aes-256-cbc", Impl: "af_alg", Driver: "cbc(aes-generic)", MBps: []float64{40, 70}}}})},
	} {
		r, err := ParseTable(tc.out)
		if err == nil {
			_, err = r.Measured("aes-128-cbc")
		}
		if err == nil {
			t.Errorf("%s: an af_alg aes-128-cbc row was found in\n%s", tc.name, tc.out)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
	// A row cut in the middle of its numbers is an error, not a figure.
	cut := strings.Join(lines[:4], "") + strings.TrimRight(lines[4], "\r\n")[:len(strings.TrimRight(lines[4], "\r\n"))-4] + "\r\n~ # "
	if _, err := ParseTable(cut); err == nil {
		t.Errorf("a row cut in its numbers parses:\n%s", cut)
	}
	if r, err := ParseTable(out); err != nil {
		t.Errorf("the whole output: %v", err)
	} else if _, err := r.Measured("aes-128-cbc"); err != nil {
		t.Errorf("the whole output: %v", err)
	}
}
