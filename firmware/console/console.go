// Package console is the serial console getty: it takes the board's
// console line at its baud, makes the admin set a password on first boot
// (there is no default password), shows a banner and a login prompt, and
// after a login runs the expert shell until the CLI exists. It runs as a
// supervised service: `flashgate console -device ttyS0 -baud 115200`.
package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/internal/gomem"
	"github.com/flashgate/flashgate/internal/paths"
)

// Shells are tried in order after a login: u-root's gosh (the image
// ships it), then whatever sh a development system has.
var defaultShells = []string{"/bbin/gosh", "/bbin/elvish", "/bin/sh"}

// maxFailures is how many wrong passwords a getty takes before it exits;
// the supervisor restarts it, with backoff, which slows guessing further.
const maxFailures = 3

// Main is `flashgate console`.
func Main(args []string) int {
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	device := fs.String("device", "ttyS0", "console device, under /dev unless absolute")
	baud := fs.Int("baud", 115200, "line speed")
	board := fs.String("board", "", "board name for the banner")
	version := fs.String("version", "", "firmware version for the banner")
	accountsDir := fs.String("accounts", paths.ConsoleAccountsDir, "where the admin password hash is kept (RAM)")
	shells := fs.String("shell", strings.Join(defaultShells, ","), "shells to try after login, comma-separated")
	failDelay := fs.Duration("fail-delay", 3*time.Second, "pause after a wrong password")
	cost := fs.Int("bcrypt-cost", 0, "bcrypt cost for new passwords (0: default)")
	fingerprint := fs.String("fingerprint", WebUIFingerprintFile, "where the web UI writes its certificate fingerprint, for the banner")
	if fs.Parse(args) != nil {
		return 2
	}
	// Messages for the log ring go to the supervisor's pipe, which is
	// stderr until the terminal takes fds 0-2.
	logger := log.New(os.Stderr, "", 0)
	note, _ := gomem.Follow(0)
	logger.Printf("console: garbage collector: %s", note)
	gomem.ReportOnSignal(func(f string, a ...any) { logger.Printf("console: "+f, a...) })
	path := *device
	if !filepath.IsAbs(path) {
		path = "/dev/" + path
	}
	tty, err := takeTTY(path, *baud)
	if err != nil {
		logger.Printf("console %s: %v", path, err)
		return 1
	}
	logOut, err := unix.Dup(2)
	if err == nil {
		logger.SetOutput(os.NewFile(uintptr(logOut), "log"))
	}
	for i := 0; i < 3; i++ {
		unix.Dup2(int(tty.Fd()), i)
	}
	logger.Printf("console on %s at %d baud", path, *baud)

	var acc Accounts
	persistent := hooks.Accounts != nil
	if persistent {
		acc = hooks.Accounts()
	} else {
		acc = NewRAMAccounts(*accountsDir, *cost)
		logger.Printf("accounts: the admin password hash is kept in %s (RAM) and is lost at reboot", *accountsDir)
	}
	s := &session{
		persistent: persistent,
		tty:        tty,
		accounts:   acc,
		board:      *board,
		version:    *version,
		shells:     strings.Split(*shells, ","),
		failDelay:  *failDelay,
		logf:       logger.Printf,
		banner: func() string {
			return banner(*board, *version, addresses(), *fingerprint)
		},
		// The supervisor holds the web UI, the network and the tunnels
		// back until the admin has a prompt (firmware/pid1/services.go).
		prompted: func() {
			if err := supervisor.NotifyReady(); err != nil {
				logger.Printf("console: %v", err)
			}
		},
	}
	// A ^C at the prompt must not kill the getty, and the shell must get
	// ^C with its default action: a handler (not SIG_IGN, which exec
	// would pass on) does both.
	signal.Notify(make(chan os.Signal, 1), unix.SIGINT, unix.SIGQUIT, unix.SIGTSTP)
	err = s.run()
	if errors.Is(err, io.EOF) {
		return 0 // hang-up or ^D: the supervisor starts a fresh getty
	}
	if err != nil {
		logger.Printf("console: %v", err)
		return 1
	}
	return 0
}

