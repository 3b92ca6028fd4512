package bench

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flashgate/flashgate/boards"
)

// Figures turns benchmark results into the named figures of
// ../shared/bench.md. Every named figure is reported: one that no suite
// measured gets a nil value and the reason, never an invented number.
func Figures(res []Result, failures []string) []Figure {
	why := "not measured in this run"
	if len(failures) > 0 {
		why = "not measured: " + strings.Join(failures, "; ")
	}
	var figs []Figure
	figs = append(figs, tunnelFigures(res, why)...)
	figs = append(figs, routeFigures(res, why)...)
	figs = append(figs, ikeFigures(res, why)...)
	figs = append(figs, hubFigures(res, why)...)
	figs = append(figs, boardFigures(res, why)...)
	figs = append(figs, imageFigures(res, why)...)
	figs = append(figs, configFigures(res, why)...)
	figs = append(figs, espFigures(res, why)...)
	figs = append(figs, webuiFigures(res, why)...)
	figs = append(figs, floodFigures(res, why)...)
	figs = append(figs, e2eFigures(res, why)...)
	figs = append(figs, upgradeFigures(res, why)...)
	return figs
}

// upgradeFigures: in-place upgrades in qemu, and power cuts during them.
func upgradeFigures(res []Result, why string) []Figure {
	const b = "BenchmarkUpgradePowerCut"
	return []Figure{
		one(res, "upgrade.total_s", b, "total_s", "s", 1, "",
			"start of the upload to the new version committed after its health checks (includes the reboot; qemu, software emulation)", why),
		one(res, "upgrade.powercut.trials", b, "trials", "", 1, ">= 100",
			"qemu killed at a random moment from the start of the upload to the new firmware's health checks", why),
		one(res, "upgrade.powercut.bricked", b, "bricked", "", 1, "0",
			"trials whose next boot lacked a web UI, ran neither version, lost the configuration, or failed fsck.vfat -n / e2fsck -fn", why),
		one(res, "upgrade.powercut.not_run", b, "not_run", "", 1, "",
			"trials with no cut: the pristine card did not reach its web UI within the limits three times (a loaded host); not in trials", why),
	}
}

// e2eFigures: the two-appliance scenario in qemu. Its throughput is
// measured side by side with plain routing through the same two
// appliances (static routes, no tunnel) in the same benchmark run.
func e2eFigures(res []Result, why string) []Figure {
	const b = "BenchmarkE2ETunnelUp"
	tcp := one(res, "e2e.tcp_1stream_mbps", b, "Mbit/s", "Mbit/s", 1, "",
		"iperf3 host to host through two emulated appliances' kernel IPsec (aes128-sha256), 2 x 5 s alternating with "+
			"the same hosts by static routes through the same appliances (plain routing, no tunnel)", why)
	if pv, ok := Find(res, b, "plain_Mbit/s"); ok {
		tcp = tcp.Against("plain routing", pv)
	} else {
		tcp.Peer = "plain routing"
	}
	return []Figure{
		one(res, "e2e.tunnel_up_s", b, "tunnel_up_s", "s", 1, "<= 20 s",
			"two configured appliances powered on together (qemu, software emulation) to A's API status saying their kernel-IPsec tunnel is up", why),
		tcp,
	}
}

// floodFigures: a configured strongSwan peer brings its tunnel up while
// gwA's IKE port is flooded (ipsec/iked's namespace benchmarks).
func floodFigures(res []Result, why string) []Figure {
	return []Figure{
		one(res, "ike.flood.legit_setup_s", "BenchmarkIKEFloodSpoofed", "legit_setup_s", "s", 1, "<= 2 s",
			"strongSwan's initiate to iked's tunnel up while 1000 spoofed addresses send IKE_SA_INIT at the attacker's full speed "+
				"(one goroutine in a namespace on the same machine, requests built beforehand, 16 per sendmmsg)", why),
		one(res, "ike.flood.read_per_s", "BenchmarkIKEFloodSpoofed", "read/s", "datagrams/s", 1, "",
			"datagrams iked's IKE sockets read per second during that flood (UDP InDatagrams of its namespace over at least 10 s)", why),
		one(res, "ike.flood.kernel_drops_per_s", "BenchmarkIKEFloodSpoofed", "kernel_drops/s", "datagrams/s", 1, "",
			"datagrams the kernel dropped per second during that flood because an IKE socket's buffer was full (UDP RcvbufErrors)", why),
		one(res, "ike.flood.cookie_echo_legit_setup_s", "BenchmarkIKEFloodCookieEcho", "legit_setup_s", "s", 1, "<= 2 s",
			"strongSwan's initiate to iked's tunnel up while one attacker address sends 3000 IKE_SA_INIT/s and answers every COOKIE", why),
		one(res, "ike.flood.rss_peak_kb", "BenchmarkIKEFloodRSS", "rss_peak_kB", "KiB", 1, "<= 48 MB",
			"peak RSS (VmHWM) of `flashgate iked` as its own process while one cookie-answering address (3000/s) and 1000 "+
				"spoofed addresses at full speed flood its IKE port for 15 s and strongSwan brings its tunnel up", why),
	}
}

