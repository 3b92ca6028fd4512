package hostd

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// applianceLocaltime is where Go (time.Local), busybox and musl look for
// the local time zone when TZ is not set. hostd writes it only when told
// to (-localtime): PID 1's service table does, a test must not.
const applianceLocaltime = "/etc/localtime"

// writeLocaltime installs a zone, given by its POSIX TZ rule, as the
// TZif file at path, atomically: a process starting meanwhile reads the
// old zone or the new one, never half a file. Each Go process reads it
// once, at its first use of local time, so a running service keeps the
// zone it started with; the web UI rereads it when its size or
// modification time changes, and each console login runs in a fresh
// getty, so nothing needs a restart.
func writeLocaltime(path, rule string) error {
	data, err := tzif(rule)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".localtime-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("install %s: %w", path, err)
	}
	return nil
}

// tzif encodes a TZif version 2 file (RFC 8536) with no transitions and
// one local time type, the rule's standard time, and the rule as the
// footer: readers use the footer for every time after the last
// transition, which here is all of them.
func tzif(rule string) ([]byte, error) {
	name, utoff, err := standardTime(rule)
	if err != nil {
		return nil, err
	}
	var b []byte
	// The version 1 block (32-bit times) and the version 2 block (64-bit)
	// are the same here, as there are no transition times to widen.
	for range 2 {
		b = append(b, "TZif2"...)
		b = append(b, make([]byte, 15)...)
		for _, n := range []uint32{0, 0, 0, 0, 1, uint32(len(name) + 1)} { // isut, isstd, leap, time, type, char counts
			b = binary.BigEndian.AppendUint32(b, n)
		}
		b = binary.BigEndian.AppendUint32(b, uint32(int32(utoff)))
		b = append(b, 0, 0) // isdst 0, designation index 0
		b = append(b, name...)
		b = append(b, 0)
	}
	b = append(b, '\n')
	b = append(b, rule...)
	b = append(b, '\n')
	return b, nil
}

// standardTime parses the start of a POSIX TZ rule, the standard time's
// designation and offset ("CET-1" is CET, one hour east of UTC: POSIX
// signs are west-positive), and returns the designation and the offset
// in seconds east of UTC, as TZif stores it.
func standardTime(rule string) (string, int, error) {
	var name, rest string
	if strings.HasPrefix(rule, "<") {
		end := strings.IndexByte(rule, '>')
		if end < 0 {
			return "", 0, fmt.Errorf("TZ rule %q: unterminated <designation>", rule)
		}
		name, rest = rule[1:end], rule[end+1:]
	} else {
		i := 0
		for i < len(rule) && (rule[i] >= 'A' && rule[i] <= 'Z' || rule[i] >= 'a' && rule[i] <= 'z') {
			i++
		}
		name, rest = rule[:i], rule[i:]
	}
	if len(name) < 3 {
		return "", 0, fmt.Errorf("TZ rule %q: designation %q is shorter than 3 characters", rule, name)
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return !(r >= '0' && r <= '9' || r == ':' || r == '+' || r == '-') })
	if end < 0 {
		end = len(rest)
	}
	west, err := posixOffset(rest[:end])
	if err != nil {
		return "", 0, fmt.Errorf("TZ rule %q: %w", rule, err)
	}
	return name, -west, nil
}

// posixOffset parses [+-]hh[:mm[:ss]] into seconds.
func posixOffset(s string) (int, error) {
	sign := 1
	switch {
	case strings.HasPrefix(s, "-"):
		sign, s = -1, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	parts := strings.Split(s, ":")
	if s == "" || len(parts) > 3 {
		return 0, fmt.Errorf("offset %q is not [+-]hh[:mm[:ss]]", s)
	}
	secs := 0
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || len(p) > 2 || i > 0 && n > 59 || i == 0 && n > 24 {
			return 0, fmt.Errorf("offset %q is not [+-]hh[:mm[:ss]]", s)
		}
		secs += n * []int{3600, 60, 1}[i]
	}
	return sign * secs, nil
}

// localtimeHolds reports whether the file at path is already the zone
// writeLocaltime would install for rule, so that a restarted hostd does
// not rewrite it (and make the web UI reread it) for nothing.
func localtimeHolds(path, rule string) bool {
	want, err := tzif(rule)
	if err != nil {
		return false
	}
	have, err := os.ReadFile(path)
	return err == nil && bytes.Equal(have, want)
}
