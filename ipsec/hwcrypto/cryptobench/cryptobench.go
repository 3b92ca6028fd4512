// Package cryptobench measures the crypto the board can do, like `openssl
// speed -evp`: for each IPsec cipher, every kernel driver of it (the board's
// engine, the generic software one) through AF_ALG, and Go's own
// implementation, at block sizes from 16 to 8192 bytes. `flashgate
// cryptobench` prints the table; the web UI's System page shows the Report.
//
// Each cell runs for a bounded time. Before timing, every AF_ALG driver
// encrypts a test message and must produce the same bytes as Go: a driver
// that disagrees is reported, not measured.
package cryptobench

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashgate/flashgate/ipsec/hwcrypto"
)

// DefaultSizes are openssl speed's block sizes, without 16 KiB.
var DefaultSizes = []int{16, 64, 256, 1024, 8192}

// Options say what to measure.
type Options struct {
	Sizes   []int         // block sizes in bytes; DefaultSizes if empty
	PerCell time.Duration // time spent on each cell; 300 ms if 0
	Root    string        // where proc/crypto is; "/" if empty
	Only    []string      // algorithm names to run ("aes-128-cbc"); all if empty
}

// Result is one row: one implementation of one algorithm.
type Result struct {
	Algorithm string    `json:"algorithm"`        // "aes-128-cbc"
	Impl      string    `json:"impl"`             // "go" or "af_alg"
	Driver    string    `json:"driver"`           // kernel driver name, or Go's package
	Engine    string    `json:"engine,omitempty"` // hardware engine behind the driver
	MBps      []float64 `json:"mbps,omitempty"`   // 10^6 bytes per second, per size
	Error     string    `json:"error,omitempty"`  // why the row has no numbers
}

// Report is a whole run.
type Report struct {
	Sizes   []int         `json:"sizes"`
	PerCell time.Duration `json:"per_cell_ns"`
	Results []Result      `json:"results"`
}