func webuiFigures(res []Result, why string) []Figure {
	var figs []Figure
	for _, r := range res {
		page, ok := strings.CutPrefix(r.Name, "BenchmarkPage/")
		if !ok {
			// The tunnel list and dashboard of a head office with 1000
			// tunnels: tunnels_1000, dashboard_1000, ...
			if page, ok = strings.CutPrefix(r.Name, "BenchmarkTunnelList/"); !ok {
				continue
			}
		}
		figs = append(figs, Measured("webui.page_bytes."+page, r.Metrics["bytes/page"], "bytes", "<= 100 KB",
			fmt.Sprintf("page with its assets; served in %.2f ms on this machine", r.Metrics["ns/op"]/1e6)))
	}
	// Never left out: the pages issue 22 names (the head office's list at
	// 1000 tunnels) and the dashboard.
	for _, page := range []string{"dashboard", "tunnels", "tunnels_1000", "dashboard_1000"} {
		if !slices.ContainsFunc(figs, func(f Figure) bool { return f.Name == "webui.page_bytes."+page }) {
			figs = append(figs, Unmeasured("webui.page_bytes."+page, "bytes", "<= 100 KB", why))
		}
	}
	figs = append(figs, one(res, "webui.idle_conns_rss_kb", "BenchmarkIdleConns", "rss_kB", "KiB", 1, "<= 8 MB",
		"RSS growth of the process serving the web UI (the real Serve on loopback) while 2000 TCP connections from 125 "+
			"addresses stay idle without TLS; the client ends of the connections are in the same process", why))
	return figs
}

// one reports a figure measured for flashgate alone.
func one(res []Result, name, bench, metric, unit string, scale float64, target, notes, why string) Figure {
	if v, ok := Find(res, bench, metric); ok {
		return Measured(name, v*scale, unit, target, notes)
	}
	return Unmeasured(name, unit, target, why)
}

// mib is the factor from bytes to MiB.
const mib = 1.0 / (1 << 20)

