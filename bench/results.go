package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Figure is one line of out/bench/results.json, as ../shared/bench.md
// defines it. Value is nil when the figure could not be measured; Notes then
// says why.
type Figure struct {
	Name      string   `json:"name"`
	Value     *float64 `json:"value"`
	Unit      string   `json:"unit"`
	Peer      string   `json:"peer,omitempty"`
	PeerValue *float64 `json:"peer_value,omitempty"`
	Ratio     *float64 `json:"ratio,omitempty"`
	Target    string   `json:"target,omitempty"`
	When      string   `json:"when"`
	Notes     string   `json:"notes,omitempty"`
}

// Result is one line of `go test -bench` output: the benchmark's full name
// (without the -GOMAXPROCS suffix) and its metrics by unit.
type Result struct {
	Package string
	Name    string
	N       int
	Metrics map[string]float64
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

// ParseBenchOutput reads `go test -bench` output and returns its results.
// Lines that are not benchmark results are ignored; a "pkg:" line sets the
// package of the results after it.
func ParseBenchOutput(r io.Reader) ([]Result, error) {
	var out []Result
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = p
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		res := Result{Package: pkg, Name: m[1], N: n, Metrics: map[string]float64{}}
		f := strings.Fields(m[3])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark %s: metric %q is not a number", res.Name, f[i])
			}
			res.Metrics[f[i+1]] = v
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// Find returns the metric of the first result whose name matches, or false.
func Find(results []Result, name, unit string) (float64, bool) {
	for _, r := range results {
		if r.Name == name {
			v, ok := r.Metrics[unit]
			return v, ok
		}
	}
	return 0, false
}

// Measured makes a figure with a value.
func Measured(name string, v float64, unit, target, notes string) Figure {
	return Figure{Name: name, Value: &v, Unit: unit, Target: target, Notes: notes, When: now()}
}

// Unmeasured makes a figure that could not be measured, with the reason.
func Unmeasured(name, unit, target, reason string) Figure {
	return Figure{Name: name, Unit: unit, Target: target, Notes: reason, When: now()}
}

// Against fills the peer, its value and the ratio value/peer.
func (f Figure) Against(peer string, pv float64) Figure {
	f.Peer = peer
	f.PeerValue = &pv
	if f.Value != nil && pv != 0 {
		r := *f.Value / pv
		f.Ratio = &r
	}
	return f
}

var now = func() string { return time.Now().UTC().Format(time.RFC3339) }

// WriteJSON writes the figures to dir/results.json.
func WriteJSON(dir string, figs []Figure) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(figs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644)
}

// WriteTable prints the figures as a readable table, sorted by name.
func WriteTable(w io.Writer, figs []Figure) {
	sorted := append([]Figure(nil), figs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue\tpeer\tpeer value\tratio\ttarget\tnotes")
	for _, f := range sorted {
		val := "—"
		if f.Value != nil {
			val = fmt.Sprintf("%s %s", num(*f.Value), f.Unit)
		}
		pv, ratio := "", ""
		if f.PeerValue != nil {
			pv = num(*f.PeerValue)
		}
		if f.Ratio != nil {
			ratio = fmt.Sprintf("%.2f", *f.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, val, f.Peer, pv, ratio, f.Target, f.Notes)
	}
	tw.Flush()
}

func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}
