package imagestest

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/images"
)

// Serial follows one booted appliance's serial console from a position on,
// as an admin at a terminal would: wait for text, type a line, read what a
// command printed. It is the one driver of the console for the tests that
// boot the appliance (firmware/vmtest, e2e); each wait fails the test with
// what the console printed instead.
type Serial struct {
	TB testing.TB
	VM *images.VM
	// At is the offset in the serial log up to which everything has been
	// read: the next wait looks only after it.
	At int
}

// NewSerial follows vm's console from its start.
func NewSerial(tb testing.TB, vm *images.VM) *Serial {
	return &Serial{TB: tb, VM: vm}
}

// CLIPrompt is the console CLI's prompt, with the countdown it shows while
// a commit waits for confirmation: "admin@flashgate [confirm 5 in 0:58]> ".
var CLIPrompt = regexp.MustCompile(`admin@[A-Za-z0-9.-]+(?: \[confirm \d+ in \d+:\d\d\])?> `)

// cliPromptOrMore is the CLI's prompt or its pager's --More-- prompt,
// which long output (longer than the 24-line screen) stops at.
var cliPromptOrMore = regexp.MustCompile(CLIPrompt.String() + `|--More-- \([^)]*\)`)

// ShellPrompt is the expert shell's (u-root gosh) prompt.
const ShellPrompt = "$ "

// typePause is how long TypeLine waits before typing: a person lets the
// prompt settle, and so must a test, or the line editor may still be
// drawing it.
const typePause = 200 * time.Millisecond

// Expect waits up to limit for the first of markers to appear after the
// current position, moves past it and returns its index.
func (s *Serial) Expect(limit time.Duration, markers ...string) int {
	s.TB.Helper()
	i, _ := s.ExpectAny(limit, markers...)
	return i
}

// ExpectAny is Expect that also returns what the console printed from the
// old position up to the end of the marker.
func (s *Serial) ExpectAny(limit time.Duration, markers ...string) (int, string) {
	s.TB.Helper()
	deadline := time.Now().Add(limit)
	for {
		log := s.VM.Log()
		from := min(s.At, len(log))
		best, bestAt := -1, -1
		for i, m := range markers {
			if j := bytes.Index(log[from:], []byte(m)); j >= 0 && (bestAt < 0 || j < bestAt) {
				best, bestAt = i, j
			}
		}
		if best >= 0 {
			s.At = from + bestAt + len(markers[best])
			return best, string(log[from:s.At])
		}
		if time.Now().After(deadline) {
			s.TB.Fatalf("the serial console did not show any of %q within %s; after the last match it printed:\n%s",
				markers, limit, Tail(log[from:], 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ExpectRegexp waits for re after the current position and moves past it,
// returning what was printed before the match.
func (s *Serial) ExpectRegexp(limit time.Duration, re *regexp.Regexp) string {
	s.TB.Helper()
	before, _ := s.ExpectMatch(limit, re)
	return before
}

// ExpectMatch is ExpectRegexp that also returns the match.
func (s *Serial) ExpectMatch(limit time.Duration, re *regexp.Regexp) (before, match string) {
	s.TB.Helper()
	deadline := time.Now().Add(limit)
	for {
		log := s.VM.Log()
		from := min(s.At, len(log))
		if loc := re.FindIndex(log[from:]); loc != nil {
			s.At = from + loc[1]
			return string(log[from : from+loc[0]]), string(log[from+loc[0] : from+loc[1]])
		}
		if time.Now().After(deadline) {
			s.TB.Fatalf("the serial console did not show %q within %s; after the last match it printed:\n%s",
				re, limit, Tail(log[from:], 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Since returns what the console printed from offset from up to the
// current position.
func (s *Serial) Since(from int) string {
	log := s.VM.Log()
	end := min(s.At, len(log))
	return string(log[min(from, end):end])
}

// TypeLine types line and Enter (CR, as a terminal sends it).
func (s *Serial) TypeLine(line string) {
	s.TB.Helper()
	time.Sleep(typePause)
	if err := s.VM.Type(line + "\r"); err != nil {
		s.TB.Fatalf("type %q on the serial console: %v", line, err)
	}
}

// Login goes from the login prompt (or, with firstBoot, from the first-boot
// password questions) to the CLI prompt.
func (s *Serial) Login(password string, firstBoot bool) {
	s.TB.Helper()
	if firstBoot {
		s.Expect(4*time.Minute, "New admin password: ")
		s.TypeLine(password)
		s.Expect(time.Minute, "Repeat password: ")
		s.TypeLine(password)
	}
	s.Expect(4*time.Minute, "login: ")
	s.TypeLine("admin")
	s.Expect(time.Minute, "Password: ")
	s.TypeLine(password)
	s.ExpectRegexp(time.Minute, CLIPrompt)
}

// CLI runs one CLI command and returns what it printed (with its echo),
// paging through output longer than a screen with Space.
func (s *Serial) CLI(cmd string) string {
	s.TB.Helper()
	s.TypeLine(cmd)
	var out strings.Builder
	for range 100 {
		before, match := s.ExpectMatch(time.Minute, cliPromptOrMore)
		out.WriteString(before)
		if !strings.HasPrefix(match, "--More--") {
			return out.String()
		}
		out.WriteString("\n")
		if err := s.VM.Type(" "); err != nil {
			s.TB.Fatalf("page on with Space: %v", err)
		}
	}
	s.TB.Fatalf("%q printed more than 100 screens", cmd)
	return ""
}

// Shell runs one command in the expert shell and returns what it printed,
// with the command's echo and without the next prompt.
func (s *Serial) Shell(cmd string) string {
	s.TB.Helper()
	s.TypeLine(cmd)
	_, out := s.ExpectAny(time.Minute, ShellPrompt)
	return strings.TrimSuffix(out, ShellPrompt)
}

// EnterShell goes from the CLI prompt to the expert shell's prompt.
func (s *Serial) EnterShell() {
	s.TB.Helper()
	s.TypeLine("shell")
	s.Expect(time.Minute, "Expert shell (")
	s.Expect(time.Minute, ShellPrompt)
}

// LeaveShell goes back from the expert shell to the CLI prompt.
func (s *Serial) LeaveShell() {
	s.TB.Helper()
	s.TypeLine("exit")
	s.ExpectRegexp(time.Minute, CLIPrompt)
}

// Tail is the last n bytes of b, for a failure's message.
func Tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
