package iked

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/flashgate/flashgate/internal/gomem"
	"github.com/flashgate/flashgate/internal/procfile"
)

// iked's garbage collector settings (docs/architecture.md, "iked's
// memory"), set by Main unless the environment sets GOGC or GOMEMLIMIT.
//
// gcPercent: Go's default (100) lets the heap grow to twice what is live
// before a collection. iked's live heap grows with its SAs, and every IKE
// setup leaves garbage several times its SA's size (messages, DH, keying),
// so a hub's resident memory grows by about twice its SAs' live heap. 30
// lets the heap grow by less than a third. Measured at 1000 spokes
// (docs/architecture.md, "iked's memory"): BenchmarkHub's rss_bytes/sa was
// 12.7 KB at 100 and 10.4 KB at 50 when the live heap per SA was 5.5 KB;
// with it at 4.6 KB, 8.3 KB at 50 and 7.2 KB at 30 (medians of 5
// interleaved runs, December 2026), for 6% more of iked's CPU over the
// setups (0.35 -> 0.37 s). Setups with the CPU as the bottleneck
// (BenchmarkHubMemory's cpu_us/sa) showed no difference beyond the noise,
// on amd64 (median 425 -> 438 us) or in the boards' 386 softfloat build,
// where the Diffie-Hellman is most of a setup (3.2-5.1 ms either way). It
// was 50 until the setups' garbage was cut: then 25 cost 45% more CPU.
//
// memLimitShare: a soft limit of a quarter of the board's RAM (64 MiB on
// an ALIX's 256 MB, 32 MiB on a 128 MB net4801): near it the collector
// runs more often instead of letting garbage take the RAM the kernel,
// configd and the web UI need (with 32 MiB the same hub grew by 8.6 KB per
// SA). It limits garbage, not what is live: an iked that truly needs more
// goes over it (and the collector then takes at most half of the CPU, Go's
// own cap), it is not killed by it.
//
// Below that cap the limit follows the live heap (internal/gomem), as in
// the other services: an idle iked holding 0.4 MB kept 0.8 MB of free heap
// resident under GOGC's 1.2 MB minimum (SIGUSR1's report in the qemu
// appliance, December 2026), which a box with ten tunnels never needs.
// With a hub's SAs live the heap is past that minimum and the cap alone
// applies, as before.
const (
	gcPercent     = 30
	memLimitShare = 4
)

// tuneGC applies those settings and says what iked runs with.
func tuneGC(logf func(string, ...any)) {
	percent := "GOGC from the environment"
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
		percent = fmt.Sprintf("GOGC %d", gcPercent)
	}
	limit := "GOMEMLIMIT from the environment"
	if os.Getenv("GOMEMLIMIT") == "" {
		total, err := memTotal("/proc/meminfo")
		if err != nil {
			limit = fmt.Sprintf("no memory limit (%v)", err)
		} else {
			debug.SetMemoryLimit(total / memLimitShare)
			note, _ := gomem.Follow(total / memLimitShare)
			limit = fmt.Sprintf("%s, at most %d MiB (a quarter of %d MiB RAM)", note, total/memLimitShare>>20, total>>20)
		}
	}
	logf("iked: garbage collector: %s, %s", percent, limit)
	// The Go runtime's view of iked's memory on SIGUSR1, as the other
	// services give it (internal/gomem).
	gomem.ReportOnSignal(func(f string, a ...any) { logf("iked: "+f, a...) })
}

// memTotal is MemTotal of a /proc/meminfo, in bytes.
func memTotal(file string) (int64, error) {
	kb, err := procfile.KiB(file, "MemTotal")
	if err == nil && kb == 0 {
		err = fmt.Errorf("%s: MemTotal is 0", file)
	}
	return kb << 10, err
}
