// Package bootparam reads what the image builder told the running system on
// the kernel command line: the board, the firmware version and the console.
// The kernel does not pass dotted arguments (flashgate.board=...) to init as
// environment, so they are read from /proc/cmdline.
package bootparam

import (
	"os"
	"strconv"
	"strings"
)

// Params are the kernel command line arguments flashgate uses.
type Params struct {
	Board   string // flashgate.board=, "" if absent
	Version string // flashgate.version=, else the initramfs's /etc/flashgate/version (see Read), "" if neither
	Slot    string // flashgate.slot=: the boot partition slot ("a" or "b") the kernel came from, "" if absent
	// Console is the last console= argument ("ttyS0,115200n8" gives
	// ConsoleDevice "ttyS0" and ConsoleBaud 115200); the kernel also
	// makes the last one /dev/console.
	ConsoleDevice string
	ConsoleBaud   int
	// ConsoleLogLevelSet is whether the command line chose how much the
	// kernel prints on the console (loglevel=, debug or quiet); PID 1 then
	// leaves the console's log level alone.
	ConsoleLogLevelSet bool
}

// Parse parses a kernel command line. Quoted values ("a b") are kept whole,
// as the kernel does.
func Parse(cmdline string) Params {
	var p Params
	for _, arg := range fields(cmdline) {
		key, val, _ := strings.Cut(arg, "=")
		switch key {
		case "flashgate.board":
			p.Board = val
		case "flashgate.version":
			p.Version = val
		case "flashgate.slot":
			p.Slot = val
		case "loglevel", "debug", "quiet":
			p.ConsoleLogLevelSet = true
		case "console":
			dev, opts, _ := strings.Cut(val, ",")
			p.ConsoleDevice, p.ConsoleBaud = dev, 0
			digits := opts
			if i := strings.IndexFunc(opts, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
				digits = opts[:i]
			}
			if n, err := strconv.Atoi(digits); err == nil && n > 0 {
				p.ConsoleBaud = n
			}
		}
	}
	return p
}

// fields splits like the kernel's next_arg: on spaces outside double
// quotes, with the quotes removed.
func fields(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			have = true
		case (r == ' ' || r == '\t' || r == '\n') && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// Read parses /proc/cmdline; without flashgate.version on it, the version
// is read from VersionFile.
func Read() (Params, error) {
	b, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return Params{}, err
	}
	p := Parse(string(b))
	if p.Version == "" {
		p.Version = ReadVersion(VersionFile)
	}
	return p, nil
}

// VersionFile is where the image builder puts the firmware's version in
// the initramfs. The kernel command line cannot carry it: syslinux.cfg is
// written once at flash time, and each slot's firmware brings its own.
const VersionFile = "/etc/flashgate/version"

// ReadVersion returns the version in file, "" if there is none.
func ReadVersion(file string) string {
	b, err := os.ReadFile(file)
	if err != nil || len(b) > 128 {
		return ""
	}
	return strings.TrimSpace(string(b))
}
