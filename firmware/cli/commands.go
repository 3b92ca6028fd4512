package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/supervisor"
)

// command is one top-level word of the CLI.
type command struct {
	name  string
	usage string // the syntax, as help shows it
	help  string // one line
	// interactive commands ask questions, so the line is theirs while
	// they run and ^C does not interrupt them (it clears the answer).
	interactive bool
	run         func(ctx context.Context, s *session, args []string) error
	// complete returns the words that can follow args (the words typed
	// after the command); partial is the word being typed. Nil: none.
	complete func(s *session, args []string, partial string) []string
}

// commands is the table; it is filled in init because help reads it.
var commands []*command

func init() {
	commands = []*command{
		{name: "show", interactive: true, usage: "show WHAT ...", help: "state or configuration (help show)", run: runShow, complete: completeShow},
		{name: "set", interactive: true, usage: "set PATH VALUE...", help: "set a value in the candidate", run: runSet, complete: completeSet},
		{name: "delete", usage: "delete PATH", help: "delete from the candidate", run: runDelete, complete: completeDelete},
		{name: "commit", usage: "commit [confirmed MINUTES] [MESSAGE]", help: "apply; confirmed: undone unless confirmed", run: runCommit, complete: completeCommit},
		{name: "confirm", usage: "confirm", help: "keep a commit confirmed", run: runConfirm},
		{name: "rollback", usage: "rollback REVISION", help: "run an earlier revision (show history)", run: runRollback, complete: completeRollback},
		{name: "import", interactive: true, usage: "import [FILE]", help: "tunnels from an isakmpd.conf, swanctl.conf or ipsec.conf (pasted, or a file)", run: runImport},
		{name: "cert", usage: "cert [list] | ca NAME CN [KEY] | issue CA NAME CN [ID...] | issue-peer CA NAME CN FILE [ID...] | revoke NAME | import NAME FILE [PASS] | export NAME[.crl] FILE",
			help: "the certificate store: CAs, this box's and peers' certificates (docs/certificates.md)", run: runCert},
		{name: "discard", usage: "discard", help: "drop the candidate's changes", run: runDiscard},
		{name: "ping", usage: "ping HOST [COUNT]", help: "ICMP echo, at most 20 (^C stops)", run: runPing},
		{name: "ipsec", usage: "ipsec up|down TUNNEL", help: "bring a tunnel up now, or tear it down", run: runIPsec, complete: completeIPsec},
		{name: "restart", usage: "restart SERVICE", help: "restart a service", run: runRestart, complete: completeService},
		{name: "upgrade", interactive: true, usage: "upgrade [URL [confirm-downgrade]]", help: "the firmware slots; or install a signed .fgup from a web server", run: runUpgrade},
		{name: "boot", interactive: true, usage: "boot other slot", help: "test-boot the other slot's firmware (asks first)", run: runBoot},
		{name: "reboot", interactive: true, usage: "reboot", help: "reboot the box (asks first)", run: runPower("reboot")},
		{name: "poweroff", interactive: true, usage: "poweroff", help: "power the box off (asks first)", run: runPower("poweroff")},
		{name: "passwd", interactive: true, usage: "passwd", help: "change your password", run: runPasswd},
		{name: "factory-reset", interactive: true, usage: "factory-reset", help: "erase config and history (asks first)", run: runFactoryReset},
		{name: "shell", interactive: true, usage: "shell", help: "the expert shell (exit comes back)", run: runShell},
		{name: "help", usage: "help [COMMAND]", help: "this list, or one command's syntax", run: runHelp, complete: completeHelp},
		{name: "exit", usage: "exit", help: "log out", run: runExit},
		{name: "logout", usage: "logout", help: "log out", run: runExit},
	}
}

func lookupCommand(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// usageError says how a command is used.
func usageError(c string) error {
	return fmt.Errorf("usage: %s", lookupCommand(c).usage)
}

// apiContext bounds one request to a local service.
func apiContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 30*time.Second)
}

// --- configuration ---

