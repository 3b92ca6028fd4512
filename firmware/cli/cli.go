// Package cli is flashgate's console command line: what an admin gets on
// the serial console after logging in. It shows the state of the box
// (services, interfaces, tunnels with the reason they are down, the
// firewall, the DHCP servers' leases, logs, crypto engines, the board), edits
// the configuration through configd (set, delete, commit, commit
// confirmed, rollback; secrets asked for without echo and kept out of the
// history), and runs the few operations a rescue needs (ping, tunnel
// up/down, service restart, reboot, password, factory reset, the expert
// shell).
//
// It is built for a dumb 80x24 terminal on a slow serial line: line
// editing, history and tab completion come from golang.org/x/term and only
// redraw the line being edited; nothing is colored or drawn full screen.
// The package also holds the console's account checks on top of configd
// (Accounts) and the console-only recovery for a locked-out admin
// (Recover). The getty (firmware/console) calls Run after a login.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flashgate/flashgate/services/configd/configdapi"
	"github.com/flashgate/flashgate/services/netd/netdapi"

	"golang.org/x/term"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
)

// Default sockets of the services' local APIs on the appliance.
const (
	DefaultConfigdSocket    = configdapi.Socket
	DefaultSupervisorSocket = supervisor.SocketPath
	DefaultIkedSocket       = ikedapi.DefaultSocket
	DefaultNetdSocket       = netdapi.Socket
)

// DefaultIdleTimeout ends a session nobody typed into for half an hour.
const DefaultIdleTimeout = 30 * time.Minute

// historyLines is how many lines Up-arrow reaches back (term.Terminal's
// own default).
const historyLines = 100

// maxLine is the longest command line kept (term.Terminal's own limit);
// a longer line is refused with a message rather than run cut short.
const maxLine = 4096

// Options are what Run needs to know about the session.
type Options struct {
	User     string // the logged-in admin, recorded as the author of commits
	Hostname string // shown in the prompt; default os.Hostname
	Board    string // board name, for `show board`

	ConfigdSocket    string // default DefaultConfigdSocket
	SupervisorSocket string // default DefaultSupervisorSocket
	IkedSocket       string // default DefaultIkedSocket
	NetdSocket       string // default DefaultNetdSocket

	// Width and Height of the terminal; default 80x24 (a serial line
	// cannot tell).
	Width, Height int

	// IdleTimeout logs the session out after so long without input (a
	// console left logged in is open to whoever walks by); 0 means
	// DefaultIdleTimeout, a negative value never.
	IdleTimeout time.Duration

	// Shell runs the expert shell on the terminal and returns when it
	// exits. The terminal is back in the mode it had before Run while it
	// runs. Nil: `shell` says there is none.
	Shell func(ctx context.Context) error

	// Power reboots or powers off the box ("reboot" or "poweroff"). Nil:
	// ask the supervisor.
	Power func(ctx context.Context, action string) error

	// Root is where /proc and /sys are read for `show crypto`; default "/".
	Root string
}

func (o *Options) defaults() {
	if o.User == "" {
		o.User = "admin"
	}
	if o.Hostname == "" {
		o.Hostname, _ = os.Hostname()
		if o.Hostname == "" {
			o.Hostname = "flashgate"
		}
	}
	if o.ConfigdSocket == "" {
		o.ConfigdSocket = DefaultConfigdSocket
	}
	if o.SupervisorSocket == "" {
		o.SupervisorSocket = DefaultSupervisorSocket
	}
	if o.IkedSocket == "" {
		o.IkedSocket = DefaultIkedSocket
	}
	if o.NetdSocket == "" {
		o.NetdSocket = DefaultNetdSocket
	}
	if o.Width <= 0 {
		o.Width = 80
	}
	if o.Height <= 0 {
		o.Height = 24
	}
	if o.Root == "" {
		o.Root = "/"
	}
	switch {
	case o.IdleTimeout == 0:
		o.IdleTimeout = DefaultIdleTimeout
	case o.IdleTimeout < 0:
		o.IdleTimeout = 0
	}
}

// session is one CLI session on one terminal.
type session struct {
	ctx    context.Context
	opts   Options
	rw     io.ReadWriter
	fd     int         // the terminal's descriptor, -1 if it has none
	cooked *term.State // its mode before Run
	in     *input
	term   *term.Terminal

	configd    *configdapi.Client
	supervisor *supervisor.Client
	iked       *ikedapi.Client
	netd       *netdapi.Client

	tooLong      bool // the line being typed hit maxLine
	done         bool // exit, logout, factory reset
	warnedInline bool // told that a secret typed inline is on the screen
}

