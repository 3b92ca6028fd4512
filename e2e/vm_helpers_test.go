package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/images"
)

// The shared card image: the tests and the benchmark of this file set boot
// copies of one image built from the working tree, once per test binary.
var shared struct {
	once  sync.Once
	image string
	err   error
}

// cardImage builds the qemu board's image once per process into
// out/test/e2e (make clean removes it) and returns its path; callers boot
// copies of it. It works for tests and benchmarks alike.
func cardImage(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("-short: builds an image and boots it in qemu")
	}
	shared.once.Do(func() {
		wd, _ := os.Getwd()
		root, err := images.FindRepoRoot(wd)
		if err != nil {
			shared.err = err
			return
		}
		board, err := boards.Lookup("qemu")
		if err != nil {
			shared.err = err
			return
		}
		if err := images.CheckBuildTools(); err != nil {
			shared.err = err
			return
		}
		out := filepath.Join(root, "out", "test", "e2e")
		if err := os.MkdirAll(out, 0o755); err != nil {
			shared.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
		defer cancel()
		bl := &images.Builder{RepoRoot: root, OutDir: out, CacheDir: filepath.Join(root, "out", "cache")}
		rep, err := bl.Build(ctx, board, "e2e")
		if err != nil {
			shared.err = err
			return
		}
		shared.image = rep.Image
	})
	if shared.err != nil {
		tb.Fatalf("build the qemu image: %v", shared.err)
	}
	return shared.image
}

// serial follows one VM's serial console from a position on, as an admin at
// a terminal would: wait for text, type a line, read what a command printed.
type serial struct {
	tb testing.TB
	vm *images.VM
	at int // offset in the serial log up to which everything has been read
}

// cliPrompt is the console CLI's prompt, with the countdown it shows while
// a commit waits for confirmation: "admin@flashgate [confirm 5 in 0:58]> ".
var cliPrompt = regexp.MustCompile(`admin@[A-Za-z0-9.-]+(?: \[confirm \d+ in \d+:\d\d\])?> `)

// cliPromptOrMore is the CLI's prompt or its pager's --More-- prompt,
// which long output (longer than the 24-line screen) stops at.
var cliPromptOrMore = regexp.MustCompile(cliPrompt.String() + `|--More-- \([^)]*\)`)

// shellPrompt is the expert shell's (u-root gosh) prompt.
const shellPrompt = "$ "

// expect waits up to limit for the first of markers to appear after the
// current position, moves past it and returns its index.
func (s *serial) expect(limit time.Duration, markers ...string) int {
	s.tb.Helper()
	i, _ := s.expectAny(limit, markers...)
	return i
}

// expectAny is expect that also returns what the console printed from the
// old position up to the end of the marker.
func (s *serial) expectAny(limit time.Duration, markers ...string) (int, string) {
	s.tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		log := s.vm.Log()
		from := min(s.at, len(log))
		best, bestAt := -1, -1
		for i, m := range markers {
			if j := bytes.Index(log[from:], []byte(m)); j >= 0 && (bestAt < 0 || j < bestAt) {
				best, bestAt = i, j
			}
		}
		if best >= 0 {
			s.at = from + bestAt + len(markers[best])
			return best, string(log[from:s.at])
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("the serial console did not show any of %q within %s; after the last match it printed:\n%s",
				markers, limit, tail(log[from:], 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// expectRegexp waits for re after the current position and moves past it,
// returning what was printed before the match.
func (s *serial) expectRegexp(limit time.Duration, re *regexp.Regexp) string {
	s.tb.Helper()
	before, _ := s.expectMatch(limit, re)
	return before
}

// expectMatch is expectRegexp that also returns the match.
func (s *serial) expectMatch(limit time.Duration, re *regexp.Regexp) (before, match string) {
	s.tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		log := s.vm.Log()
		from := min(s.at, len(log))
		if loc := re.FindIndex(log[from:]); loc != nil {
			s.at = from + loc[1]
			return string(log[from : from+loc[0]]), string(log[from+loc[0] : from+loc[1]])
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("the serial console did not show %q within %s; after the last match it printed:\n%s",
				re, limit, tail(log[from:], 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// typeLine types s and Enter (CR, as a terminal sends it).
func (s *serial) typeLine(line string) {
	s.tb.Helper()
	// A person waits for the prompt to settle; so does the line editor.
	time.Sleep(150 * time.Millisecond)
	if err := s.vm.Type(line + "\r"); err != nil {
		s.tb.Fatalf("type %q on the serial console: %v", line, err)
	}
}

// login goes from the login prompt (or, with firstBoot, from the first-boot
// password questions) to the CLI prompt.
func (s *serial) login(password string, firstBoot bool) {
	s.tb.Helper()
	if firstBoot {
		s.expect(4*time.Minute, "New admin password: ")
		s.typeLine(password)
		s.expect(time.Minute, "Repeat password: ")
		s.typeLine(password)
	}
	s.expect(4*time.Minute, "login: ")
	s.typeLine("admin")
	s.expect(time.Minute, "Password: ")
	s.typeLine(password)
	s.expectRegexp(time.Minute, cliPrompt)
}

// cli runs one CLI command and returns what it printed (with its echo),
// paging through output longer than a screen with Space.
func (s *serial) cli(cmd string) string {
	s.tb.Helper()
	s.typeLine(cmd)
	var out strings.Builder
	for range 100 {
		before, match := s.expectMatch(time.Minute, cliPromptOrMore)
		out.WriteString(before)
		if !strings.HasPrefix(match, "--More--") {
			return out.String()
		}
		out.WriteString("\n")
		if err := s.vm.Type(" "); err != nil {
			s.tb.Fatalf("page on with Space: %v", err)
		}
	}
	s.tb.Fatalf("%q printed more than 100 screens", cmd)
	return ""
}

// shell runs one command in the expert shell and returns what it printed.
func (s *serial) shell(cmd string) string {
	s.tb.Helper()
	s.typeLine(cmd)
	_, out := s.expectAny(time.Minute, shellPrompt)
	return strings.TrimSuffix(out, shellPrompt)
}

// enterShell goes from the CLI prompt to the expert shell's prompt.
func (s *serial) enterShell() {
	s.tb.Helper()
	s.typeLine("shell")
	s.expect(time.Minute, "Expert shell (")
	s.expect(time.Minute, shellPrompt)
}

// leaveShell goes back from the expert shell to the CLI prompt.
func (s *serial) leaveShell() {
	s.tb.Helper()
	s.typeLine("exit")
	s.expectRegexp(time.Minute, cliPrompt)
}

// since is everything the console printed from offset from on.
func (s *serial) since(from int) string {
	log := s.vm.Log()
	return string(log[min(from, len(log)):])
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// loopbackAPI is an API session through qemu's port forward on the host's
// loopback (QEMUConfig.WebUIPort), for a VM without a lab around it.
func loopbackAPI(port int) *API {
	jar, _ := cookiejar.New(nil)
	tr := &http.Transport{
		// Self-signed and new with every card, as in NewAPI.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		DialContext:     (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
	return &API{base: "https://127.0.0.1:" + strconv.Itoa(port), hc: &http.Client{Jar: jar, Transport: tr, Timeout: 30 * time.Second}}
}

// freeLoopbackPort asks the kernel for a free TCP port on 127.0.0.1.
func freeLoopbackPort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