func imageFigures(res []Result, why string) []Figure {
	var figs []Figure
	// Every supported board's figures, measured or not: a board whose
	// build or boot failed is reported without a value, never left out
	// (../shared/bench.md).
	var supported []boards.Board
	for _, b := range boards.All() {
		if b.Unsupported == "" {
			supported = append(supported, b)
		}
	}
	for _, b := range supported {
		target := ""
		if b.Name == "alix2d13" {
			target = "<= 8 MiB"
		}
		bench := "BenchmarkImage/" + b.Name
		v, ok := Find(res, bench, "firmware_bytes")
		if !ok {
			figs = append(figs,
				Unmeasured("image."+b.Name+".firmware_bytes", "bytes", target, why),
				Unmeasured("kernel."+b.Name+".build_s", "s", "", why),
				Unmeasured("kernel."+b.Name+".cached_s", "s", "", why))
			continue
		}
		metric := func(m string) float64 { x, _ := Find(res, bench, m); return x }
		figs = append(figs,
			Measured("image."+b.Name+".firmware_bytes", v, "bytes", target,
				fmt.Sprintf("kernel %.2f MiB + initramfs %.2f MiB = %.2f MiB; boot partition free %.1f MiB",
					metric("kernel_bytes")*mib, metric("initramfs_bytes")*mib, v*mib, metric("boot_free_bytes")*mib)),
			// Cold: what compiling it took when the kernel cache built it,
			// which may be an earlier run (ccache, shared by the cache's
			// trees, may have helped that build).
			Measured("kernel."+b.Name+".build_s", metric("kernel_build_s"), "s", "",
				"cold: compiling this board's kernel when the kernel cache built it (the first board of a CPU class builds the whole tree; the others rebuild only the drivers that differ)"),
			// Cached: what this run's build spent getting its kernel.
			Measured("kernel."+b.Name+".cached_s", metric("kernel_step_s"), "s", "",
				"cached: this run's kernel step for the board (about 0 when the kernel cache had it; a build's time when its input changed)"))
	}
	bootNote := "qemu start to the console's login prompt of an ordinary boot (the card has its admin password), software emulation (TCG), -cpu pentium2"
	if p, ok := Find(res, "BenchmarkBootQEMU", "first_prompt_s"); ok {
		l, _ := Find(res, "BenchmarkBootQEMU", "first_login_s")
		bootNote += fmt.Sprintf("; a fresh card's first boot asks for the admin password at %.1f s and shows the login prompt %.1f s after qemu started (argon2id and a commit included, typing not)", p, l)
	}
	// The qemu board is BenchmarkBootQEMU's (several boots); its one boot
	// in BenchmarkBootBoards goes into the notes, not into a second figure
	// of the same name.
	if v, ok := Find(res, "BenchmarkBootBoards/qemu", "login_s"); ok {
		bootNote += fmt.Sprintf("; BenchmarkBootBoards' boot of the same card: %.2f s", v)
	}
	figs = append(figs, one(res, "boot.qemu.login_s", "BenchmarkBootQEMU", "login_s", "s", 1, "<= 6 s", bootNote, why))
	for _, b := range supported {
		if b.Name == "qemu" {
			continue
		}
		target := ""
		if b.Name == "net4801" {
			target = "<= 15 s"
		}
		cpu := "?"
		if q, err := b.Emulation(); err == nil {
			cpu = q.CPU
		}
		figs = append(figs, one(res, "boot."+b.Name+".login_s", "BenchmarkBootBoards/"+b.Name, "login_s", "s", 1, target,
			fmt.Sprintf("the board's own card in qemu -cpu %s (TCG), qemu start to the login prompt of an ordinary boot", cpu), why))
	}
	const rss = "BenchmarkApplianceRSS"
	pss := func(metric string) string {
		if v, ok := Find(res, rss, metric); ok {
			return fmt.Sprintf("; PSS %.0f KiB (RSS counts the pages of the one shared binary in every process)", v)
		}
		return ""
	}
	rssOf := func(metric string) string {
		if v, ok := Find(res, rss, metric); ok {
			return fmt.Sprintf("; RSS %.0f KiB", v)
		}
		return ""
	}
	used := func() string {
		if v, ok := Find(res, rss, "mem_used_kb"); ok {
			return fmt.Sprintf("; the whole box (kernel, initramfs in RAM, every process) uses %.0f KiB (MemTotal - MemAvailable)", v)
		}
		return ""
	}
	const mem128 = "BenchmarkApplianceMem128"
	total128 := func() string {
		if v, ok := Find(res, mem128, "pss_total_kb"); ok {
			return fmt.Sprintf("; the firmware's processes PSS %.0f KiB there", v)
		}
		return ""
	}
	figs = append(figs,
		one(res, "boot.qemu.rss_init_kb", rss, "rss_init_kb", "KiB", 1, "<= 8 MB", "PID 1 with the supervisor in it, idle, in the qemu appliance"+pss("pss_init_kb"), why),
		one(res, "boot.qemu.rss_total_kb", rss, "rss_total_kb", "KiB", 1, "<= 40 MB", "all firmware processes, idle, 10 tunnels configured"+pss("pss_total_kb")+used(), why),
		one(res, "boot.qemu.pss_total_kb", rss, "pss_total_kb", "KiB", 1, "<= 24 MB", "the PSS sum of PID 1 and every service, idle, 10 tunnels configured (PSS shares the one binary's pages out, so it adds up)", why),
		one(res, "boot.qemu128.mem_available_kb", mem128, "mem_available_kb", "KiB", 1, ">= 64 MB", "MemAvailable of the qemu card booted with -m 128 (the smallest board), idle, 100 tunnels configured"+total128(), why),
		one(res, "boot.qemu.pss_console_kb", rss, "pss_console_kb", "KiB", 1, "", "the serial console's getty (firmware/cli in the multi-call binary), with the admin logged in (the CLI, which has started the expert shell)"+rssOf("rss_console_kb"), why))
	return figs
}

