package webui

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Host facts come straight from the kernel's /proc: uptime, CPU and
// memory. root is "/" on the box and a fixture tree in tests. The links
// and their counters come from netd (links.go).

// CPUTimes are the aggregate jiffies of /proc/stat's "cpu" line.
type CPUTimes struct {
	Busy, Total uint64
}

// readCPUTimes parses the first line of proc/stat.
func readCPUTimes(root string) (CPUTimes, error) {
	f, err := os.Open(filepath.Join(root, "proc/stat"))
	if err != nil {
		return CPUTimes{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return CPUTimes{}, fmt.Errorf("proc/stat: empty")
	}
	return parseCPULine(sc.Text())
}

// parseCPULine parses "cpu  user nice system idle iowait irq softirq steal ...".
// Idle and iowait count as not busy.
func parseCPULine(line string) (CPUTimes, error) {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return CPUTimes{}, fmt.Errorf("proc/stat: unexpected first line %q", line)
	}
	var t CPUTimes
	for i, s := range f[1:] {
		if i >= 8 { // guest times are already in user and nice
			break
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("proc/stat: field %d %q: %w", i+1, s, err)
		}
		t.Total += n
		if i != 3 && i != 4 {
			t.Busy += n
		}
	}
	return t, nil
}

// Memory is /proc/meminfo's view, in KiB.
type Memory struct {
	TotalKiB     uint64 `json:"total_kib"`
	AvailableKiB uint64 `json:"available_kib"`
}

// UsedPercent is the share of memory not available to new work.
func (m Memory) UsedPercent() float64 {
	if m.TotalKiB == 0 {
		return 0
	}
	return 100 * float64(m.TotalKiB-min(m.AvailableKiB, m.TotalKiB)) / float64(m.TotalKiB)
}

func readMemory(root string) (Memory, error) {
	b, err := os.ReadFile(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	var free, buffers, cached uint64
	haveAvail := false
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "MemTotal":
			m.TotalKiB = n
		case "MemAvailable":
			m.AvailableKiB, haveAvail = n, true
		case "MemFree":
			free = n
		case "Buffers":
			buffers = n
		case "Cached":
			cached = n
		}
	}
	if m.TotalKiB == 0 {
		return Memory{}, fmt.Errorf("proc/meminfo: no MemTotal")
	}
	if !haveAvail { // kernels before 3.14
		m.AvailableKiB = free + buffers + cached
	}
	return m, nil
}

func readUptime(root string) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(root, "proc/uptime"))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("proc/uptime: empty")
	}
	s, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("proc/uptime: %w", err)
	}
	return time.Duration(s * float64(time.Second)).Truncate(time.Second), nil
}
