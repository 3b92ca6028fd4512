package boards

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// cpuInfo is what Probe uses from /proc/cpuinfo: the first processor's
// identity and flags. All processors of the boards here are alike.
type cpuInfo struct {
	Vendor    string   // vendor_id: "AuthenticAMD", "CentaurHauls", "Geode by NSC"
	Family    int      // "cpu family", -1 if absent or not a number
	Model     int      // "model", -1 if absent or not a number
	ModelName string   // "model name"
	Flags     []string // "flags", sorted, without duplicates
}

// parseCPUInfo reads the first processor block of /proc/cpuinfo text. It
// never fails: missing or malformed fields are left empty (or -1), so a
// damaged file costs evidence, not the boot.
func parseCPUInfo(data []byte) cpuInfo {
	c := cpuInfo{Family: -1, Model: -1}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if len(seen) > 0 {
				break // end of the first processor's block
			}
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key = strings.TrimSpace(key)
		value = strings.TrimSpace(value)
		if seen[key] {
			continue // first occurrence wins
		}
		seen[key] = true
		switch key {
		case "vendor_id":
			c.Vendor = value
		case "cpu family":
			c.Family = cpuNumber(value)
		case "model":
			c.Model = cpuNumber(value)
		case "model name":
			c.ModelName = value
		case "flags":
			if flags := strings.Fields(value); len(flags) > 0 {
				slices.Sort(flags)
				c.Flags = slices.Compact(flags)
			}
		}
	}
	return c
}

// cpuNumber parses a decimal family or model number; -1 if it is not one.
func cpuNumber(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// has reports whether the CPU has flag.
func (c cpuInfo) has(flag string) bool {
	_, found := slices.BinarySearch(c.Flags, flag)
	return found
}

// String describes the CPU in the words evidence is given in.
func (c cpuInfo) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "vendor_id=%s", orNone(c.Vendor))
	if c.Family >= 0 {
		fmt.Fprintf(&b, " family %d", c.Family)
	}
	if c.Model >= 0 {
		fmt.Fprintf(&b, " model %d", c.Model)
	}
	if c.ModelName != "" {
		fmt.Fprintf(&b, " (%s)", c.ModelName)
	}
	return b.String()
}

// format renders c as /proc/cpuinfo text that parseCPUInfo reads back to
// c. The fuzz test holds the parser to that.
func (c cpuInfo) format() []byte {
	var b bytes.Buffer
	b.WriteString("processor\t: 0\n")
	fmt.Fprintf(&b, "vendor_id\t: %s\n", c.Vendor)
	if c.Family >= 0 {
		fmt.Fprintf(&b, "cpu family\t: %d\n", c.Family)
	}
	if c.Model >= 0 {
		fmt.Fprintf(&b, "model\t\t: %d\n", c.Model)
	}
	fmt.Fprintf(&b, "model name\t: %s\n", c.ModelName)
	fmt.Fprintf(&b, "flags\t\t: %s\n", strings.Join(c.Flags, " "))
	return b.Bytes()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