// takeTTY opens the console line, makes it our controlling terminal and
// sets its speed and modes.
func takeTTY(path string, baud int) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	tty := os.NewFile(uintptr(fd), path)
	// The supervisor starts services as session leaders; run by hand we
	// make our own session.
	if _, err := unix.Setsid(); err != nil && !errors.Is(err, unix.EPERM) {
		tty.Close()
		return nil, fmt.Errorf("setsid: %w", err)
	}
	// 1: take the line even if another session (an old getty's shell)
	// still has it; we are root.
	if err := unix.IoctlSetInt(fd, unix.TIOCSCTTY, 1); err != nil {
		tty.Close()
		return nil, fmt.Errorf("make controlling terminal: %w", err)
	}
	if err := configureTTY(fd, baud); err != nil {
		tty.Close()
		return nil, err
	}
	unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, unix.Getpgrp())
	return tty, nil
}

// session is the dialogue on one terminal.
type session struct {
	persistent bool // accounts are stored on the card
	tty        *os.File
	accounts   Accounts
	board      string
	version    string
	shells     []string
	failDelay  time.Duration
	logf       func(string, ...any)
	banner     func() string // what to show above the login prompt, as of now
	// prompted is called once, when the first prompt (login, or a
	// first boot's password) is on the line; nil: nothing to tell.
	prompted     func()
	promptedOnce sync.Once
}

// promptShown calls prompted the first time a prompt waits for input.
func (s *session) promptShown() {
	if s.prompted != nil {
		s.promptedOnce.Do(s.prompted)
	}
}

// run loops: first-boot password, banner, login, shell, until maxFailures
// wrong passwords or end of input.
func (s *session) run() error {
	failures := 0
	for {
		if !s.accounts.HasAdmin() {
			if err := s.firstBoot(); err != nil {
				return err
			}
		}
		shown := s.banner()
		s.printf("\n%s\n", shown)
		if hooks.Notices != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			for _, n := range hooks.Notices(ctx) {
				s.printf("  ! %s\n", n)
			}
			cancel()
		}
		user, err := s.readLogin(shown)
		if err != nil {
			return err
		}
		if user == "" {
			continue
		}
		if user == RecoverUser && hooks.Recover != nil {
			s.logf("console: recovery started at the console")
			if err := hooks.Recover(context.Background(), s.tty, s.board); err != nil {
				s.logf("console: recovery: %v", err)
				s.printf("Recovery: %v\n", err)
			}
			continue
		}
		pass, err := s.readPassword("Password: ")
		if err != nil {
			return err
		}
		ok := s.accounts.Verify(user, pass)
		clear(pass)
		if !ok {
			failures++
			s.logf("console: failed login for %s (%d of %d)", loggedName(s.accounts, user), failures, maxFailures)
			time.Sleep(s.failDelay)
			s.printf("Login incorrect\n")
			if failures >= maxFailures {
				return fmt.Errorf("%d failed logins; the supervisor restarts the console", failures)
			}
			continue
		}
		failures = 0
		s.logf("console: %s logged in", sanitize(user))
		s.shell(user)
		s.logf("console: %s logged out", sanitize(user))
	}
}

// firstBoot asks for the admin password until one is stored. If it cannot
// be stored (a full /run) it says so and goes on to the login prompt, where
// no login can succeed, rather than hide the console.
func (s *session) firstBoot() error {
	s.printf("\nNo admin password is set.\n")
	for {
		pass, err := s.readPassword("New admin password: ")
		if err != nil {
			return err
		}
		if err := CheckPassword(pass); err != nil {
			clear(pass)
			s.printf("That password is %v.\n", err)
			continue
		}
		again, err := s.readPassword("Repeat password: ")
		if err != nil {
			clear(pass)
			return err
		}
		same := string(pass) == string(again)
		clear(again)
		if !same {
			clear(pass)
			s.printf("The passwords do not match.\n")
			continue
		}
		err = s.accounts.SetPassword(AdminUser, pass)
		clear(pass)
		if err != nil {
			s.printf("Could not store the password: %v\n", err)
			s.logf("console: could not store the admin password: %v", err)
			return nil
		}
		if s.persistent {
			s.printf("Admin password set and saved on the card. Log in as %s, here or in the web UI.\n", AdminUser)
			s.logf("console: admin password set")
			return nil
		}
		s.printf("Admin password set. It is kept in RAM only, so you will be asked again after a reboot.\n")
		s.logf("console: admin password set (RAM only)")
		return nil
	}
}

