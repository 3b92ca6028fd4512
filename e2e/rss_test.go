package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/images"
	"github.com/flashgate/flashgate/images/imagestest"
)

// rssTunnels is how many tunnels the appliance has for rss_total_kb
// (bench.md: boot.qemu.rss_total_kb, all firmware processes, 10 tunnels).
const rssTunnels = 10

// idleSettle is how long the box is left alone after the tunnels are
// committed before its memory is read.
const idleSettle = 20 * time.Second

// meminfoKB returns a field of /proc/meminfo in KiB, 0 if it is missing.
func meminfoKB(meminfo, field string) int {
	m := regexp.MustCompile(`(?m)^` + field + `:\s+(\d+) kB`).FindStringSubmatch(meminfo)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// procMemory is one process's memory from /proc/PID/status and
// /proc/PID/smaps_rollup, in KiB.
//
// rss is the Rss of smaps_rollup, which the kernel counts by walking the
// page tables. VmRSS in status comes from counters that each thread
// batches (up to 64 pages per thread on this 6.1 kernel), so with a Go
// process's handful of threads it can lag by a megabyte or two: it is
// kept (vmrss) for the log only.
type procMemory struct{ rss, vmrss, pss, anon, file, shmem, threads int }

var (
	statusName = regexp.MustCompile(`(?m)^Name:\s+(\S+)`)
	statusPID  = regexp.MustCompile(`(?m)^Pid:\s+(\d+)`)
	statusRSS  = regexp.MustCompile(`(?m)^VmRSS:\s+(\d+) kB`)
	statusAnon = regexp.MustCompile(`(?m)^RssAnon:\s+(\d+) kB`)
	statusFile = regexp.MustCompile(`(?m)^RssFile:\s+(\d+) kB`)
	// RssShmem is the binaries' pages: the initramfs is a tmpfs.
	statusShmem   = regexp.MustCompile(`(?m)^RssShmem:\s+(\d+) kB`)
	statusThreads = regexp.MustCompile(`(?m)^Threads:\s+(\d+)`)
	rollupPSS     = regexp.MustCompile(`(?m)^Pss:\s+(\d+) kB`)
	rollupRSS     = regexp.MustCompile(`(?m)^Rss:\s+(\d+) kB`)
)

// readMemory reads the memory of the given processes through the expert
// shell: `cat` of their /proc status and smaps_rollup files, one process at
// a time so that every figure is tied to its pid.
func readMemory(tb testing.TB, s *imagestest.Serial, pids []int) map[int]procMemory {
	tb.Helper()
	out := map[int]procMemory{}
	for _, pid := range pids {
		st := consoleText(s.Shell(fmt.Sprintf("cat /proc/%d/status", pid)))
		name, p, rss := statusName.FindStringSubmatch(st), statusPID.FindStringSubmatch(st), statusRSS.FindStringSubmatch(st)
		if name == nil || p == nil || rss == nil || p[1] != strconv.Itoa(pid) {
			tb.Fatalf("/proc/%d/status has no Name, Pid %d and VmRSS:\n%s", pid, pid, st)
		}
		roll := consoleText(s.Shell(fmt.Sprintf("cat /proc/%d/smaps_rollup", pid)))
		pss, rrss := rollupPSS.FindStringSubmatch(roll), rollupRSS.FindStringSubmatch(roll)
		if pss == nil || rrss == nil {
			tb.Fatalf("/proc/%d/smaps_rollup has no Rss or Pss:\n%s", pid, roll)
		}
		var m procMemory
		m.vmrss, _ = strconv.Atoi(rss[1])
		m.rss, _ = strconv.Atoi(rrss[1])
		m.pss, _ = strconv.Atoi(pss[1])
		if a := statusAnon.FindStringSubmatch(st); a != nil {
			m.anon, _ = strconv.Atoi(a[1])
		}
		if f := statusFile.FindStringSubmatch(st); f != nil {
			m.file, _ = strconv.Atoi(f[1])
		}
		if f := statusShmem.FindStringSubmatch(st); f != nil {
			m.shmem, _ = strconv.Atoi(f[1])
		}
		if f := statusThreads.FindStringSubmatch(st); f != nil {
			m.threads, _ = strconv.Atoi(f[1])
		}
		out[pid] = m
	}
	return out
}

// BenchmarkApplianceRSS boots the qemu image, configures 10 tunnels to
// peers that do not exist (iked keeps initiating them), leaves the box
// idle, and reports the resident memory read from /proc over the serial
// console: rss_init_kb is PID 1, which is also the supervisor (target
// 8 MB; its own small binary, firmware/init); rss_total_kb is PID 1 and
// every service it runs (target 40 MB). RSS counts the pages of the
// multi-call binary all services run (in the initramfs, so RAM) in every
// process that maps them; pss_init_kb and
// pss_total_kb share them out instead, so pss_total_kb is what the
// firmware's processes cost the box together; rss_console_kb and
// pss_console_kb are the console getty's (issue 16: what the console costs
// once it no longer links the services' code). mem_used_kb is MemTotal
// minus MemAvailable: all the box uses, kernel and initramfs included.
// first_prompt_s is qemu start to the first-boot password prompt. One boot is one
// measurement: run with -benchtime 1x.
func BenchmarkApplianceRSS(b *testing.B) {
	board, err := boards.Lookup("qemu")
	if err != nil {
		b.Fatal(err)
	}
	var init, total, console procMemory
	var used, fa64k, fa4k int
	var login time.Duration
	for i := 0; i < b.N; i++ {
		var vm *images.VM
		var s *imagestest.Serial
		var api *API
		vm, s, api, login = bootIdleAppliance(b, board, 0, rssTunnels)
		time.Sleep(idleSettle)
		var ts []tunnelView
		if err := api.Do("GET", "/api/v1/tunnels", nil, &ts); err != nil || len(ts) != rssTunnels {
			b.Fatalf("the appliance shows %d tunnels (%v), want %d:\n%s", len(ts), err, rssTunnels, diagnose(api))
		}

		s.EnterShell()
		rows := parseStatus(s.Shell("flashgate status"))
		// Every process runs the one multi-call binary, so /proc's Name
		// is "flashgate" for all: name them by service.
		pids, service := []int{1}, map[int]string{1: "pid1+supervisor"}
		for name, r := range rows {
			if r.state != "running" || r.pid == 0 {
				b.Fatalf("service %s is %s at idle: %+v", name, r.state, rows)
			}
			pids = append(pids, r.pid)
			service[r.pid] = name
		}
		slices.Sort(pids)
		if len(rows) < 5 {
			b.Fatalf("flashgate status lists %d services, want configd, netd, iked, webui and console: %+v", len(rows), rows)
		}
		mem := readMemory(b, s, pids)
		// The whole box's view: what the kernel says is in use on the
		// 256 MB board (kernel, the initramfs in RAM, page cache and
		// every process), which no per-process sum double counts.
		info := consoleText(s.Shell("cat /proc/meminfo"))
		memTotal, memAvail := meminfoKB(info, "MemTotal"), meminfoKB(info, "MemAvailable")
		if memTotal == 0 || memAvail == 0 {
			b.Fatalf("/proc/meminfo has no MemTotal or MemAvailable:\n%s", info)
		}
		used = memTotal - memAvail
		init, total = mem[1], procMemory{}
		console = mem[rows["console"].pid]
		var parts []string
		for _, pid := range pids {
			m := mem[pid]
			total.rss += m.rss
			total.pss += m.pss
			parts = append(parts, fmt.Sprintf("%s (pid %d, %d threads) rss %d (VmRSS %d: anon %d, file %d, shmem %d) pss %d", service[pid], pid, m.threads, m.rss, m.vmrss, m.anon, m.file, m.shmem, m.pss))
		}
		b.Logf("KiB at idle with %d tunnels: %s", rssTunnels, strings.Join(parts, ", "))
		logGoMemory(b, s, rows)
		fa64k, fa4k = faultAroundProbe(b, s)
		vm.Stop()
	}
	b.ReportMetric(float64(init.rss), "rss_init_kb")
	b.ReportMetric(float64(total.rss), "rss_total_kb")
	b.ReportMetric(float64(init.pss), "pss_init_kb")
	b.ReportMetric(float64(total.pss), "pss_total_kb")
	b.ReportMetric(float64(console.rss), "rss_console_kb")
	b.ReportMetric(float64(console.pss), "pss_console_kb")
	b.ReportMetric(float64(used), "mem_used_kb")
	b.ReportMetric(login.Seconds(), "first_prompt_s")
	if fa64k > 0 || fa4k > 0 {
		b.ReportMetric(float64(fa64k), "idle_supervisor_rss_kb")
		b.ReportMetric(float64(fa4k), "idle_supervisor_rss_4k_faultaround_kb")
	}
}

// logGoMemory logs each service's own view of its Go memory (heap live,
// free, released, stacks, the runtime's metadata: internal/gomem), which
// it writes to its log on SIGUSR1. It runs after the figures are read, so
// that it does not disturb them.
func logGoMemory(tb testing.TB, s *imagestest.Serial, rows map[string]serviceRow) {
	tb.Helper()
	names := make([]string, 0, len(rows))
	for name := range rows {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s.Shell(fmt.Sprintf("kill -SIGUSR1 %d", rows[name].pid))
	}
	time.Sleep(time.Second)
	for _, name := range names {
		var last string
		for _, l := range strings.Split(consoleText(s.Shell("flashgate logs -n 10 "+name)), "\n") {
			if i := strings.Index(l, "memory: heap"); i >= 0 {
				last = strings.TrimSpace(l[i:])
			}
		}
		tb.Logf("%s, Go runtime's view: %s", name, last)
	}
}

// supervisorPID is the "pid N: rss ..." line of `flashgate status`.
var supervisorPID = regexp.MustCompile(`(?m)^pid (\d+): rss`)

// faultAroundProbe measures how much of a process's VmRSS the kernel's
// fault-around adds. When a process touches one page of a file mapping,
// the kernel maps up to fault_around_bytes (64 KiB) of neighbouring pages
// that are already in the page cache; the whole firmware binary always is
// (the initramfs lives in RAM), so every touched page of it counts 16 in
// VmRSS. The probe starts an idle standalone `flashgate supervisor` (no
// services) from the shell twice, with the kernel's default and with 4 KiB
// (no fault-around), and returns its VmRSS in KiB for each. The difference
// is pages mapped but never touched: RAM that is in use anyway, by the
// initramfs. This is a diagnostic, read through debugfs; the appliance
// itself keeps the kernel's default.
func faultAroundProbe(tb testing.TB, s *imagestest.Serial) (rss64k, rss4k int) {
	tb.Helper()
	const knob = "/sys/kernel/debug/fault_around_bytes"
	s.Shell("mount -t debugfs debugfs /sys/kernel/debug")
	// read is a file's one-line content: the shell's output also echoes
	// the command line typed.
	read := func(path string) string {
		lines := strings.Split(strings.TrimSpace(consoleText(s.Shell("cat "+path))), "\n")
		return strings.TrimSpace(lines[len(lines)-1])
	}
	// flashgate's kernels have no debugfs (kernel/config): the knob is
	// not there, and the probe reports nothing rather than a guess.
	if _, err := strconv.Atoi(read(knob)); err != nil {
		tb.Logf("%s is not readable (no debugfs in this kernel): the fault-around probe is skipped", knob)
		return 0, 0
	}
	measure := func(bytes int) int {
		s.Shell(fmt.Sprintf("echo %d > %s", bytes, knob))
		if got := read(knob); got != strconv.Itoa(bytes) {
			tb.Fatalf("%s reads %q after writing %d", knob, got, bytes)
		}
		sock := fmt.Sprintf("/tmp/probe-%d.sock", bytes)
		s.Shell(fmt.Sprintf("flashgate supervisor -socket %s > /dev/null 2>&1 &", sock))
		var m []string
		for range 20 {
			time.Sleep(500 * time.Millisecond)
			if m = supervisorPID.FindStringSubmatch(consoleText(s.Shell("flashgate status -socket " + sock))); m != nil {
				break
			}
		}
		if m == nil {
			tb.Fatalf("the probe supervisor on %s did not answer within 10 s", sock)
		}
		pid, _ := strconv.Atoi(m[1])
		time.Sleep(3 * time.Second) // idle, like PID 1 in the measurement above
		rss := readMemory(tb, s, []int{pid})[pid].rss
		s.Shell("kill " + m[1])
		return rss
	}
	def, err := strconv.Atoi(read(knob))
	if err != nil {
		tb.Fatalf("%s: %v", knob, err)
	}
	rss64k = measure(def)
	rss4k = measure(4096)
	s.Shell(fmt.Sprintf("echo %d > %s", def, knob))
	tb.Logf("an idle standalone supervisor: VmRSS %d KiB with the kernel's %d-byte fault-around, %d KiB with none", rss64k, def, rss4k)
	return rss64k, rss4k
}

// bootIdleAppliance boots a copy of the qemu card (with memMB of RAM, 0
// for the board's), sets the admin password at the first-boot prompt,
// logs in at the console and through the API, and commits tunnels
// tunnels to peers that do not exist (iked keeps initiating them).
// login is qemu start to the first-boot password prompt.
func bootIdleAppliance(b *testing.B, board boards.Board, memMB, tunnels int) (vm *images.VM, s *imagestest.Serial, api *API, login time.Duration) {
	b.Helper()
	card := filepath.Join(b.TempDir(), "card.img")
	if err := images.CopyCard(cardImage(b), card); err != nil {
		b.Fatal(err)
	}
	port := freeLoopbackPort(b)
	// The WAN on an isolated user network (restrict=on): the tunnels'
	// IKE goes nowhere. The LAN's user network forwards the web UI
	// port from the host's loopback.
	vm, err := images.StartVM(images.QEMUConfig{
		Board: board, Image: card, WebUIPort: port, MemMB: memMB,
		NetDevs: []string{"user,restrict=on"},
	}, 10*time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		vm.Stop()
		if b.Failed() {
			b.Logf("serial console:\n%s", vm.Log())
		}
	})
	s = imagestest.NewSerial(b, vm)
	s.Expect(4*time.Minute, "No admin password is set.")
	_, login, _ = vm.WaitFor(b.Context(), s.At, "New admin password: ")
	s.Login(adminPassword, true)

	api = loopbackAPI(port)
	if err := api.WaitLogin("admin", adminPassword, 90*time.Second); err != nil {
		b.Fatal(err)
	}
	for n := range tunnels {
		body := map[string]any{
			"remote_address": fmt.Sprintf("10.0.%d.%d", 2+n/200, 20+n%200),
			"psk":            fmt.Sprintf("e2e-rss-psk-%04d-0123456789abcdef", n),
			"local_subnets":  []string{"192.168.1.0/24"}, "remote_subnets": []string{fmt.Sprintf("10.%d.%d.0/24", 20+n/250, n%250)},
			"start_action": "initiate",
		}
		if err := api.Do("PUT", fmt.Sprintf("/api/v1/tunnels/t%04d", n), body, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := api.Do("POST", "/api/v1/commit", map[string]any{"message": fmt.Sprintf("e2e: %d tunnels for the memory benchmark", tunnels)}, nil); err != nil {
		b.Fatal(err)
	}
	return vm, s, api, login
}

// mem128Tunnels is how many tunnels BenchmarkApplianceMem128 configures
// (bench.md / issue 22: boot.qemu128.mem_available_kb, 100 tunnels).
const mem128Tunnels = 100

// BenchmarkApplianceMem128 boots the qemu card with 128 MB of RAM, the
// smallest board flashgate lists (a net4801 with 128 MB; an ALIX 2d13 has
// 256), commits 100 tunnels to peers that do not exist (iked keeps
// initiating every one), leaves the box idle and reports MemAvailable
// (mem_available_kb, target >= 64 MB) and MemTotal as the box's kernel
// sees them, and the PSS sum of every firmware process (pss_total_kb).
// One boot is one measurement: run with -benchtime 1x.
func BenchmarkApplianceMem128(b *testing.B) {
	board, err := boards.Lookup("qemu")
	if err != nil {
		b.Fatal(err)
	}
	var avail, memTotal, pss int
	for i := 0; i < b.N; i++ {
		vm, s, api, _ := bootIdleAppliance(b, board, 128, mem128Tunnels)
		time.Sleep(idleSettle)
		var ts []tunnelView
		if err := api.Do("GET", "/api/v1/tunnels", nil, &ts); err != nil || len(ts) != mem128Tunnels {
			b.Fatalf("the appliance shows %d tunnels (%v), want %d:\n%s", len(ts), err, mem128Tunnels, diagnose(api))
		}
		s.EnterShell()
		rows := parseStatus(s.Shell("flashgate status"))
		pids := []int{1}
		for name, r := range rows {
			if r.state != "running" || r.pid == 0 {
				b.Fatalf("service %s is %s at idle with %d tunnels in 128 MB: %+v", name, r.state, mem128Tunnels, rows)
			}
			pids = append(pids, r.pid)
		}
		pss = 0
		for _, m := range readMemory(b, s, pids) {
			pss += m.pss
		}
		info := consoleText(s.Shell("cat /proc/meminfo"))
		memTotal, avail = meminfoKB(info, "MemTotal"), meminfoKB(info, "MemAvailable")
		if memTotal == 0 || avail == 0 {
			b.Fatalf("/proc/meminfo has no MemTotal or MemAvailable:\n%s", info)
		}
		b.Logf("128 MB, %d tunnels, idle: MemTotal %d KiB, MemAvailable %d KiB, PSS of %d processes %d KiB", mem128Tunnels, memTotal, avail, len(pids), pss)
		logGoMemory(b, s, rows)
		vm.Stop()
	}
	b.ReportMetric(float64(avail), "mem_available_kb")
	b.ReportMetric(float64(memTotal), "mem_total_kb")
	b.ReportMetric(float64(pss), "pss_total_kb")
}
