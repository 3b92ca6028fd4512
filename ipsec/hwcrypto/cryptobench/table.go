package cryptobench

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseTable reads back the table WriteTable prints, from text that may
// hold other lines around it (a shell's echo of the command, its prompt):
// what a test that ran `flashgate cryptobench` on a console has to check.
// The table starts at its title (after the prompt, on a console); it ends at the first line that is not
// a row. A row with an error has Error set and no numbers; a row whose
// numbers do not parse is an error, so that a mangled table is never read
// as a measurement.
func ParseTable(text string) (*Report, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r", ""), "\n")
	const title = "cryptobench: encryption in MB/s"
	start := -1
	for i, l := range lines {
		// A shell's prompt may come before the title on its line.
		if at := strings.Index(l, title); at >= 0 {
			start, lines[i] = i, l[at:]
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no cryptobench table (no line with %q)", title)
	}
	r := &Report{}
	if _, cell, ok := strings.Cut(lines[start], ", "); ok {
		if d, err := time.ParseDuration(strings.TrimSuffix(cell, " per cell")); err == nil {
			r.PerCell = d
		}
	}
	if start+1 >= len(lines) {
		return nil, fmt.Errorf("cryptobench table: no header after its title")
	}
	// The header: "algorithm  implementation" as two tabwriter cells, then
	// every size right-aligned in 9 characters, the same text after the
	// last tab that carries a row's numbers (or its error).
	header := lines[start+1]
	implAt := strings.Index(header, "implementation")
	if !strings.HasPrefix(header, "algorithm") || implAt < 0 {
		return nil, fmt.Errorf("cryptobench table: header %q is not \"algorithm implementation <sizes>\"", header)
	}
	sizes := strings.Fields(header[implAt+len("implementation"):])
	if len(sizes)%2 != 0 {
		return nil, fmt.Errorf("cryptobench table: header sizes %q are not \"<n> B\" pairs", sizes)
	}
	for i := 0; i < len(sizes); i += 2 {
		n, err := strconv.Atoi(sizes[i])
		if err != nil || sizes[i+1] != "B" {
			return nil, fmt.Errorf("cryptobench table: header size %q %q", sizes[i], sizes[i+1])
		}
		r.Sizes = append(r.Sizes, n)
	}
	if len(r.Sizes) == 0 {
		return nil, fmt.Errorf("cryptobench table: header %q names no block size", header)
	}
	cellsAt := len(strings.TrimRight(header, " ")) - 9*len(r.Sizes)
	if cellsAt <= implAt {
		return nil, fmt.Errorf("cryptobench table: header %q is shorter than its sizes", header)
	}
	for _, l := range lines[start+2:] {
		if len(l) <= cellsAt || strings.TrimSpace(l[:implAt]) == "" || strings.TrimSpace(l[implAt:cellsAt]) == "" ||
			l[implAt-1] != ' ' || l[cellsAt-1] != ' ' {
			break // the prompt, or whatever follows the table
		}
		res := Result{Algorithm: strings.TrimSpace(l[:implAt])}
		impl := strings.TrimSpace(l[implAt:cellsAt])
		res.Impl, res.Driver = "go", impl
		if d, ok := strings.CutPrefix(impl, "af_alg "); ok {
			res.Impl, res.Driver = "af_alg", d
			if i := strings.Index(d, " ["); i >= 0 && strings.HasSuffix(d, "]") {
				res.Driver, res.Engine = d[:i], d[i+2:len(d)-1]
			}
		}
		cells := l[cellsAt:]
		if strings.HasPrefix(cells, "  ") && !startsNumber(strings.TrimSpace(cells)) {
			res.Error = strings.TrimSpace(cells)
			r.Results = append(r.Results, res)
			continue
		}
		// Fixed 9-character cells: %9.2f leaves no space between numbers
		// of 9 characters or more, so fields cannot be split on spaces.
		if len(cells) != 9*len(r.Sizes) {
			return nil, fmt.Errorf("cryptobench table: row %q has %d characters of numbers, want %d for %d sizes", l, len(cells), 9*len(r.Sizes), len(r.Sizes))
		}
		for i := range r.Sizes {
			v, err := strconv.ParseFloat(strings.TrimSpace(cells[9*i:9*i+9]), 64)
			if err != nil {
				return nil, fmt.Errorf("cryptobench table: row %q, %d B: %w", l, r.Sizes[i], err)
			}
			res.MBps = append(res.MBps, v)
		}
		r.Results = append(r.Results, res)
	}
	return r, nil
}

func startsNumber(s string) bool { return s != "" && (s[0] >= '0' && s[0] <= '9' || s[0] == '-') }

// Measured returns the first af_alg row of algorithm that has a throughput
// above zero at every size, and why there is none: a test that asked
// cryptobench for a kernel driver's figures checks with it that the kernel
// really was measured, not just that the command ran.
func (r *Report) Measured(algorithm string) (Result, error) {
	var seen []string
	for _, res := range r.Results {
		if res.Algorithm != algorithm || res.Impl != "af_alg" {
			continue
		}
		switch {
		case res.Error != "":
			seen = append(seen, res.Driver+": "+res.Error)
		case res.Driver == "" || res.Driver == "-":
			seen = append(seen, "a row naming no driver")
		case len(res.MBps) != len(r.Sizes) || len(r.Sizes) == 0:
			seen = append(seen, fmt.Sprintf("%s: %d numbers for %d sizes", res.Driver, len(res.MBps), len(r.Sizes)))
		default:
			ok := true
			for _, v := range res.MBps {
				ok = ok && v > 0
			}
			if ok {
				return res, nil
			}
			seen = append(seen, fmt.Sprintf("%s: %v MB/s", res.Driver, res.MBps))
		}
	}
	if len(seen) == 0 {
		return Result{}, fmt.Errorf("no af_alg row of %s", algorithm)
	}
	return Result{}, fmt.Errorf("no af_alg row of %s with a throughput at every size: %s", algorithm, strings.Join(seen, "; "))
}
