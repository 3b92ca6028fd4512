package webui

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Host facts come straight from the kernel: /proc for uptime, CPU and
// memory, /sys/class/net for links and counters. root is "/" on the box and
// a fixture tree in tests.

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

// Link is one network interface as the kernel sees it.
type Link struct {
	Name      string   `json:"name"`
	State     string   `json:"state"` // operstate: up, down, unknown, ...
	MAC       string   `json:"mac,omitempty"`
	MTU       int      `json:"mtu"`
	Addresses []string `json:"addresses"`
	RxBytes   uint64   `json:"rx_bytes"`
	TxBytes   uint64   `json:"tx_bytes"`
	RxPackets uint64   `json:"rx_packets"`
	TxPackets uint64   `json:"tx_packets"`
	RxErrors  uint64   `json:"rx_errors"`
	TxErrors  uint64   `json:"tx_errors"`
}

// readLinks lists sys/class/net under root. Addresses come from the
// running kernel (net.InterfaceByName) only when root is "/": a fixture
// tree has no addresses to ask for.
func readLinks(root string) ([]Link, error) {
	dir := filepath.Join(root, "sys/class/net")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []Link
	for _, e := range ents {
		name := e.Name()
		p := filepath.Join(dir, name)
		l := Link{Name: name, State: readTrim(p, "operstate"), MAC: readTrim(p, "address"), Addresses: []string{}}
		l.MTU, _ = strconv.Atoi(readTrim(p, "mtu"))
		l.RxBytes = readUint(p, "statistics/rx_bytes")
		l.TxBytes = readUint(p, "statistics/tx_bytes")
		l.RxPackets = readUint(p, "statistics/rx_packets")
		l.TxPackets = readUint(p, "statistics/tx_packets")
		l.RxErrors = readUint(p, "statistics/rx_errors")
		l.TxErrors = readUint(p, "statistics/tx_errors")
		if root == "/" {
			if ifi, err := net.InterfaceByName(name); err == nil {
				if addrs, err := ifi.Addrs(); err == nil {
					for _, a := range addrs {
						l.Addresses = append(l.Addresses, a.String())
					}
				}
			}
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func readTrim(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

func readUint(dir, name string) uint64 {
	n, _ := strconv.ParseUint(readTrim(dir, name), 10, 64)
	return n
}
