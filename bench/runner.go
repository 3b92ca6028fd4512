package bench

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Suite is one `go test -bench` invocation the runner makes.
type Suite struct {
	Package   string // "./bench"
	Pattern   string // -bench regexp
	Benchtime string // "1x" for the heavy ones
	Timeout   time.Duration
	// Board, if set, runs the package's benchmarks compiled for that
	// board (its GOARCH, GO386) in qemu on its kernel (runInVM); the
	// results' names get "@"+Board.
	Board string
}

// boardCrypto is what the board builds are measured on: DH per group and a
// whole IKE_SA setup (ipsec/ike, both ends in one process), ESP per suite.
const (
	boardCryptoIKE = "^Benchmark(DH|Setup)$/^(modp2048|ecp256|ecp384|curve25519)$"
	boardCryptoESP = "^Benchmark(Encap|Decap)$/^(aes128gcm16|aes128-sha256|chacha20poly1305)$/^1400$"
)

// Suites are run in this order. Each package's figures are measured in one
// process, one after another, so the side-by-side ones share the machine's
// state of the moment.
var Suites = []Suite{
	{Package: "./images", Pattern: "Image$", Benchtime: "1x", Timeout: 30 * time.Minute},
	{Package: "./images", Pattern: "BootQEMU", Benchtime: "3x", Timeout: 10 * time.Minute},
	{Package: "./images", Pattern: "BootBoards", Benchtime: "1x", Timeout: 60 * time.Minute},
	{Package: "./e2e", Pattern: "ApplianceRSS", Benchtime: "1x", Timeout: 10 * time.Minute},
	{Package: "./e2e", Pattern: "ApplianceMem128", Benchtime: "1x", Timeout: 15 * time.Minute},
	{Package: "./e2e", Pattern: "E2ETunnelUp", Benchtime: "1x", Timeout: 15 * time.Minute},
	// 100 power cuts at one to two minutes each ($FLASHGATE_POWERCUT_TRIALS lowers it).
	{Package: "./e2e", Pattern: "UpgradePowerCut", Benchtime: "1x", Timeout: 4 * time.Hour},
	{Package: "./config", Pattern: "CommitSmallChange50Tunnels", Benchtime: "300x", Timeout: 5 * time.Minute},
	{Package: "./config", Pattern: "CommitSmallChangeTunnels", Benchtime: "30x", Timeout: 10 * time.Minute},
	{Package: "./ipsec/ike", Pattern: "BytesPerSA", Benchtime: "1000x", Timeout: 5 * time.Minute},
	{Package: "./webui", Pattern: "Page", Benchtime: "100x", Timeout: 5 * time.Minute},
	{Package: "./webui", Pattern: "IdleConns", Benchtime: "1x", Timeout: 2 * time.Minute},
	{Package: "./webui", Pattern: "TunnelList", Benchtime: "10x", Timeout: 5 * time.Minute},
	{Package: "./ipsec/esp", Pattern: "(Encap|Decap)/(aes128gcm16|aes128-sha256|chacha20poly1305)/1400", Timeout: 5 * time.Minute},
	{Package: "./bench", Pattern: "^BenchmarkTunnelTCP$", Benchtime: "1x", Timeout: 15 * time.Minute},
	// Eleven rounds of route against policy (median ratio), then three
	// failovers.
	{Package: "./bench", Pattern: "^BenchmarkRouteTunnelTCP$", Benchtime: "11x", Timeout: 10 * time.Minute},
	{Package: "./bench", Pattern: "^BenchmarkRouteFailover$", Benchtime: "3x", Timeout: 10 * time.Minute},
	{Package: "./bench", Pattern: "IKESetup$", Benchtime: "100x", Timeout: 5 * time.Minute},
	{Package: "./bench", Pattern: "IKESetupRate", Benchtime: "5x", Timeout: 10 * time.Minute},
	{Package: "./bench", Pattern: "^BenchmarkIKESetupCert$", Benchtime: "50x", Timeout: 5 * time.Minute},
	{Package: "./bench", Pattern: "^BenchmarkIKEv1Setup$", Benchtime: "50x", Timeout: 5 * time.Minute},
	{Package: "./ipsec/iked", Pattern: "IKEFlood", Benchtime: "1x", Timeout: 5 * time.Minute},
	// The 386/softfloat board build against the amd64 build: natively
	// (amd64 only: this machine runs no 32-bit code) and both in qemu
	// under the same emulation, for the ratio (boardFigures).
	{Package: "./ipsec/ike", Pattern: boardCryptoIKE, Timeout: 5 * time.Minute},
	{Package: "./ipsec/ike", Pattern: boardCryptoIKE, Benchtime: "3s", Timeout: 20 * time.Minute, Board: "qemu"},
	{Package: "./ipsec/ike", Pattern: boardCryptoIKE, Benchtime: "3s", Timeout: 20 * time.Minute, Board: "qemu-x86_64"},
	{Package: "./ipsec/esp", Pattern: boardCryptoESP, Benchtime: "2s", Timeout: 10 * time.Minute, Board: "qemu"},
	{Package: "./ipsec/esp", Pattern: boardCryptoESP, Benchtime: "2s", Timeout: 10 * time.Minute, Board: "qemu-x86_64"},
	// 100 and 1000 spokes against iked, then against strongSwan.
	{Package: "./bench", Pattern: "^BenchmarkHub$", Benchtime: "3x", Timeout: 30 * time.Minute},
}