func configFigures(res []Result, why string) []Figure {
	const b = "BenchmarkCommitSmallChange50Tunnels"
	var figs []Figure
	for _, n := range []string{"10", "100", "1000"} {
		bn := "BenchmarkCommitSmallChangeTunnels/n=" + n
		target, wtarget := "", ""
		if n == "1000" {
			target, wtarget = "<= 50 ms", "<= 64 KiB"
		}
		figs = append(figs,
			one(res, "config.commit_ms.n"+n, bn, "ns/op", "ms", 1e-6, target, "one field changed in a "+n+"-tunnel config, bbolt fsync included", why),
			one(res, "config.commit_written_bytes.n"+n, bn, "written_bytes/op", "bytes", 1, wtarget, "bytes written to storage per such commit (/proc/self/io)", why),
			one(res, "config.open_ms.n"+n, bn, "open_ms", "ms", 1, "", "opening the store and reading the running "+n+"-tunnel config back (configd's start)", why))
	}
	return append(figs, []Figure{
		one(res, "config.commit_ms", b, "ns/op", "ms", 1e-6, "<= 50 ms", "one field changed in a 50-tunnel config, bbolt fsync included", why),
		one(res, "config.commit_written_bytes", b, "written_bytes/op", "bytes", 1, "<= 64 KiB",
			"bytes the process wrote to storage per such commit (/proc/self/io write_bytes)", why),
	}...)
}

func espFigures(res []Result, why string) []Figure {
	var figs []Figure
	for _, suite := range []string{"aes128gcm16", "aes128-sha256", "chacha20poly1305"} {
		for _, dir := range []string{"Encap", "Decap"} {
			bench := fmt.Sprintf("Benchmark%s/%s/1400", dir, suite)
			name := fmt.Sprintf("esp.%s_%s_1400_mbps", strings.ToLower(dir), strings.ReplaceAll(suite, "-", "_"))
			f := one(res, name, bench, "MB/s", "Mbit/s", 8, "", "one core, 1400-byte packets, in place", why)
			if a, ok := Find(res, bench, "allocs/op"); ok {
				f.Notes += fmt.Sprintf(", %.0f allocs/op", a)
			}
			figs = append(figs, f)
		}
	}
	figs = append(figs, one(res, "ike.bytes_per_sa", "BenchmarkBytesPerSA", "bytes/ike_sa", "bytes", 1, "",
		"heap per established IKE_SA with one CHILD_SA (engine only)", why))
	return figs
}

// pair reports a figure measured for flashgate and for a peer in the same
// run (sub-benchmarks flashgate and peerKind of bench).
func pair(res []Result, name, bench, unit, metric, peerKind, peerLabel, target, notes, why string) Figure {
	var f Figure
	if v, ok := Find(res, bench+"/flashgate", metric); ok {
		f = Measured(name, v, unit, target, notes)
	} else {
		f = Unmeasured(name, unit, target, why)
	}
	if pv, ok := Find(res, bench+"/"+peerKind, metric); ok {
		return f.Against(peerLabel, pv)
	}
	f.Peer = peerLabel
	return f
}