// runSet is interactive because a secret with no value is asked for; the
// request to configd is bounded by apiContext, so ^C is not missed long.
func runSet(ctx context.Context, s *session, args []string) error {
	if len(args) >= 1 && isSecretPath(args[0]) {
		if len(args) == 1 || len(args) == 2 && args[1] == secretMark {
			return s.setSecret(ctx, args[0])
		}
		s.noteInlineSecret(args[0])
	}
	if len(args) < 2 {
		return errors.New("usage: set PATH VALUE... (a list takes several values; Tab completes paths)")
	}
	ctx, cancel := apiContext(ctx)
	defer cancel()
	_, err := s.configd.Set(ctx, "", args[0], args[1:]...)
	return editErr(err)
}

// editErr turns configd's answer to a refused edit (which comes as field
// errors) into one line per field: it is not the whole configuration that
// is invalid, only this edit that could not be made.
func editErr(err error) error {
	var ve config.ValidationErrors
	if !errors.As(err, &ve) {
		return err
	}
	lines := make([]string, len(ve))
	for i, fe := range ve {
		lines[i] = setPath(fe.Path) + ": " + fe.Message
	}
	return errors.New(strings.Join(lines, "\n"))
}

func completeSet(s *session, args []string, partial string) []string {
	c := s.candidate()
	if c == nil {
		return nil
	}
	if len(args) == 0 {
		return completePath(c, partial)
	}
	return completeValue(c, args[0])
}

func runDelete(ctx context.Context, s *session, args []string) error {
	if len(args) != 1 {
		return usageError("delete")
	}
	ctx, cancel := apiContext(ctx)
	defer cancel()
	_, err := s.configd.Delete(ctx, "", args[0])
	return editErr(err)
}

func completeDelete(s *session, args []string, partial string) []string {
	if len(args) > 0 {
		return nil
	}
	if c := s.candidate(); c != nil {
		return completePath(c, partial)
	}
	return nil
}

// parseConfirmWindow reads the MINUTES of commit confirmed: whole minutes
// (1 to 1440), or a duration with a unit ("90s") for tests and the
// impatient.
func parseConfirmWindow(w string) (time.Duration, error) {
	if n, err := strconv.Atoi(w); err == nil {
		if n < 1 || n > 1440 {
			return 0, fmt.Errorf("commit confirmed: %d minutes is not between 1 and 1440", n)
		}
		return time.Duration(n) * time.Minute, nil
	}
	d, err := time.ParseDuration(w)
	if err != nil || d < time.Second || d > config.MaxConfirmWindow {
		return 0, fmt.Errorf("commit confirmed: %q is not a number of minutes (1 to 1440)", clip(w, 20))
	}
	return d, nil
}

func runCommit(ctx context.Context, s *session, args []string) error {
	req := configdapi.CommitRequest{Who: s.who()}
	var window time.Duration
	if len(args) > 0 && args[0] == "confirmed" {
		if len(args) < 2 {
			return errors.New("usage: commit confirmed MINUTES [MESSAGE]")
		}
		d, err := parseConfirmWindow(args[1])
		if err != nil {
			return err
		}
		window = d
		req.ConfirmTimeout = d.String()
		args = args[2:]
	}
	req.Message = strings.Join(args, " ")
	ctx, cancel := apiContext(ctx)
	defer cancel()
	info, err := s.configd.Commit(ctx, req)
	if errors.Is(err, config.ErrNoChanges) {
		s.printf("Nothing to commit: the candidate is the running configuration.\n")
		return nil
	}
	if err != nil {
		return err
	}
	if window > 0 {
		s.printf("Committed revision %d. It is rolled back in %s unless you type confirm.\n", info.Revision, window)
		return nil
	}
	s.printf("Committed revision %d.\n", info.Revision)
	return nil
}

func completeCommit(s *session, args []string, partial string) []string {
	if len(args) == 0 {
		return []string{"confirmed"}
	}
	return nil
}

func runConfirm(ctx context.Context, s *session, args []string) error {
	if len(args) != 0 {
		return usageError("confirm")
	}
	ctx, cancel := apiContext(ctx)
	defer cancel()
	st, _ := s.configd.Status(ctx)
	if err := s.configd.Confirm(ctx); err != nil {
		if errors.Is(err, config.ErrNothingPending) {
			return errors.New("no commit is waiting for confirmation")
		}
		return err
	}
	if st.Pending != nil {
		s.printf("Revision %d confirmed.\n", st.Pending.Revision)
	} else {
		s.printf("Confirmed.\n")
	}
	return nil
}