// wireguardVersion pins the wireguard-go that anchors the data plane
// figures, so that runs stay comparable.
const wireguardVersion = "golang.zx2c4.com/wireguard@v0.0.0-20260522210424-ecfc5a8d5446"

// Main is `flashgate bench`: it runs the suites, prints the tables and
// writes OUT/bench/results.json.
func Main(args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	out := fs.String("out", "out", "output directory (results go to OUT/bench)")
	only := fs.String("only", "", "run only the suites whose package (package@board for the board builds run in qemu) contains one of these comma-separated strings")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench: the measurements use network namespaces and qemu: run `make bench` as root")
		return 1
	}
	dir := filepath.Join(*out, "bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if err := installWireGuard(dir); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
	var results []Result
	var failures []string
	for _, s := range Suites {
		where := s.Package
		if s.Board != "" {
			where += "@" + s.Board
		}
		if *only != "" && !slices.ContainsFunc(strings.Split(*only, ","), func(o string) bool { return strings.Contains(where, o) }) {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: %s -bench %s\n", where, s.Pattern)
		raw := filepath.Join(dir, "raw-"+strings.Trim(strings.NewReplacer("/", "_", "@", "_").Replace(where), "._")+".txt")
		var res []Result
		var err error
		if s.Board != "" {
			res, err = runInVM(s, raw)
		} else {
			res, err = runSuite(s, raw)
		}
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", s.Package, err))
		}
		results = append(results, res...)
	}
	figs := Figures(results, failures)
	WriteTable(os.Stdout, figs)
	if err := WriteJSON(dir, figs); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	fmt.Printf("\nwritten: %s\n", filepath.Join(dir, "results.json"))
	if len(failures) > 0 {
		fmt.Fprintf(os.Stderr, "bench: %d suite(s) failed:\n  %s\n", len(failures), strings.Join(failures, "\n  "))
		return 1
	}
	return 0
}

// runSuite runs one suite, keeps its raw output in rawPath and parses it.
// A failing suite still yields the results it printed before failing.
func runSuite(s Suite, rawPath string) ([]Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	args := []string{"test", "-run", "^$", "-bench", s.Pattern, "-benchmem", "-count", "1"}
	if s.Benchtime != "" {
		args = append(args, "-benchtime", s.Benchtime)
	}
	args = append(args, "-timeout", s.Timeout.String(), s.Package)
	cmd := exec.CommandContext(ctx, "go", args...)
	var buf bytes.Buffer
	cmd.Stdout = io.MultiWriter(&buf, os.Stderr)
	cmd.Stderr = cmd.Stdout
	runErr := cmd.Run()
	os.WriteFile(rawPath, buf.Bytes(), 0o644)
	res, err := ParseBenchOutput(&buf)
	if err != nil {
		return res, err
	}
	if runErr != nil {
		return res, fmt.Errorf("go %s: %w (output in %s)", strings.Join(args, " "), runErr, rawPath)
	}
	return res, nil
}

// buildCachedWireGuard builds wireguard-go from its directory in the module
// cache, offline, into bin.
func buildCachedWireGuard(bin string) ([]byte, error) {
	modPath, version, _ := strings.Cut(wireguardVersion, "@")
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), modPath+"@"+version)
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("not in the module cache: %w", err)
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(bin, "wireguard"), ".")
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod")
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

func installWireGuard(dir string) error {
	bin := filepath.Join(dir, "bin")
	if _, err := os.Stat(filepath.Join(bin, "wireguard")); err == nil {
		os.Setenv("WIREGUARD_GO", filepath.Join(bin, "wireguard"))
		return nil
	}
	abs, _ := filepath.Abs(bin)
	install := func(extraEnv ...string) ([]byte, error) {
		cmd := exec.Command("go", "install", wireguardVersion)
		cmd.Env = append(append(os.Environ(), "GOBIN="+abs, "GOFLAGS=-mod=mod"), extraEnv...)
		cmd.Dir = os.TempDir() // outside our module: install the peer as its own module
		return cmd.CombinedOutput()
	}
	if out, err := install(); err != nil {
		// go install asks the proxy about deprecations even when the
		// module is in the cache (even with GOPROXY=off); without a
		// network, build the cached module's directory instead.
		if out2, err2 := buildCachedWireGuard(abs); err2 != nil {
			return fmt.Errorf("install wireguard-go (the throughput anchor): %v: %s; from the module cache: %v: %s", err, out, err2, out2)
		}
	}
	os.Setenv("WIREGUARD_GO", filepath.Join(abs, "wireguard"))
	return nil
}
