// Package importer turns the configuration files of other IPsec
// implementations into flashgate tunnels: OpenBSD isakmpd.conf, strongSwan's
// swanctl.conf and the ipsec.conf of strongSwan and libreswan. An import
// never guesses silently: every line it could not carry over is listed with
// the reason, and what it carries over is checked with config's own rules.
//
// The result goes into the candidate configuration (Apply); nothing runs
// before the admin commits it.
package importer

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/flashgate/flashgate/config"
)

// Format is a kind of configuration file.
type Format string

// The formats Import reads.
const (
	ISAKMPD   Format = "isakmpd.conf" // OpenBSD isakmpd(8), IKEv1
	Swanctl   Format = "swanctl.conf" // strongSwan's vici configuration
	IPsecConf Format = "ipsec.conf"   // strongSwan's stroke or libreswan's pluto
)

// Formats lists the formats, for help texts and pickers.
var Formats = []Format{ISAKMPD, Swanctl, IPsecConf}

// Bounds on what an import reads: the files these come from are a few KB.
const (
	MaxFileSize = 256 << 10 // bytes
	MaxLines    = 10000
	MaxTunnels  = 256
)

// Result is what a file imports to.
type Result struct {
	Format  Format          `json:"format"`
	Tunnels []config.Tunnel `json:"-"` // PSKs inside: never serialize
	// Unmapped lists every line that was not carried over in full, in
	// file order, with the reason.
	Unmapped []Unmapped `json:"unmapped"`
}

// Unmapped is one line of the file that the import could not carry over,
// or carried over only in part.
type Unmapped struct {
	Line   int    `json:"line"`   // 1-based
	Text   string `json:"text"`   // as written, trimmed; secrets redacted
	Reason string `json:"reason"` // why, and what to do instead if anything
}

func (u Unmapped) String() string { return fmt.Sprintf("line %d: %s: %s", u.Line, u.Text, u.Reason) }

// Import detects the format of data and imports it.
func Import(data []byte) (*Result, error) {
	f, err := Detect(data)
	if err != nil {
		return nil, err
	}
	return ImportAs(f, data)
}

// ImportAs imports data read as format f.
func ImportAs(f Format, data []byte) (*Result, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("the file is %d bytes, more than the %d an import reads", len(data), MaxFileSize)
	}
	if !utf8.Valid(data) {
		return nil, errors.New("the file is not text (not valid UTF-8)")
	}
	if n := bytes.Count(data, []byte("\n")); n > MaxLines {
		return nil, fmt.Errorf("the file has %d lines, more than the %d an import reads", n, MaxLines)
	}
	var r *Result
	var err error
	switch f {
	case ISAKMPD:
		r, err = importISAKMPD(data)
	case Swanctl:
		r, err = importSwanctl(data)
	case IPsecConf:
		r, err = importIPsecConf(data)
	default:
		return nil, fmt.Errorf("unknown format %q (known: isakmpd.conf, swanctl.conf, ipsec.conf)", f)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f, err)
	}
	if len(r.Tunnels) > MaxTunnels {
		return nil, fmt.Errorf("%s: %d tunnels, more than the %d an import takes", f, len(r.Tunnels), MaxTunnels)
	}
	r.Format = f
	return r, nil
}

// ParseFormat reads a format name as a user types it.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "isakmpd", "isakmpd.conf", "openbsd":
		return ISAKMPD, nil
	case "swanctl", "swanctl.conf":
		return Swanctl, nil
	case "ipsec", "ipsec.conf", "libreswan", "strongswan", "stroke":
		return IPsecConf, nil
	}
	return "", fmt.Errorf("unknown format %q: isakmpd.conf, swanctl.conf or ipsec.conf", s)
}

// Detect tells the format of a file from its shape: isakmpd.conf has
// [Section] headers and Tag=Value lines, swanctl.conf has braces, and
// ipsec.conf has "conn" sections.
func Detect(data []byte) (Format, error) {
	var brackets, braces, conns, setup int
	for _, l := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(l)
		if i := strings.IndexByte(t, '#'); i >= 0 {
			t = strings.TrimSpace(t[:i])
		}
		switch {
		case t == "":
		case strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]"):
			brackets++
		case strings.HasSuffix(t, "{") || t == "}":
			braces++
		case strings.HasPrefix(t, "conn ") || strings.HasPrefix(t, "conn\t"):
			conns++
		case t == "config setup":
			setup++
		}
	}
	switch {
	case braces > 0 && braces >= brackets && conns == 0:
		return Swanctl, nil
	case conns > 0 || setup > 0:
		return IPsecConf, nil
	case brackets > 0:
		return ISAKMPD, nil
	}
	return "", errors.New("not an isakmpd.conf, swanctl.conf or ipsec.conf: no [sections], no { blocks } and no conn sections")
}

// source is a file's lines with what the import made of each: used, and
// why a line was not (or not fully) carried over.
type source struct {
	lines   []srcLine
	journal *[]int // lines newly marked used while recording
}

