// Package kernel is the Linux kernel flashgate boots: the Debian source
// package it is built from, pinned here and nowhere else, and the
// configuration, kept as small fragments merged onto the kernel's own
// tinyconfig: common.config for every board, cpu/<class>.config for the
// processor type, and board/<board>.config for exactly the drivers the
// board has. The image builder (package images) fetches the source, merges
// the fragments, builds and caches the result.
//
// Taking Debian's security fixes is a version bump of SourceVersion: the
// Debian package carries the fixes Debian backports to its 6.1 branch.
package kernel

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/flashgate/flashgate/kernel/cpuclass"
)

const (
	// SourcePackage is the Debian package holding the kernel source
	// (linux-source-6.1: a tarball of Linux 6.1 with Debian's patches).
	SourcePackage = "linux-source-6.1"
	// SourceVersion is the Debian version of SourcePackage the firmware
	// is built from. Bump it to take Debian's security fixes; the build
	// refuses any other version, so every image of a commit has the same
	// kernel.
	SourceVersion = "6.1.192-3"
)

// LocalVersion is appended to the kernel's own version to make the release
// (uname -r): the Debian revision and "flashgate", so 6.1.192 built from
// Debian's 6.1.192-3 is "6.1.192-3-flashgate" on the box.
func LocalVersion() string {
	rev := SourceVersion
	if i := strings.LastIndex(rev, "-"); i >= 0 {
		rev = rev[i+1:]
	}
	return "-" + rev + "-flashgate"
}

// Class is a CPU class (package cpuclass, which the boards' table links
// instead of this package).
type Class = cpuclass.Class

const (
	// ClassI586 is every 32-bit board: Pentium-MMX code, no CMOV, no SSE.
	ClassI586 = cpuclass.I586
	// ClassX8664 is every 64-bit board.
	ClassX8664 = cpuclass.X8664
)

//go:embed config
var configFS embed.FS

// Fragment is one configuration fragment file.
type Fragment struct {
	Name string // path under kernel/config, e.g. "board/alix2d13.config"
	Text []byte
}

// Fragments returns the fragments of board's kernel in merge order:
// common, the CPU class, the board.
func Fragments(class Class, board string) ([]Fragment, error) {
	if _, err := class.Arch(); err != nil {
		return nil, err
	}
	var out []Fragment
	for _, name := range []string{"common.config", "cpu/" + string(class) + ".config", "board/" + board + ".config"} {
		b, err := fs.ReadFile(configFS, "config/"+name)
		if err != nil {
			return nil, fmt.Errorf("kernel config fragment %s: %w", name, err)
		}
		out = append(out, Fragment{Name: name, Text: b})
	}
	return out, nil
}

// Board fragments that exist, for tests and docs.
func BoardFragments() ([]string, error) {
	ents, err := fs.ReadDir(configFS, "config/board")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".config"); ok {
			out = append(out, name)
		}
	}
	return out, nil
}

// The lines of a .config, compiled on first use: the firmware links this
// package (boards name their kernel class) but never parses a .config, and
// a regexp compiled at start was heap and CPU in every one of its
// processes.
var (
	setLine   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(CONFIG_[A-Za-z0-9_]+)=(.*)$`) })
	unsetLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^# (CONFIG_[A-Za-z0-9_]+) is not set$`) })
)

// Settings are symbol values as a .config spells them: "y", "m", a number,
// a quoted string; "n" for "is not set".
type Settings map[string]string

// ParseSettings reads fragments (or a whole .config) in order, later
// settings overriding earlier ones. Any line that is neither a setting, a
// comment nor blank is an error naming the fragment and line.
func ParseSettings(frags ...Fragment) (Settings, error) {
	s := Settings{}
	for _, f := range frags {
		sc := bufio.NewScanner(bytes.NewReader(f.Text))
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if m := setLine().FindStringSubmatch(line); m != nil {
				s[m[1]] = m[2]
				continue
			}
			if m := unsetLine().FindStringSubmatch(line); m != nil {
				s[m[1]] = "n"
				continue
			}
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			return nil, fmt.Errorf("kernel config %s:%d: %q is not CONFIG_X=value or a comment", f.Name, n, line)
		}
	}
	return s, nil
}

// Missing returns, sorted, one line per setting of want that got does not
// hold: what kconfig dropped because a dependency is missing or the symbol
// does not exist in this kernel. A "n" setting holds when got lacks it.
func (want Settings) Missing(got Settings) []string {
	var out []string
	for k, v := range want {
		g, ok := got[k]
		if v == "n" {
			if ok && g != "n" {
				out = append(out, fmt.Sprintf("%s should be off but is %s", k, g))
			}
			continue
		}
		if g != v {
			if !ok {
				g = "unset (a dependency is missing, or no such symbol)"
			}
			out = append(out, fmt.Sprintf("%s=%s asked, got %s", k, v, g))
		}
	}
	sort.Strings(out)
	return out
}

// Key is the cache key of a kernel build: the source version, the class and
// every fragment's name and bytes, plus extra (the compiler's version and
// the builder's own revision, from the caller).
func Key(class Class, frags []Fragment, extra ...string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s %s %s\n", SourcePackage, SourceVersion, LocalVersion(), class)
	for _, f := range frags {
		fmt.Fprintf(h, "%s %d\n", f.Name, len(f.Text))
		h.Write(f.Text)
	}
	for _, e := range extra {
		fmt.Fprintf(h, "%s\n", e)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
