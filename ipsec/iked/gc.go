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
// so a hub's resident memory grows by about twice its SAs' live heap. 50
// lets the heap grow by half. Measured (docs/architecture.md, "iked's
// memory"): a hub of 1000 spokes grew by 12.7 KB of RSS per SA at 100,
// 10.4 KB at 50 and 7.9 KB at 25 (BenchmarkHub's rss_bytes/sa), while
// setups with the CPU as the bottleneck (BenchmarkHubMemory's cpu_us/sa)
// cost 13% more CPU at 50 and 45% more at 25: 25 would be too dear on a
// 500 MHz board when its branches all reconnect at once.
//
// memLimitShare: a soft limit of a quarter of the board's RAM (64 MiB on
// an ALIX's 256 MB, 32 MiB on a 128 MB net4801): near it the collector
// runs more often instead of letting garbage take the RAM the kernel,
// configd and the web UI need (with 32 MiB the same hub grew by 8.6 KB per
// SA). It limits garbage, not what is live: an iked that truly needs more
// goes over it (and the collector then takes at most half of the CPU, Go's
// own cap), it is not killed by it.
const (
	gcPercent     = 50
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
			limit = fmt.Sprintf("memory limit %d MiB (a quarter of %d MiB RAM)", total/memLimitShare>>20, total>>20)
		}
	}
	logf("iked: garbage collector: %s, %s", percent, limit)
	// The Go runtime's view of iked's memory on SIGUSR1, as the other
	// services give it (internal/gomem). iked keeps its own limit: the
	// hub's RSS per SA is counted from its idle size.
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