type srcLine struct {
	text    string
	used    bool
	secret  bool // redact its value in reports
	reasons []string
}

func newSource(data []byte) *source {
	s := &source{}
	for _, l := range strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n") {
		s.lines = append(s.lines, srcLine{text: l})
	}
	return s
}

// use marks line n (1-based) as carried over.
func (s *source) use(n int) {
	if n >= 1 && n <= len(s.lines) && !s.lines[n-1].used {
		s.lines[n-1].used = true
		if s.journal != nil {
			*s.journal = append(*s.journal, n)
		}
	}
}

// record starts noting the lines newly marked used; stop returns them
// (and hands them on to an enclosing recording), so that what was read
// for something that is then not imported can be unmarked.
func (s *source) record() (stop func() []int) {
	prev := s.journal
	var j []int
	s.journal = &j
	return func() []int {
		s.journal = prev
		if prev != nil {
			*prev = append(*prev, j...)
		}
		return j
	}
}

// unuse unmarks lines (reasons stay).
func (s *source) unuse(lines []int) {
	for _, n := range lines {
		s.lines[n-1].used = false
	}
}

// note records why line n was not carried over (in full).
func (s *source) note(n int, format string, args ...any) {
	if n >= 1 && n <= len(s.lines) {
		why := fmt.Sprintf(format, args...)
		for _, r := range s.lines[n-1].reasons {
			if r == why {
				return
			}
		}
		s.lines[n-1].reasons = append(s.lines[n-1].reasons, why)
	}
}

// secret marks line n as holding a secret.
func (s *source) secret(n int) {
	if n >= 1 && n <= len(s.lines) {
		s.lines[n-1].secret = true
	}
}

// unmapped lists the lines with a reason, and the meaningful lines never
// used (with unused(n) as their reason), in file order. meaningful says
// whether a line carries anything (not blank, not a comment).
func (s *source) unmapped(meaningful func(text string) bool, unused func(n int) string) []Unmapped {
	var out []Unmapped
	for i, l := range s.lines {
		text := strings.TrimSpace(l.text)
		if l.secret {
			text = redact(text)
		}
		switch {
		case len(l.reasons) > 0:
			out = append(out, Unmapped{Line: i + 1, Text: text, Reason: strings.Join(l.reasons, "; ")})
		case !l.used && meaningful(l.text):
			out = append(out, Unmapped{Line: i + 1, Text: text, Reason: unused(i + 1)})
		}
	}
	return out
}

// redact keeps a line's key and hides its value: "Authentication= <redacted>".
func redact(text string) string {
	for i, r := range text {
		if r == '=' || r == ':' {
			return strings.TrimSpace(text[:i+1]) + " " + config.Redacted
		}
	}
	return config.Redacted
}

// uniqueName turns a section or connection name into a tunnel name that
// config accepts and no other tunnel of the import has.
func uniqueName(raw string, taken map[string]bool) string {
	var b strings.Builder
	for _, r := range raw {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-_")
	if name == "" {
		name = "imported"
	}
	if len(name) > 28 {
		name = name[:28]
	}
	base := name
	for i := 2; taken[name]; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	taken[name] = true
	return name
}

// finish fills what a tunnel needs from the proposals it got: legacy on
// when any proposal needs it, IKE version rules checked.
func finish(t *config.Tunnel) {
	for _, w := range t.WeakProposals() {
		for _, x := range w.Weaknesses {
			if x.Legacy {
				t.LegacyAlgorithms = true
			}
		}
	}
}

// Apply adds the imported tunnels to a copy of c (the candidate) and
// returns it. A tunnel whose name c already has is refused, not renamed
// or overwritten, so that nothing already configured is lost. The result
// is not validated: the candidate may hold work in progress, and the
// commit checks it; CheckTunnels says beforehand what a commit would say.
func Apply(c *config.Config, tunnels []config.Tunnel) (*config.Config, error) {
	out := c.Clone()
	var clash []string
	for _, t := range tunnels {
		if out.Tunnel(t.Name) != nil {
			clash = append(clash, t.Name)
			continue
		}
		out.Tunnels = append(out.Tunnels, t)
	}
	if len(clash) > 0 {
		return nil, fmt.Errorf("the candidate already has tunnels called %s; rename or delete them first (nothing was imported)", strings.Join(clash, ", "))
	}
	return out, nil
}

// CheckTunnels says, for each imported tunnel, what a commit of c with the
// tunnels added would refuse about it (nil when nothing).
func CheckTunnels(c *config.Config, tunnels []config.Tunnel) map[string][]string {
	with := c.Clone()
	with.Tunnels = append(with.Tunnels, tunnels...)
	problems := map[string][]string{}
	var ve config.ValidationErrors
	if err := with.Validate(); errors.As(err, &ve) {
		for _, e := range ve {
			for _, t := range tunnels {
				if strings.HasPrefix(e.Path, "tunnels["+t.Name+"]") {
					problems[t.Name] = append(problems[t.Name], e.Error())
				}
			}
		}
	}
	for k := range problems {
		sort.Strings(problems[k])
	}
	return problems
}