func runRollback(ctx context.Context, s *session, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: rollback REVISION (show history lists them)")
	}
	rev, err := strconv.ParseUint(args[0], 10, 64)
	if err != nil {
		return fmt.Errorf("rollback: %q is not a revision number (show history lists them)", clip(args[0], 20))
	}
	ctx, cancel := apiContext(ctx)
	defer cancel()
	info, err := s.configd.Rollback(ctx, rev, s.who())
	if errors.Is(err, config.ErrNoRevision) {
		return fmt.Errorf("rollback: there is no revision %d (show history lists them)", rev)
	}
	if err != nil {
		return err
	}
	s.printf("Revision %d is running again, as revision %d.\n", rev, info.Revision)
	return nil
}

func completeRollback(s *session, args []string, partial string) []string {
	if len(args) > 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	h, err := s.configd.History(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range h {
		out = append(out, strconv.FormatUint(r.Revision, 10))
	}
	return out
}

func runDiscard(ctx context.Context, s *session, args []string) error {
	if len(args) != 0 {
		return usageError("discard")
	}
	ctx, cancel := apiContext(ctx)
	defer cancel()
	if _, err := s.configd.Discard(ctx); err != nil {
		return err
	}
	s.printf("Candidate discarded: it is the running configuration again.\n")
	return nil
}

// --- operations ---

func runIPsec(ctx context.Context, s *session, args []string) error {
	if len(args) != 2 || args[0] != "up" && args[0] != "down" {
		return usageError("ipsec")
	}
	name := args[1]
	if c := s.running(); c != nil && c.Tunnel(name) == nil {
		return fmt.Errorf("no tunnel named %q (tunnels: %s)", clip(name, 40), tunnelNames(c))
	}
	if args[0] == "up" {
		if err := s.iked.Up(ctx, name); err != nil {
			return unreachable("iked", err)
		}
		s.printf("Initiating %s; show tunnel %s says how it goes.\n", name, name)
		return nil
	}
	if err := s.iked.Down(ctx, name); err != nil {
		return unreachable("iked", err)
	}
	s.printf("Tunnel %s torn down.\n", name)
	return nil
}

func tunnelNames(c *config.Config) string {
	if len(c.Tunnels) == 0 {
		return "none configured"
	}
	var names []string
	for _, t := range c.Tunnels {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

func completeIPsec(s *session, args []string, partial string) []string {
	switch len(args) {
	case 0:
		return []string{"up", "down"}
	case 1:
		return configTunnels(s)
	}
	return nil
}

func configTunnels(s *session) []string {
	c := s.running()
	if c == nil {
		return nil
	}
	var out []string
	for _, t := range c.Tunnels {
		out = append(out, t.Name)
	}
	return out
}

func runRestart(ctx context.Context, s *session, args []string) error {
	if len(args) != 1 {
		return usageError("restart")
	}
	ctx, cancel := apiContext(ctx)
	defer cancel()
	if err := s.supervisor.Restart(ctx, args[0]); err != nil {
		return fmt.Errorf("restart %s: %w", clip(args[0], 40), unreachable("the supervisor", err))
	}
	s.printf("%s restarted.\n", args[0])
	return nil
}

func completeService(s *session, args []string, partial string) []string {
	if len(args) > 0 {
		return nil
	}
	return serviceNames(s)
}

func serviceNames(s *session) []string {
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	svcs, err := s.supervisor.Services(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, sv := range svcs {
		out = append(out, sv.Name)
	}
	return out
}

// confirmWord asks the user to type word; anything else cancels. The
// question goes on its own line: a prompt wider than the terminal wraps
// badly in the line editor.
func (s *session) confirmWord(question, word string) (bool, error) {
	if question != "" {
		s.printf("%s\n", question)
	}
	answer, err := s.readLine(fmt.Sprintf("Type %s to go on, anything else cancels: ", word))
	if err != nil {
		return false, err
	}
	if strings.TrimSpace(answer) != word {
		s.printf("Cancelled.\n")
		return false, nil
	}
	return true, nil
}

func runPower(action string) func(ctx context.Context, s *session, args []string) error {
	return func(ctx context.Context, s *session, args []string) error {
		if len(args) != 0 {
			return usageError(action)
		}
		ok, err := s.confirmWord(fmt.Sprintf("This will %s the box.", action), "yes")
		if err != nil || !ok {
			return err
		}
		ctx, cancel := apiContext(ctx)
		defer cancel()
		if s.opts.Power != nil {
			err = s.opts.Power(ctx, action)
		} else {
			err = s.supervisor.Power(ctx, supervisor.PowerAction(action))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", action, err)
		}
		s.printf("%s: the services are stopping.\n", action)
		s.done = true
		return nil
	}
}

func runPasswd(ctx context.Context, s *session, args []string) error {
	if len(args) != 0 {
		return usageError("passwd")
	}
	acc := NewAccounts(s.opts.ConfigdSocket)
	cur, err := s.readPassword("Current password: ")
	if err != nil {
		return err
	}
	ok := acc.Verify(s.opts.User, []byte(cur))
	if !ok {
		time.Sleep(2 * time.Second) // as slow as a failed login
		return errors.New("that is not your current password; nothing changed")
	}
	pass, err := s.newPassword()
	if err != nil || pass == nil {
		return err
	}
	defer clear(pass)
	if err := acc.SetPassword(s.opts.User, pass); err != nil {
		return err
	}
	s.printf("Password changed and saved.\n")
	return nil
}

// newPassword asks for a new password twice; nil (and no error) when the
// user gave up.
func (s *session) newPassword() ([]byte, error) {
	for range 3 {
		a, err := s.readPassword("New password: ")
		if err != nil {
			return nil, err
		}
		if err := CheckPassword([]byte(a)); err != nil {
			s.printf("That password is %v.\n", err)
			continue
		}
		b, err := s.readPassword("Repeat password: ")
		if err != nil {
			return nil, err
		}
		if a != b {
			s.printf("The passwords do not match.\n")
			continue
		}
		return []byte(a), nil
	}
	s.printf("Nothing changed.\n")
	return nil, nil
}

func runFactoryReset(ctx context.Context, s *session, args []string) error {
	if len(args) != 0 {
		return usageError("factory-reset")
	}
	ok, err := s.confirmWord("This erases the whole configuration, its history and the admin accounts.", "factory-reset")
	if err != nil || !ok {
		return err
	}
	ctx, cancel := apiContext(ctx)
	defer cancel()
	info, err := s.configd.FactoryReset(ctx, s.who())
	if err != nil {
		return err
	}
	s.printf("Factory defaults are running (revision %d). There is no admin account any more:\n"+
		"the console asks for a new admin password now.\n", info.Revision)
	s.done = true
	return nil
}

func runShell(ctx context.Context, s *session, args []string) error {
	if len(args) != 0 {
		return usageError("shell")
	}
	if s.opts.Shell == nil {
		return errors.New("this console has no expert shell")
	}
	// The shell gets the terminal as the getty left it (cooked mode),
	// and nothing of ours reads the line while it runs.
	return s.withCookedTerminal(func() error { return s.opts.Shell(s.ctx) })
}

func runHelp(ctx context.Context, s *session, args []string) error {
	var b strings.Builder
	if len(args) > 0 {
		c := lookupCommand(args[0])
		if c == nil {
			return fmt.Errorf("no command %q", clip(args[0], 40))
		}
		fmt.Fprintf(&b, "%s\n  %s\n", c.usage, c.help)
		if c.name == "show" {
			b.WriteString(showHelp())
		}
		if c.name == "set" || c.name == "delete" {
			b.WriteString("  Paths name fields with dots: system.hostname, tunnels.branch.remote_address,\n" +
				"  firewall.rules.ssh-in.action. A new name creates the element. Tab completes.\n")
		}
		if c.name == "set" {
			b.WriteString("  A secret (tunnels.NAME.psk): set PATH alone asks for it twice, without echo.\n")
		}
		s.printf("%s", b.String())
		return nil
	}
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-36s %s\n", c.usage, c.help)
	}
	b.WriteString("Keys: Tab completes, Up/Down (^P/^N) walk the history, ^C clears the line\n" +
		"or stops a command, ^A/^E start/end of line, ^U/^K erase, ^D logs out.\n")
	s.printf("%s", b.String())
	return nil
}

func completeHelp(s *session, args []string, partial string) []string {
	if len(args) > 0 {
		return nil
	}
	var out []string
	for _, c := range commands {
		out = append(out, c.name)
	}
	return out
}

func runExit(ctx context.Context, s *session, args []string) error {
	s.done = true
	return nil
}