func ikeFigures(res []Result, why string) []Figure {
	return []Figure{
		pair(res, "ike.setup_ms", "BenchmarkIKESetup", "ms", "ms/setup", "strongswan", "strongSwan", "ratio <= 1.0",
			"IKE_SA + CHILD_SA, PSK, ecp256, serial, initiator to responder of the same kind, data plane install included, netns", why),
		pair(res, "ike.setup_rate_per_s", "BenchmarkIKESetupRate", "SAs/s", "SAs/s", "strongswan", "strongSwan", "ratio >= 1.5",
			"200 setups at once per round (strongSwan: 8 parallel vici initiators), PSK, ecp256, netns", why),
		pair(res, "ike.setup_ms_cert", "BenchmarkIKESetupCert", "ms", "ms/setup", "strongswan", "strongSwan", "ratio <= 1.0",
			"IKE_SA + CHILD_SA with ECDSA P-256 certificates both ways (one CA, IDs in the SANs), ecp256, serial, initiator to responder of the same kind, data plane install included, netns", why),
		pair(res, "ikev1.setup_ms", "BenchmarkIKEv1Setup", "ms", "ms/setup", "strongswan", "strongSwan IKEv1", "ratio <= 1.0",
			"IKEv1 main mode + quick mode, PSK, aes128-sha1-modp2048, no PFS, serial, initiator to responder of the same kind, data plane install included, netns", why),
	}
}

// routeFigures: a route-based tunnel against a policy tunnel in the same
// run, and failover between two route tunnels.
func routeFigures(res []Result, why string) []Figure {
	const b = "BenchmarkRouteTunnelTCP"
	tcp := one(res, "esp.route.tcp_1stream_mbps", b, "route_Mbit/s", "Mbit/s", 1, "ratio >= 0.95",
		"iperf3 5 s, 1 stream, host to host through a route tunnel (ipsec0 TUN, route to the far LAN, any-to-any selectors) "+
			"between two ikeds, userspace ESP aes128gcm16, against a policy tunnel on a twin topology: 11 rounds of one run each, "+
			"the order swapped every round; value and peer value are the medians of each side's runs, the ratio the median "+
			"of the rounds' ratios, netns", why)
	if pv, ok := Find(res, b, "policy_Mbit/s"); ok {
		tcp = tcp.Against("policy tunnel", pv)
		// The rounds' own ratios: a run's neighbour in time is the
		// fairest comparison on a shared machine.
		if r, ok := Find(res, b, "route_ratio"); ok && tcp.Value != nil {
			tcp.Ratio = &r
		}
		// What a busy machine changes far less than the throughput:
		// the CPU time the ikeds spent per byte carried.
		rc, ok1 := Find(res, b, "route_cpu_ns/B")
		pc, ok2 := Find(res, b, "policy_cpu_ns/B")
		if ok1 && ok2 {
			tcp.Notes += fmt.Sprintf("; ikeds' CPU per byte carried (median): route %.2f ns, policy %.2f ns", rc, pc)
		}
	} else {
		tcp.Peer = "policy tunnel"
	}
	return []Figure{tcp,
		one(res, "route.failover_s", "BenchmarkRouteFailover", "failover_s", "s", 1, "",
			"two route tunnels to one strongSwan (two outer addresses), DPD 1 s, dead after 3 s: tunnel 1's peer silently dies "+
				"-> first ping carried by tunnel 2 (probed every 100 ms), netns", why),
	}
}

// tunnelFigures: esp.tcp_{1,4}stream_mbps, one row per peer. Our value is
// BenchmarkTunnelTCP/flashgate; until that runs, the peers' own figures are
// still reported (as their own rows) so a run is never empty.
func tunnelFigures(res []Result, why string) []Figure {
	var figs []Figure
	for _, streams := range []int{1, 4} {
		name := fmt.Sprintf("esp.tcp_%dstream_mbps", streams)
		get := func(kind string) (float64, bool) {
			return Find(res, fmt.Sprintf("BenchmarkTunnelTCP/%s/streams=%d", kind, streams), "Mbit/s")
		}
		ours, haveOurs := get("flashgate")
		notes := fmt.Sprintf("aes128gcm16, iperf3 10 s, %d stream(s), netns", streams)
		for _, peer := range []struct{ kind, label, target string }{
			{"wireguard-go", "wireguard-go", ">= 1.0 x peer"},
			{"strongswan", "strongSwan kernel-libipsec", ">= 5 x peer"},
			{"plain", "plain routing", ""},
		} {
			var f Figure
			if haveOurs {
				f = Measured(name, ours, "Mbit/s", peer.target, notes)
			} else {
				f = Unmeasured(name, "Mbit/s", peer.target, "flashgate's data plane: "+why)
			}
			if pv, ok := get(peer.kind); ok {
				f = f.Against(peer.label, pv)
			} else {
				f.Peer = peer.label
			}
			figs = append(figs, f)
		}
	}
	return figs
}