// shell runs the session after a login: the CLI when the firmware has
// one, else the expert shell.
func (s *session) shell(user string) {
	if hooks.Session != nil {
		expert := func(ctx context.Context) error {
			s.expertShell(user)
			return nil
		}
		if err := hooks.Session(context.Background(), s.tty, user, s.board, expert); err != nil {
			s.logf("console: session of %s: %v", user, err)
		}
		return
	}
	s.expertShell(user)
}

// expertShell runs the first shell that exists with the terminal, and waits.
func (s *session) expertShell(user string) {
	for _, sh := range s.shells {
		if _, err := os.Stat(sh); err != nil {
			continue
		}
		s.printf("Expert shell (%s). `exit` leaves it; `flashgate status` shows the services.\n", sh)
		cmd := exec.Command(sh)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = s.tty, s.tty, s.tty
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/bbin:/bin:/sbin:/usr/bin:/usr/sbin", "HOME=/", "TERM=vt100", "USER=" + user, "LOGNAME=" + user}
		if err := cmd.Run(); err != nil {
			s.logf("console: shell %s: %v", sh, err)
		}
		return
	}
	s.printf("No shell in this image (looked for %s).\n", strings.Join(s.shells, ", "))
}

func (s *session) printf(format string, args ...any) {
	fmt.Fprintf(s.tty, format, args...)
}

// bannerWatch is how long the login prompt keeps its banner up to date.
// At boot the prompt comes before netd has the NICs up and before the web
// UI serves, so the first banner lacks the addresses and the certificate
// fingerprint the admin needs; they follow within seconds.
const bannerWatch = 2 * time.Minute

// readLogin prints the login prompt and reads the user name. Until a line
// has been typed, and for bannerWatch at most, it checks the banner and
// the host name (hostd sets the configured one while the box boots) every
// second and shows both again when either changed. The terminal is in
// canonical mode, so poll reports input only once a whole line is there;
// text typed meanwhile stays in the kernel's line buffer and still ends
// up in the name.
func (s *session) readLogin(shown string) (string, error) {
	prompt := hostname() + " login: "
	s.printf("%s", prompt)
	s.promptShown()
	fd := int(s.tty.Fd())
	for end := time.Now().Add(bannerWatch); time.Now().Before(end); {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 1000)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n > 0 {
			break // a line, a hangup or an error: readLine sees which
		}
		if now, p := s.banner(), hostname()+" login: "; now != shown || p != prompt {
			shown, prompt = now, p
			s.printf("\n\n%s\n%s", shown, prompt)
		}
	}
	return s.readLine("")
}

// readLine prints prompt and reads one line in cooked mode, byte by byte so
// that nothing typed ahead (a password) is consumed with it.
func (s *session) readLine(prompt string) (string, error) {
	s.printf("%s", prompt)
	var line []byte
	b := make([]byte, 1)
	for len(line) < 256 {
		n, err := s.tty.Read(b)
		if n == 0 || err != nil {
			if err == nil {
				err = io.EOF
			}
			return "", err
		}
		if b[0] == '\n' {
			break
		}
		line = append(line, b[0])
	}
	return strings.TrimSpace(string(line)), nil
}

// readPassword reads a line with echo off. Echo goes off before the
// prompt is printed, so a password typed ahead of the prompt is not shown.
func (s *session) readPassword(prompt string) ([]byte, error) {
	fd := int(s.tty.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("read password: %w", err)
	}
	quiet := *old
	quiet.Lflag = quiet.Lflag&^unix.ECHO | unix.ICANON | unix.ISIG
	quiet.Iflag |= unix.ICRNL
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		return nil, fmt.Errorf("read password: %w", err)
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, old)
	s.printf("%s", prompt)
	s.promptShown()
	defer s.printf("\n")                      // the user's newline was not echoed
	pass := make([]byte, 0, MaxPasswordLen+1) // no reallocation leaves copies behind
	b := make([]byte, 1)
	for {
		n, err := s.tty.Read(b)
		if n == 0 || err != nil {
			clear(pass)
			if err == nil {
				err = io.EOF
			}
			return nil, err
		}
		if b[0] == '\n' {
			return pass, nil
		}
		if len(pass) <= MaxPasswordLen { // longer is refused by CheckPassword anyway
			pass = append(pass, b[0])
		}
	}
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "flashgate"
	}
	return h
}

// sanitize makes a user name safe for a log line.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}