// Run measures every selected algorithm. It fails only on bad options;
// an implementation that cannot run is a row with Error set.
func Run(opts Options) (*Report, error) {
	if len(opts.Sizes) == 0 {
		opts.Sizes = DefaultSizes
	}
	if opts.PerCell <= 0 {
		opts.PerCell = 300 * time.Millisecond
	}
	if opts.Root == "" {
		opts.Root = "/"
	}
	for _, n := range opts.Sizes {
		if n <= 0 || n > 1<<20 {
			return nil, fmt.Errorf("block size %d: want 1..1048576", n)
		}
	}
	var algs []*algorithm
	for i := range algorithms {
		if len(opts.Only) == 0 || contains(opts.Only, algorithms[i].Name) {
			algs = append(algs, &algorithms[i])
		}
	}
	if len(algs) == 0 {
		return nil, fmt.Errorf("no algorithm matches %q", opts.Only)
	}
	table, tableErr := hwcrypto.ReadCryptoTable(opts.Root)
	afalgErr := afalgAvailable()

	r := &Report{Sizes: opts.Sizes, PerCell: opts.PerCell}
	for _, a := range algs {
		r.Results = append(r.Results, runGo(a, opts))
		switch {
		case afalgErr != nil:
			r.Results = append(r.Results, Result{Algorithm: a.Name, Impl: "af_alg", Driver: "-", Error: "AF_ALG not available: " + afalgErr.Error()})
		case tableErr != nil:
			r.Results = append(r.Results, Result{Algorithm: a.Name, Impl: "af_alg", Driver: "-", Error: "reading /proc/crypto: " + tableErr.Error()})
		default:
			for _, d := range drivers(a, table) {
				r.Results = append(r.Results, runALG(a, d, opts))
			}
		}
	}
	return r, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// drivers lists the kernel drivers to measure for a: every usable
// registered implementation, best first, and the generic one, which is
// instantiated on bind if nothing has asked for it yet.
func drivers(a *algorithm, table hwcrypto.CryptoTable) []string {
	var out []string
	var best []hwcrypto.CryptoAlg
	for _, e := range table {
		if e.Name == a.Kernel && e.Usable() {
			best = append(best, e)
		}
	}
	for len(best) > 0 { // by priority, highest first
		top := 0
		for i := range best {
			if best[i].Priority > best[top].Priority {
				top = i
			}
		}
		if !contains(out, best[top].Driver) {
			out = append(out, best[top].Driver)
		}
		best = append(best[:top], best[top+1:]...)
	}
	if !contains(out, a.Generic) {
		out = append(out, a.Generic)
	}
	return out
}

// testVector returns a fixed key, IV and message; the message is a whole
// number of blocks for every algorithm.
func testVector(a *algorithm) (key, iv, msg []byte) {
	key = bytes.Repeat([]byte{0x5a}, a.KeyLen)
	for i := range key {
		key[i] ^= byte(i * 7)
	}
	iv = bytes.Repeat([]byte{0xa5}, a.IVLen)
	msg = []byte("flashgate cryptobench: the same bytes out of every driver, please")[:64]
	return key, iv, msg
}

func runGo(a *algorithm, opts Options) Result {
	res := Result{Algorithm: a.Name, Impl: "go", Driver: "go " + goPackage(a)}
	key, iv, _ := testVector(a)
	seal, err := a.newGo(key)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	for _, n := range opts.Sizes {
		n = roundUp(n, a.BlockLen)
		src := make([]byte, n)
		dst := make([]byte, n+a.TagLen)
		res.MBps = append(res.MBps, measure(opts.PerCell, n, func() error {
			seal(dst, iv, src)
			return nil
		}))
	}
	return res
}

func goPackage(a *algorithm) string {
	switch {
	case strings.HasPrefix(a.Name, "aes"):
		return "crypto/aes"
	case strings.HasPrefix(a.Name, "chacha"):
		return "x/crypto/chacha20poly1305"
	default:
		return "crypto/des"
	}
}

func runALG(a *algorithm, driver string, opts Options) Result {
	res := Result{Algorithm: a.Name, Impl: "af_alg", Driver: driver, Engine: hwcrypto.EngineOf(driver)}
	key, iv, msg := testVector(a)
	s, err := openALG(a, driver, key, iv)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer s.close()

	// Check the driver against Go before trusting its speed.
	seal, err := a.newGo(key)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	want := make([]byte, len(msg)+a.TagLen)
	seal(want, iv, msg)
	got := make([]byte, len(msg)+a.TagLen)
	if err := s.encrypt(got, msg); err != nil {
		res.Error = "test encryption: " + err.Error()
		return res
	}
	if !bytes.Equal(got, want) {
		res.Error = "result differs from Go's: driver broken or misused, not measured"
		return res
	}

	var opErr error
	for _, n := range opts.Sizes {
		n = roundUp(n, a.BlockLen)
		src := make([]byte, n)
		dst := make([]byte, n+a.TagLen)
		res.MBps = append(res.MBps, measure(opts.PerCell, n, func() error {
			if opErr == nil {
				opErr = s.encrypt(dst, src)
			}
			return opErr
		}))
		if opErr != nil {
			res.MBps, res.Error = nil, opErr.Error()
			break
		}
	}
	return res
}

func roundUp(n, block int) int { return (n + block - 1) / block * block }

// measure runs op on n-byte blocks for about d and returns 10^6 bytes per
// second. The clock is read once per batch, and batches grow until one
// takes a millisecond, so that reading it does not weigh on 16-byte cells.
func measure(d time.Duration, n int, op func() error) float64 {
	var ops int
	batch := 1
	start := time.Now()
	deadline := start.Add(d)
	for {
		bstart := time.Now()
		for range batch {
			if op() != nil {
				return 0
			}
		}
		ops += batch
		now := time.Now()
		if !now.Before(deadline) {
			return float64(ops) * float64(n) / now.Sub(start).Seconds() / 1e6
		}
		if now.Sub(bstart) < time.Millisecond {
			batch *= 2
		}
	}
}

// WriteTable prints the report like openssl speed: one row per
// implementation, one column per block size.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "cryptobench: encryption in MB/s (10^6 bytes per second), %v per cell\n", r.PerCell)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "algorithm\timplementation\t")
	for _, n := range r.Sizes {
		fmt.Fprintf(tw, "%9s", strconv.Itoa(n)+" B")
	}
	fmt.Fprintln(tw)
	for _, res := range r.Results {
		name := res.Driver
		if res.Impl == "af_alg" {
			name = "af_alg " + res.Driver
		}
		if res.Engine != "" {
			name += " [" + res.Engine + "]"
		}
		fmt.Fprintf(tw, "%s\t%s\t", res.Algorithm, name)
		if res.Error != "" {
			fmt.Fprintf(tw, "  %s\n", res.Error) // after the last tab: not a column
			continue
		}
		for _, v := range res.MBps {
			fmt.Fprintf(tw, "%9.2f", v)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// Main is `flashgate cryptobench`.
func Main(args []string) int {
	fs := flag.NewFlagSet("cryptobench", flag.ContinueOnError)
	perCell := fs.Duration("t", 300*time.Millisecond, "time per cell")
	sizes := fs.String("sizes", "16,64,256,1024,8192", "block sizes in bytes, comma-separated")
	only := fs.String("alg", "", "algorithms to run, comma-separated (aes-128-cbc, aes-256-cbc, aes-128-gcm, chacha20-poly1305, des-ede3-cbc); all if empty")
	root := fs.String("root", "/", "root of the system whose /proc/crypto lists the drivers")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	opts := Options{PerCell: *perCell, Root: *root}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			fmt.Fprintf(os.Stderr, "cryptobench: -sizes: %v\n", err)
			return 2
		}
		opts.Sizes = append(opts.Sizes, n)
	}
	if *only != "" {
		opts.Only = strings.Split(*only, ",")
	}
	r, err := Run(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cryptobench: %v\n", err)
		return 2
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			fmt.Fprintf(os.Stderr, "cryptobench: %v\n", err)
			return 1
		}
		return 0
	}
	if err := r.WriteTable(os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "cryptobench: %v\n", err)
		return 1
	}
	return 0
}
