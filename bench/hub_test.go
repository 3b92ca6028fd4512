package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/bench/spokes"
	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/gomem"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/iked"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
)

// runIkedEnv makes the test binary run `flashgate iked` instead of the
// benchmarks, so that the hub is a process of its own whose memory can be
// read (the way the supervisor runs it on the box).
const runIkedEnv = "FLASHGATE_BENCH_RUN_IKED"

// ikedHeapEnv names the file where that iked writes its Go heap on
// SIGUSR1 (ikedHeap), and FILE.pprof its heap profile: the benchmark's
// view into the process whose RSS it measures.
const ikedHeapEnv = "FLASHGATE_BENCH_IKED_HEAP"

func TestMain(m *testing.M) {
	if os.Getenv(runIkedEnv) == "1" {
		if file := os.Getenv(ikedHeapEnv); file != "" {
			go writeHeapOnSignal(file)
		}
		os.Exit(iked.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// goHeap is what the iked process reports of its Go heap, after a GC,
// and the CPU time its collector had taken before that GC.
type goHeap struct {
	HeapAlloc, HeapInuse, StackInuse uint64
	GCCPUSeconds                     float64
	// BeforeGC is the runtime's view of the process's memory as it was
	// when the signal came, before that GC: what its RSS held then.
	BeforeGC string
}

// writeHeapOnSignal runs in the benchmark's iked: on each SIGUSR1 it
// collects garbage, then writes the heap's figures to file (replaced in
// one rename, so the benchmark never reads half of it) and its profile
// to file.pprof.
func writeHeapOnSignal(file string) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR1)
	for range c {
		gcCPU := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
		metrics.Read(gcCPU)
		beforeGC := gomem.Read().String()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if w, err := os.Create(file + ".pprof"); err == nil {
			pprof.Lookup("heap").WriteTo(w, 0)
			w.Close()
		}
		b, _ := json.Marshal(goHeap{HeapAlloc: ms.HeapAlloc, HeapInuse: ms.HeapInuse, StackInuse: ms.StackInuse,
			GCCPUSeconds: gcCPU[0].Value.Float64(), BeforeGC: beforeGC})
		if os.WriteFile(file+".tmp", b, 0o600) == nil {
			os.Rename(file+".tmp", file)
		}
	}
}

// ikedHeap asks the iked at pid for its Go heap (after a GC in it): the
// live memory its RSS holds, without the garbage the collector had not
// yet reclaimed.
func ikedHeap(tb testing.TB, pid int, file string) goHeap {
	tb.Helper()
	os.Remove(file)
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		tb.Fatalf("ask iked for its heap: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(file); err == nil {
			var h goHeap
			if err := json.Unmarshal(b, &h); err != nil {
				tb.Fatalf("iked's heap figures: %v", err)
			}
			return h
		}
		if time.Now().After(deadline) {
			tb.Fatal("iked wrote no heap figures within 30 s of SIGUSR1")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hubNet is the head office and its branches:
//
//	hub 10.97.0.1 ==veth== 10.97.0.2 spk, and on the same veth 10.99.1.1/32 ... (one per spoke)
//	hub LAN 10.98.0.1 (on its loopback: the echo target); spoke LANs 10.200.0.1/32 ...
//
// The hub reaches the spokes' addresses through spk's first address, so its
// neighbour table holds one entry, not a thousand (the ARP table's limits
// are the host's, shared by every namespace).
type hubNet struct {
	hub, spk *testnet.NS
	hubAddr  netip.Addr
	hubLAN   netip.Prefix
	spokes   []spokes.Spoke
}

const (
	hubID     = "hub.example"
	hubSecret = "hub-bench-psk-0123456789"
)

func newHubNet(tb testing.TB, n int) *hubNet {
	tb.Helper()
	testnet.RequireRoot(tb)
	p := testnet.Prefix()
	h := &hubNet{hub: testnet.NewNS(tb, p+"-hub"), spk: testnet.NewNS(tb, p+"-spk"),
		hubAddr: netip.MustParseAddr("10.97.0.1"), hubLAN: netip.MustParsePrefix("10.98.0.1/32")}
	testnet.Link(tb, h.hub, "wan0", "10.97.0.1/24", h.spk, "wan0", "10.97.0.2/24")
	h.spokes = spokes.Numbered(n, netip.MustParseAddr("10.99.1.1"), netip.MustParseAddr("10.200.0.1"), hubSecret)
	var batch strings.Builder
	for _, s := range h.spokes {
		fmt.Fprintf(&batch, "addr add %s/32 dev wan0\n", s.Addr)
	}
	cmd := h.spk.Command("ip", "-batch", "-")
	cmd.Stdin = strings.NewReader(batch.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("add %d spoke addresses: %v: %s", n, err, out)
	}
	for _, c := range [][]string{
		{"ip", "addr", "add", "10.98.0.1/32", "dev", "lo"},
		{"ip", "link", "set", "lo", "up"},
		{"ip", "route", "add", "10.99.0.0/16", "via", "10.97.0.2"},
	} {
		if err := h.hub.Run(c...); err != nil {
			tb.Fatal(err)
		}
	}
	return h
}

// ikedTunnels is the head office's configuration: one respond tunnel per
// branch, each with the branch's address, identity, PSK and subnet.
func (h *hubNet) ikedTunnels() []config.Tunnel {
	ts := make([]config.Tunnel, len(h.spokes))
	for i, s := range h.spokes {
		t := config.NewTunnel(fmt.Sprintf("branch%d", i))
		t.LocalAddress = config.MustAddr(h.hubAddr.String())
		t.RemoteAddress = config.MustAddr(s.Addr.String())
		t.LocalID, t.RemoteID = hubID, s.ID
		t.PSK = config.NewSecret(s.PSK)
		t.IKEProposals, t.ESPProposals = []string{setupProposal}, []string{"aes128gcm16"}
		t.LocalSubnets = []config.Prefix{config.MustPrefix(h.hubLAN.String())}
		t.RemoteSubnets = []config.Prefix{config.MustPrefix(s.LAN.String())}
		t.StartAction = config.StartRespond
		ts[i] = t
	}
	return ts
}

// charonConns is the same head office for strongSwan.
func (h *hubNet) charonConns() []testnet.CharonConn {
	cs := make([]testnet.CharonConn, len(h.spokes))
	for i, s := range h.spokes {
		cs[i] = testnet.CharonConn{Name: fmt.Sprintf("branch%d", i), LocalAddr: h.hubAddr, RemoteAddr: s.Addr,
			LocalID: hubID, RemoteID: s.ID, PSK: s.PSK, Proposals: setupProposal, ESPProposals: "aes128gcm16",
			LocalTS: []netip.Prefix{h.hubLAN}, RemoteTS: []netip.Prefix{s.LAN}}
	}
	return cs
}

// run plays every spoke against the hub; atAllUp runs while every SA is up.
func (h *hubNet) run(tb testing.TB, timeout time.Duration, atAllUp func()) *spokes.Result {
	tb.Helper()
	var res *spokes.Result
	err := h.spk.Do(func() error {
		var err error
		res, err = spokes.Run(context.Background(), spokes.Config{
			Hub: h.hubAddr, HubID: hubID, HubLAN: h.hubLAN, Target: h.hubLAN.Addr(), Spokes: h.spokes,
			IKEProposals: setupProposal, ESPProposals: "aes128gcm16", Timeout: timeout,
			AllAnswered: atAllUp, Logf: tb.Logf,
		})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// startIkedProcess runs `flashgate iked` (this test binary in its place)
// in ns with the tunnels, as the box's supervisor would, and waits for its
// API to list them.
func startIkedProcess(tb testing.TB, ns *testnet.NS, tunnels []config.Tunnel, env ...string) (pid int, api *ikedapi.Client) {
	tb.Helper()
	dir := tb.TempDir()
	c := config.Default()
	c.Tunnels = tunnels
	if err := c.Validate(); err != nil {
		tb.Fatalf("hub configuration: %v", err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		tb.Fatal(err)
	}
	cfgFile, sock := filepath.Join(dir, "iked.json"), filepath.Join(dir, "iked.sock")
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "iked.log"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd := ns.Command(os.Args[0], "-config", cfgFile, "-socket", sock, "-dataplane", "userspace")
	cmd.Env = append(append(os.Environ(), runIkedEnv+"=1"), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start iked: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		logFile.Close()
		if tb.Failed() {
			out, _ := os.ReadFile(logFile.Name())
			tb.Logf("iked log:\n%s", lastLines(string(out), 40))
		}
	})
	api = ikedapi.NewClient(sock)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n, err := api.CountTunnels(context.Background(), ikedapi.TunnelQuery{}); err == nil && n == len(tunnels) {
			return cmd.Process.Pid, api
		}
		select {
		case <-done:
			tb.Fatal("iked exited while starting")
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("iked's API did not list the %d tunnels within 30 s", len(tunnels))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logTunnelsNotUp logs iked's own account (state, reason, events) of the
// tunnels that are not up, for a run whose spokes failed.
func logTunnelsNotUp(tb testing.TB, api *ikedapi.Client) {
	var ts []ipsec.TunnelStatus
	for _, st := range []ipsec.TunnelState{ipsec.StateFailed, ipsec.StateConnecting, ipsec.StateDown} {
		page, matched, err := api.TunnelsPage(context.Background(), ikedapi.TunnelQuery{State: st, Limit: 10 - len(ts)})
		if err != nil {
			tb.Logf("iked's tunnels: %v", err)
			return
		}
		tb.Logf("iked: %d tunnels %s", matched, st)
		if ts = append(ts, page...); len(ts) == 10 {
			break
		}
	}
	for _, t := range ts {
		var ev strings.Builder
		for _, e := range t.Events {
			fmt.Fprintf(&ev, "\n    %s %s", e.Time.Format("15:04:05.000"), e.Message)
		}
		tb.Logf("iked: tunnel %s %s %q, remote %s:%s", t.Name, t.State, t.Reason, t.RemoteAddr, ev.String())
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// rssBytes is a process's resident set (VmRSS).
func rssBytes(tb testing.TB, pid int) float64 { return statusBytes(tb, pid, "VmRSS") }

// statusBytes is one of the "Name: N kB" lines of /proc/PID/status.
func statusBytes(tb testing.TB, pid int, name string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			kb, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
			return kb * 1024
		}
	}
	tb.Fatalf("no %s for PID %d", name, pid)
	return 0
}

// rssParts is a process's resident set in its parts (RssAnon, RssFile:
// the binary's pages it has touched, RssShmem), for the log, and its
// anonymous part in bytes.
func rssParts(tb testing.TB, pid int) (string, float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	var parts []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Rss") {
			parts = append(parts, strings.Join(strings.Fields(line), " "))
		}
	}
	return strings.Join(parts, ", "), statusBytes(tb, pid, "RssAnon")
}

// cpuSeconds is a process's CPU time so far (user and system; its
// threads' included), from /proc/PID/stat in clock ticks of 1/100 s (Linux's
// USER_HZ on every architecture we run on).
func cpuSeconds(tb testing.TB, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// The command name (field 2) is in parentheses and may hold blanks.
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		tb.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	// Fields 14 and 15 of stat (utime, stime) are 12 and 13 after the name.
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return (utime + stime) / 100
}

// hubSizes are the spoke counts of BenchmarkHub: 100 and 1000, or
// $FLASHGATE_HUB_SPOKES (comma-separated).
func hubSizes(tb testing.TB) []int {
	env := os.Getenv("FLASHGATE_HUB_SPOKES")
	if env == "" {
		return []int{100, 1000}
	}
	var ns []int
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > config.MaxTunnels {
			tb.Fatalf("FLASHGATE_HUB_SPOKES: %q is not a spoke count from 1 to %d", f, config.MaxTunnels)
		}
		ns = append(ns, n)
	}
	return ns
}

// BenchmarkHub (make bench runs it 3 times, reporting medians): N branches (the spoke generator, one process in their own
// namespace) bring up one IKE_SA and CHILD_SA each and pass an echo through
// it, against flashgate's iked and against strongSwan's charon as the hub,
// one after the other in the same run, with the same N connections.
// Reported: the time to every CHILD_SA up (setup_s) and to every echo
// answered (answered_s), the hub's RSS growth per SA (for iked also its
// anonymous part, rss_anon_bytes/sa: without the pages of the binary that
// the first setups touch, which do not grow with the SAs), the hub's CPU time
// from the first setup to every echo answered (cpu_s: on a shared machine
// steadier than the wall time), and for iked the collector's share of its
// CPU (gc_cpu_s) and the status API's time to list every tunnel.
func BenchmarkHub(b *testing.B) {
	for _, n := range hubSizes(b) {
		timeout := time.Duration(n)*100*time.Millisecond + 30*time.Second
		b.Run(fmt.Sprintf("n=%d/flashgate", n), func(b *testing.B) {
			m := medians{}
			defer m.report(b)
			for range b.N {
				h := newHubNet(b, n)
				// $FLASHGATE_HUB_PROFILE_DIR keeps iked's heap profiles
				// (iked-heap-nN.json.pprof, with every SA up, and
				// iked-heap-nN.json.before.pprof, its baseline).
				dir := os.Getenv("FLASHGATE_HUB_PROFILE_DIR")
				if dir == "" {
					dir = b.TempDir()
				}
				heapFile := filepath.Join(dir, fmt.Sprintf("iked-heap-n%d.json", n))
				pid, api := startIkedProcess(b, h.hub, h.ikedTunnels(), ikedHeapEnv+"="+heapFile)
				time.Sleep(time.Second) // let the start settle before the baseline
				// RSS first: the heap figures make iked collect garbage.
				before := rssBytes(b, pid)
				partsBefore, anonBefore := rssParts(b, pid)
				heapBefore := ikedHeap(b, pid, heapFile)
				// Kept beside the one with every SA up, which overwrites
				// it: go tool pprof -diff_base BEFORE AFTER is what the
				// SAs hold.
				os.Rename(heapFile+".pprof", heapFile+".before.pprof")
				var after, statusMS, pageMS, cpuAfter float64
				var partsAfter string
				var anonAfter float64
				var heapAfter goHeap
				cpuBefore := cpuSeconds(b, pid)
				res := h.run(b, timeout, func() {
					cpuAfter = cpuSeconds(b, pid)
					after = rssBytes(b, pid)
					partsAfter, anonAfter = rssParts(b, pid)
					heapAfter = ikedHeap(b, pid, heapFile)
					if up, err := api.CountTunnels(context.Background(), ikedapi.TunnelQuery{State: ipsec.StateUp}); err != nil || up != n {
						b.Errorf("status API with every spoke answered: %d of %d tunnels up (%v)", up, n, err)
					}
					// Every tunnel, as the web UI's sampler and
					// ipsec status read them: a page at a time.
					start := time.Now()
					ts, err := api.Tunnels(context.Background())
					statusMS = float64(time.Since(start).Microseconds()) / 1000
					if err != nil || len(ts) != n {
						b.Errorf("status API listing every tunnel: %d of %d (%v)", len(ts), n, err)
					}
					start = time.Now()
					page, matched, err := api.TunnelsPage(context.Background(), ikedapi.TunnelQuery{State: ipsec.StateUp, Offset: n / 2, Limit: 50})
					pageMS = float64(time.Since(start).Microseconds()) / 1000
					if err != nil || matched != n || len(page) != min(50, n-n/2) {
						b.Errorf("status API, a page of 50 from the middle: %d rows of %d matched (%v)", len(page), matched, err)
					}
				})
				if res.Err() != nil {
					logTunnelsNotUp(b, api)
				}
				m.hub(b, res, n, before, after)
				m.add("cpu_s", cpuAfter-cpuBefore)
				// The anonymous part of the growth: rss_bytes/sa less the
				// binary's pages that the first setups touched (about
				// 1 MB, whatever the spokes' number).
				m.add("rss_anon_bytes/sa", (anonAfter-anonBefore)/float64(n))
				// The collector's share of it (Go's estimate), from the
				// baseline's figures to those with every SA up.
				m.add("gc_cpu_s", heapAfter.GCCPUSeconds-heapBefore.GCCPUSeconds)
				m.add("heap_bytes/sa", (float64(heapAfter.HeapAlloc)-float64(heapBefore.HeapAlloc))/float64(n))
				m.add("heap_inuse_bytes/sa", (float64(heapAfter.HeapInuse+heapAfter.StackInuse)-float64(heapBefore.HeapInuse+heapBefore.StackInuse))/float64(n))
				b.Logf("iked's Go heap after a GC: %.1f -> %.1f MiB live objects, %.1f -> %.1f MiB in spans, %.1f -> %.1f MiB of stacks (heap profile %s.pprof)",
					float64(heapBefore.HeapAlloc)/(1<<20), float64(heapAfter.HeapAlloc)/(1<<20),
					float64(heapBefore.HeapInuse)/(1<<20), float64(heapAfter.HeapInuse)/(1<<20),
					float64(heapBefore.StackInuse)/(1<<20), float64(heapAfter.StackInuse)/(1<<20), heapFile)
				b.Logf("iked's RSS at the baseline: %s; the runtime's view then: %s", partsBefore, heapBefore.BeforeGC)
				b.Logf("iked's RSS with every SA up: %s; the runtime's view then: %s", partsAfter, heapAfter.BeforeGC)
				m.add("status_ms", statusMS)
				m.add("status_page_ms", pageMS)
			}
		})
		b.Run(fmt.Sprintf("n=%d/strongswan", n), func(b *testing.B) {
			m := medians{}
			defer m.report(b)
			for range b.N {
				h := newHubNet(b, n)
				c := testnet.StartCharon(b, h.hub, h.charonConns()...)
				time.Sleep(time.Second)
				before := rssBytes(b, c.PID())
				var after, cpuAfter float64
				cpuBefore := cpuSeconds(b, c.PID())
				res := h.run(b, timeout, func() { cpuAfter = cpuSeconds(b, c.PID()); after = rssBytes(b, c.PID()) })
				m.hub(b, res, n, before, after)
				m.add("cpu_s", cpuAfter-cpuBefore)
			}
		})
	}
}

// medians collects each run's figures and reports their medians: the
// machine is shared, and one run of a hundred spokes lasts a blink.
type medians map[string][]float64

func (m medians) add(unit string, v float64) { m[unit] = append(m[unit], v) }

func (m medians) report(b *testing.B) {
	for unit, vs := range m {
		slices.Sort(vs)
		b.ReportMetric(vs[len(vs)/2], unit)
	}
	b.ReportMetric(0, "ns/op")
}

func (m medians) hub(b *testing.B, res *spokes.Result, n int, before, after float64) {
	b.Logf("%d spokes: %d up in %v, %d answered in %v; hub RSS %.1f -> %.1f MiB; IKE retransmits %d, queue drops %d",
		n, res.Up, res.AllUp.Round(time.Millisecond), res.Answered, res.AllAnswered.Round(time.Millisecond),
		before/(1<<20), after/(1<<20), res.IKE.Retransmits, res.IKEQueueDrops)
	if err := res.Err(); err != nil {
		b.Fatal(err)
	}
	m.add("setup_s", res.AllUp.Seconds())
	m.add("answered_s", res.AllAnswered.Seconds())
	m.add("rss_bytes/sa", (after-before)/float64(n))
	m.add("rss_configured_bytes", before)
}

// TestHubSmall is the hub benchmark's run at 20 spokes against iked, as a
// test: every spoke's CHILD_SA comes up and passes its echo.
func TestHubSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("namespaces")
	}
	h := newHubNet(t, 20)
	_, api := startIkedProcess(t, h.hub, h.ikedTunnels())
	res := h.run(t, 30*time.Second, func() {
		if up, err := api.CountTunnels(context.Background(), ikedapi.TunnelQuery{State: ipsec.StateUp}); err != nil || up != 20 {
			t.Errorf("%d of 20 tunnels up with every spoke answered (%v)", up, err)
			logTunnelsNotUp(t, api)
		}
	})
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
}
