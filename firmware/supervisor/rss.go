package supervisor

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/flashgate/flashgate/internal/procfile"
)

// ReadRSSKiB returns VmRSS from a /proc/<pid>/status file, in KiB.
func ReadRSSKiB(statusPath string) (int, error) {
	kb, err := procfile.KiB(statusPath, "VmRSS")
	return int(kb), err
}

func numGoroutine() int { return runtime.NumGoroutine() }

// Memory is a process's memory as /proc/<pid>/smaps_rollup tells it, in
// KiB. On the appliance most of PID 1's RSS is the firmware binary's pages:
// the initramfs is RAM (shmem), and those pages are shared with every
// service started from the same binary. PSS charges each process its share
// of them; Private is what this process alone costs.
type Memory struct {
	RSS     int `json:"rss_kib"`
	PSS     int `json:"pss_kib"`
	Private int `json:"private_kib"` // Private_Clean + Private_Dirty
}

// ReadMemory parses a smaps_rollup file.
func ReadMemory(path string) (Memory, error) {
	f, err := os.Open(path)
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	var m Memory
	seen := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int
		switch key {
		case "Rss":
			dst = &m.RSS
		case "Pss":
			dst = &m.PSS
		case "Private_Clean", "Private_Dirty":
			dst = &m.Private
		default:
			continue
		}
		num, unit, _ := strings.Cut(strings.TrimSpace(val), " ")
		n, err := strconv.Atoi(num)
		if err != nil || unit != "kB" {
			return Memory{}, fmt.Errorf("%s: %s: %q is not a size in kB", path, key, strings.TrimSpace(val))
		}
		*dst += n
		seen++
	}
	if err := sc.Err(); err != nil {
		return Memory{}, err
	}
	if seen < 4 {
		return Memory{}, fmt.Errorf("%s: no Rss, Pss and Private lines", path)
	}
	return m, nil
}
