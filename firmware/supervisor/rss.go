package supervisor

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// ReadRSSKiB returns VmRSS from a /proc/<pid>/status file, in KiB.
func ReadRSSKiB(statusPath string) (int, error) {
	f, err := os.Open(statusPath)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		num, unit, _ := strings.Cut(strings.TrimSpace(v), " ")
		if unit != "kB" {
			return 0, fmt.Errorf("%s: VmRSS unit %q, want kB", statusPath, unit)
		}
		return strconv.Atoi(num)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no VmRSS line", statusPath)
}

func numGoroutine() int { return runtime.NumGoroutine() }