// Run runs the CLI for a logged-in user on the terminal rw until the user
// logs out (nil), the input ends (io.EOF), the session is idle for
// opts.IdleTimeout, or ctx ends. If rw is a terminal device, it is put in
// raw mode for the line editor and restored on return.
func Run(ctx context.Context, rw io.ReadWriter, opts Options) error {
	s, restore, err := newSession(ctx, rw, opts)
	if err != nil {
		return err
	}
	defer restore()
	s.printf("flashgate CLI on %s. Type help for the commands, Tab to complete.\n", s.opts.Hostname)
	return s.loop()
}

func newSession(ctx context.Context, rw io.ReadWriter, opts Options) (*session, func(), error) {
	opts.defaults()
	s := &session{
		ctx:        ctx,
		opts:       opts,
		rw:         rw,
		fd:         -1,
		configd:    configdapi.New(opts.ConfigdSocket),
		supervisor: supervisor.NewClient(opts.SupervisorSocket),
		iked:       ikedapi.NewClient(opts.IkedSocket),
		netd:       netdapi.New(opts.NetdSocket),
	}
	restore := func() {}
	if f, ok := rw.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
		s.fd = int(f.Fd())
		old, err := term.MakeRaw(s.fd)
		if err != nil {
			return nil, nil, fmt.Errorf("terminal raw mode: %w", err)
		}
		s.cooked = old
		restore = func() { term.Restore(s.fd, old) }
	}
	s.in = newInput(ctx, rw, s.fd, opts.IdleTimeout)
	s.term = term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{s.in, rw}, "")
	s.term.SetSize(opts.Width, opts.Height)
	s.term.History = newHistory(historyLines)
	s.term.AutoCompleteCallback = s.keypress
	return s, restore, nil
}

// loop reads and runs commands until the session ends.
func (s *session) loop() error {
	for !s.done {
		s.term.SetPrompt(s.prompt())
		s.tooLong = false
		line, err := s.term.ReadLine()
		if err != nil && !errors.Is(err, term.ErrPasteIndicator) {
			if errors.Is(err, errIdle) {
				// Straight to the line: through the editor the prompt would
				// be drawn again after the message.
				fmt.Fprintf(s.rw, "\r\nIdle for %v: logged out.\r\n", s.opts.IdleTimeout)
			}
			return err
		}
		if s.tooLong {
			s.tooLong = false
			s.printf("That line is longer than %d characters; nothing was run.\n", maxLine)
			continue
		}
		s.execute(line)
	}
	return nil
}

// prompt is user@host, with the time left when a commit waits for
// confirmation (so nobody forgets it while the box counts down).
func (s *session) prompt() string {
	p := s.opts.User + "@" + s.opts.Hostname
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	if st, err := s.configd.Status(ctx); err == nil && st.Pending != nil {
		left := time.Until(st.Pending.Deadline).Round(time.Second)
		p += fmt.Sprintf(" [confirm %d in %s]", st.Pending.Revision, clock(left))
	}
	return p + "> "
}

