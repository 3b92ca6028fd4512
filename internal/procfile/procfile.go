// Package procfile reads the "Name:   value kB" lines of the kernel's
// /proc files (/proc/meminfo, /proc/PID/status).
package procfile

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// KiB returns the value of the line "name: N kB" of file, in KiB.
func KiB(file, name string) (int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name+":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("%s: %s line %q, want a number of kB", file, name, sc.Text())
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s: %s line %q, want a number of kB", file, name, sc.Text())
		}
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	return 0, fmt.Errorf("%s: no %s line", file, name)
}
