package hwcrypto

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// CPUInfo is what /proc/cpuinfo says about the first processor. Every core
// of the boards we support is identical, so the first block is enough.
type CPUInfo struct {
	Vendor    string          `json:"vendor"`     // vendor_id, e.g. "CentaurHauls", "AuthenticAMD"
	Family    int             `json:"family"`     // cpu family
	Model     int             `json:"model"`      // model
	ModelName string          `json:"model_name"` // model name, e.g. "VIA Nehemiah"
	Flags     map[string]bool `json:"-"`
}

// Has reports whether the CPU advertises flag (e.g. "aes", "ace_en").
func (c CPUInfo) Has(flag string) bool { return c.Flags[flag] }

// ParseCPUInfo reads the first processor block of /proc/cpuinfo. Unknown
// keys are ignored; a malformed number is an error because family and model
// decide whether an engine is trusted (PadLock PHE on Zhaoxin).
func ParseCPUInfo(r io.Reader) (CPUInfo, error) {
	info := CPUInfo{Flags: map[string]bool{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	seen := false
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if seen {
				break // end of the first processor block
			}
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		seen = true
		key = strings.TrimSpace(key)
		value = strings.TrimSpace(value)
		switch key {
		case "vendor_id":
			info.Vendor = value
		case "model name":
			info.ModelName = value
		case "cpu family":
			n, err := strconv.Atoi(value)
			if err != nil {
				return CPUInfo{}, fmt.Errorf("cpuinfo: cpu family %q: %w", value, err)
			}
			info.Family = n
		case "model":
			n, err := strconv.Atoi(value)
			if err != nil {
				return CPUInfo{}, fmt.Errorf("cpuinfo: model %q: %w", value, err)
			}
			info.Model = n
		case "flags":
			for _, f := range strings.Fields(value) {
				info.Flags[f] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return CPUInfo{}, fmt.Errorf("cpuinfo: %w", err)
	}
	if !seen {
		return CPUInfo{}, fmt.Errorf("cpuinfo: no processor entry")
	}
	return info, nil
}