// hubFigures: N spokes (bench/spokes, one generator process) to one hub,
// iked and strongSwan's charon in turn in the same run. The figure names
// carry N: ike.hub.setup_s.n100, ike.hub.setup_s.n1000, ...
func hubFigures(res []Result, why string) []Figure {
	sizes := map[string]bool{}
	for _, r := range res {
		if rest, ok := strings.CutPrefix(r.Name, "BenchmarkHub/n="); ok {
			n, _, _ := strings.Cut(rest, "/")
			sizes[n] = true
		}
	}
	// The sizes issue 22 names are always reported; a size that failed
	// prints no result line and would otherwise vanish.
	sizes["100"], sizes["1000"] = true, true
	var ns []string
	for n := range sizes {
		ns = append(ns, n)
	}
	slices.SortFunc(ns, func(a, b string) int {
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return cmp.Compare(x, y)
	})
	var figs []Figure
	for _, n := range ns {
		bench := "BenchmarkHub/n=" + n
		setup := pair(res, "ike.hub.setup_s.n"+n, bench, "s", "setup_s", "strongswan", "strongSwan", "ratio <= 0.67",
			n+" spokes (own address, identity and PSK each; at most 50 setups in flight) to the hub's every CHILD_SA up; "+
				"PSK, aes128gcm16-prfsha256-ecp256, userspace ESP (iked) / kernel-libipsec (charon), netns", why)
		answered := pair(res, "ike.hub.answered_s.n"+n, bench, "s", "answered_s", "strongswan", "strongSwan", "",
			"to every spoke's ICMP echo through its CHILD_SA answered by the hub (repeated once a second until answered)", why)
		rss := pair(res, "ike.hub.rss_per_sa_bytes.n"+n, bench, "bytes", "rss_bytes/sa", "strongswan", "strongSwan", "<= 8 KiB",
			"hub process RSS with every SA up minus before the first (with the "+n+" tunnels configured), per IKE_SA with one CHILD_SA "+
				"(data plane state included; iked's Go heap as its GC left it, garbage of the setups not yet collected included)", why)
		heap := one(res, "ike.hub.heap_per_sa_bytes.n"+n, bench+"/flashgate", "heap_bytes/sa", "bytes", 1, "",
			"iked's live Go heap (HeapAlloc after a GC in the hub process, read right after the RSS) with every SA up minus before the first, "+
				"per IKE_SA with one CHILD_SA: what the RSS figure holds beyond the collector's headroom", why)
		configured := pair(res, "ike.hub.rss_configured_bytes.n"+n, bench, "bytes", "rss_configured_bytes", "strongswan", "strongSwan", "",
			"hub process RSS with the "+n+" tunnels configured, before any SA (the baseline of rss_per_sa_bytes)", why)
		status := one(res, "ike.hub.status_ms.n"+n, bench+"/flashgate", "status_ms", "ms", 1, "",
			"iked's status API listing every tunnel (GET /v1/tunnels over its socket, in pages of 100 as ikedapi.Client.Tunnels reads them) with all "+n+" up", why)
		page := one(res, "ike.hub.status_page_ms.n"+n, bench+"/flashgate", "status_page_ms", "ms", 1, "",
			"iked's status API answering one page (GET /v1/tunnels?state=up&offset=N/2&limit=50) with all "+n+" up", why)
		figs = append(figs, setup, answered, rss, heap, configured, status, page)
	}
	return append(figs, hubMarginal(res, why))
}

// hubMarginal is what each SA from the 100th to the 1000th added to the
// hub's RSS: the growth at 1000 spokes less the growth at 100, over 900.
// rss_per_sa_bytes at 100 spreads the costs that do not grow with the SAs
// (the binary's pages the first setups touch, the runtime's own growth)
// over 100 SAs; this difference cancels them.
func hubMarginal(res []Result, why string) Figure {
	const name, unit = "ike.hub.rss_marginal_per_sa_bytes", "bytes"
	notes := "hub RSS growth with 1000 spokes up less that with 100, over the 900 more (rss_bytes/sa of both sizes): the cost of one more IKE_SA with its CHILD_SA, without what the first setups cost once"
	growth := func(kind string) (float64, bool) {
		a, ok1 := Find(res, "BenchmarkHub/n=1000/"+kind, "rss_bytes/sa")
		b, ok2 := Find(res, "BenchmarkHub/n=100/"+kind, "rss_bytes/sa")
		return (a*1000 - b*100) / 900, ok1 && ok2
	}
	f := Unmeasured(name, unit, "", why)
	if v, ok := growth("flashgate"); ok {
		f = Measured(name, v, unit, "", notes)
	}
	if pv, ok := growth("strongswan"); ok {
		return f.Against("strongSwan", pv)
	}
	f.Peer = "strongSwan"
	return f
}