// clock prints d as m:ss.
func clock(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// execute runs one command line, with ^C stopping it.
func (s *session) execute(line string) {
	words, err := splitWords(line)
	if err != nil {
		s.printf("%v\n", err)
		return
	}
	if len(words) == 0 {
		return
	}
	cmd := lookupCommand(words[0])
	if cmd == nil {
		s.printf("Unknown command %q. Type help for the list.\n", clip(words[0], 40))
		return
	}
	ctx := s.ctx
	if !cmd.interactive {
		// Commands that ask questions read the line themselves.
		var stop func()
		ctx, stop = s.in.watchInterrupt(s.ctx)
		defer stop()
	}
	if err := cmd.run(ctx, s, words[1:]); err != nil {
		switch {
		case ctx.Err() != nil && s.ctx.Err() == nil:
			s.printf("Interrupted.\n")
		case errors.Is(err, io.EOF) || errors.Is(err, errTooLong):
			// ^D or an overlong answer to one of the command's
			// questions: nothing was done.
			s.printf("Cancelled.\n")
		default:
			s.printErr(err)
		}
	}
}

func (s *session) printf(format string, args ...any) {
	fmt.Fprintf(s.term, format, args...)
}

// printErr prints an error; configd's validation errors come one per
// line, each with the path of the field in the form `set` takes.
func (s *session) printErr(err error) {
	var ve config.ValidationErrors
	if errors.As(err, &ve) {
		var b strings.Builder
		b.WriteString("The configuration is not valid:\n")
		for _, fe := range ve {
			fmt.Fprintf(&b, "  %s: %s\n", setPath(fe.Path), fe.Message)
		}
		s.printf("%s", b.String())
		return
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil && op.Err != nil {
		// A local service is down: its socket says which.
		s.printf("Error: %s is not answering (%s)\n", op.Addr, op.Err)
		return
	}
	s.printf("Error: %v\n", err)
}

// setPath turns a validation path (tunnels[branch].remote_subnets[0]) into
// the form set and delete take (tunnels.branch.remote_subnets.0).
func setPath(p string) string {
	return strings.NewReplacer("[", ".", "]", "").Replace(p)
}

// keypress is term.Terminal's hook for every key: Tab completes, and a
// key that would make the line longer than maxLine is noted, so that the
// line is refused when Enter comes.
func (s *session) keypress(line string, pos int, key rune) (string, int, bool) {
	if key == '\t' {
		return s.complete(line, pos)
	}
	return s.noteLength(line, pos, key)
}

// noteLength notes a key that would make the line longer than maxLine.
func (s *session) noteLength(line string, pos int, key rune) (string, int, bool) {
	// The editor drops keys once the line has maxLine runes; bytes
	// are never fewer than runes, so most lines skip the count.
	if key >= ' ' && len(line) >= maxLine && utf8.RuneCountInString(line) >= maxLine {
		s.tooLong = true
	}
	return "", 0, false
}

// complete completes the word before the cursor. One candidate replaces
// the word; several are cut to their common prefix, and if that adds
// nothing they are listed below the line.
func (s *session) complete(line string, pos int) (string, int, bool) {
	before, after := line[:pos], line[pos:]
	start := strings.LastIndexAny(before, " \t") + 1
	partial := before[start:]
	done := strings.Fields(before[:start])
	cands := s.candidates(done, partial)
	if len(cands) == 0 {
		return "", 0, false
	}
	word := commonPrefix(cands)
	if len(cands) == 1 && !strings.HasSuffix(word, ".") {
		word += " "
	}
	if word == partial {
		// Paths are listed by their last element: an 80-column line
		// holds more of them, and the rest is on the line already.
		shown := cands
		if i := strings.LastIndexByte(partial, '.'); i >= 0 {
			shown = make([]string, len(cands))
			for j, c := range cands {
				shown[j] = c[i+1:]
			}
		}
		shown = slices.Clone(shown)
		slices.Sort(shown)
		list := columns(shown, s.opts.Width)
		// The editor holds its lock while it handles a key; the list is
		// written when it next waits for input, and the line is redrawn
		// below it.
		go fmt.Fprint(s.term, list)
		return "", 0, false
	}
	newLine := before[:start] + word + after
	return newLine, start + len(word), true
}

// candidates are the words that can follow done and start with partial.
func (s *session) candidates(done []string, partial string) []string {
	var words []string
	if len(done) == 0 {
		for _, c := range commands {
			words = append(words, c.name)
		}
	} else if c := lookupCommand(done[0]); c != nil && c.complete != nil {
		words = c.complete(s, done[1:], partial)
	}
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, partial) {
			out = append(out, w)
		}
	}
	return out
}

// candidate fetches the candidate configuration for completion.
func (s *session) candidate() *config.Config {
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	c, err := s.configd.Candidate(ctx)
	if err != nil || c.Config == nil {
		return nil
	}
	return c.Config
}

// running fetches the running configuration for completion.
func (s *session) running() *config.Config {
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	c, _, err := s.configd.Running(ctx)
	if err != nil {
		return nil
	}
	return c
}

// who is the author recorded with commits from this session.
func (s *session) who() string { return s.opts.User + "@console" }

// errTooLong is an answer longer than maxLine.
var errTooLong = errors.New("answer too long")

// readLine asks a question on the terminal and returns the answer. Tab
// does not complete commands here.
func (s *session) readLine(prompt string) (string, error) {
	s.term.SetPrompt(prompt)
	s.term.AutoCompleteCallback = s.noteLength
	s.tooLong = false
	defer func() {
		s.term.SetPrompt(s.prompt())
		s.term.AutoCompleteCallback = s.keypress
	}()
	line, err := s.term.ReadLine()
	if err == nil && s.tooLong {
		return "", errTooLong
	}
	return line, err
}

// readPassword asks for a secret without echo; it is never added to the
// history.
func (s *session) readPassword(prompt string) (string, error) {
	return s.term.ReadPassword(prompt)
}