// boardFigures: the 386/softfloat board build (board qemu, the Geode-like
// one) against the amd64 build. This machine runs no 32-bit code, so both
// builds run the same benchmarks in qemu under TCG (runInVM); the 386
// build's native cost here is estimated as the amd64 build's native figure
// times the ratio of the two under the same emulation. The estimate is
// the value; the emulated times are in the notes.
func boardFigures(res []Result, why string) []Figure {
	const b386, b64 = "@qemu", "@qemu-x86_64"
	est := func(name, bench, metric, unit string, scale float64, what string) Figure {
		native, okN := Find(res, bench, metric)
		e386, ok386 := Find(res, bench+b386, metric)
		e64, ok64 := Find(res, bench+b64, metric)
		if !okN || !ok386 || !ok64 || e64 == 0 {
			f := Unmeasured(name, unit, "", why)
			if ok386 {
				f.Notes += fmt.Sprintf("; 386 build under qemu TCG: %.4g %s", e386*scale, unit)
			}
			return f
		}
		f := Measured(name, native*e386/e64*scale, unit, "", fmt.Sprintf(
			"ESTIMATE for the GOARCH=386 GO386=softfloat build on this CPU: amd64 native %.4g %s x (386 %.4g / amd64 %.4g %s, both in qemu TCG, -cpu pentium2 / qemu64); %s. "+
				"TCG does not cost every instruction alike (the amd64 build's curve25519/ecp256 ratio is about 1.2-1.4 natively, 0.3-0.55 under TCG), and the native figure moves with the shared machine's load: treat it as a factor-of-a-few figure (docs/boards.md)",
			native*scale, unit, e386*scale, e64*scale, unit, what))
		return f.Against("amd64 build, native", native*scale)
	}
	var figs []Figure
	figs = append(figs, est("ike.setup_ms_386", "BenchmarkSetup/ecp256", "ns/op", "ms", 1e-6,
		"IKE_SA + CHILD_SA with PSK and ecp256, both ends in one process (ipsec/ike)"))
	for _, g := range []string{"modp2048", "ecp256", "ecp384", "curve25519"} {
		figs = append(figs, est("dh."+g+"_ms_386", "BenchmarkDH/"+g, "ms/dh", "ms", 1,
			"one side's DH: key, public value, shared secret"))
	}
	for _, suite := range []string{"aes128gcm16", "aes128-sha256", "chacha20poly1305"} {
		for _, dir := range []string{"Encap", "Decap"} {
			bench := fmt.Sprintf("Benchmark%s/%s/1400", dir, suite)
			name := fmt.Sprintf("esp.%s_%s_1400_mbps_386", strings.ToLower(dir), strings.ReplaceAll(suite, "-", "_"))
			// No estimate: natively the amd64 build runs AES-NI and AVX2,
			// the emulated qemu64 CPU neither, so the ratio under TCG says
			// nothing of the native builds'. The emulated figures are kept.
			f := Unmeasured(name, "Mbit/s", "", "not estimated: the amd64 build uses AES-NI/AVX2 natively but not under TCG, so the emulated ratio does not carry over")
			if v, ok := Find(res, bench+b386, "MB/s"); ok {
				f.Notes += fmt.Sprintf("; 386 build under qemu TCG (-cpu pentium2): %.1f Mbit/s", v*8)
			}
			if v, ok := Find(res, bench+b64, "MB/s"); ok {
				f.Notes += fmt.Sprintf("; amd64 build under qemu TCG (qemu64): %.1f Mbit/s", v*8)
			}
			figs = append(figs, f)
		}
	}
	return figs
}
