package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd"
)

// Recovery is for an admin who is locked out: the password is lost, or a
// configuration change cut the LAN off. Whoever can type on the serial
// console has the box in hand anyway (they could move the card to another
// machine), so the physical console is the trust anchor: the getty offers
// Recover when `recover` is typed as the user name on the serial console,
// never over the network. Recovery can set a new admin password and put
// the interfaces and the firewall back to the board's defaults (LAN port
// 192.168.1.1/24, the web UI reachable from the LAN), and commits that as
// a revision by recovery@console, so it shows in the history and can be
// rolled back like any other change.

// recoverWord is what the user types to go ahead.
const recoverWord = "recover"

// Recover runs the console recovery dialogue on rw. opts.ConfigdSocket and
// opts.Board are used; the rest is ignored.
func Recover(ctx context.Context, rw io.ReadWriter, opts Options) error {
	s, restore, err := newSession(ctx, rw, opts)
	if err != nil {
		return err
	}
	defer restore()
	s.term.AutoCompleteCallback = nil
	// Recovery is done through configd; say at once if it is not there
	// rather than after every question.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = s.configd.Status(sctx)
	cancel()
	if err != nil {
		return fmt.Errorf("the configuration store is not answering, so nothing can be recovered now (%w); "+
			"`flashgate status` in the expert shell shows whether configd runs", err)
	}
	s.printf("\nConsole recovery. Being at this console is the authority for it; what it changes is\n" +
		"committed as recovery@console and shows in the configuration history.\n\n" +
		"  1  set a new admin password\n" +
		"  2  restore LAN access: interfaces and firewall back to this board's defaults\n" +
		"  3  both\n" +
		"  q  leave recovery\n\n")
	choice, err := s.ask("Choice: ")
	if err != nil {
		return err
	}
	var password, lan bool
	switch choice {
	case "1":
		password = true
	case "2":
		lan = true
	case "3":
		password, lan = true, true
	default:
		s.printf("Nothing changed.\n")
		return nil
	}
	defaults := boardDefaults(s.opts.Board)
	user := "admin"
	var pass []byte
	if password {
		if name, err := s.ask("Account [admin]: "); err != nil {
			return err
		} else if name != "" {
			user = name
		}
		if pass, err = s.newPassword(); err != nil || pass == nil {
			return err
		}
		defer clear(pass)
	}
	if lan {
		s.printf("The interfaces and the firewall will be:\n")
		for _, ifc := range defaults.Interfaces {
			state := "enabled"
			if !ifc.Enabled {
				state = "disabled"
			}
			addr := ifc.Addressing
			if len(ifc.Addresses) > 0 {
				addr = ifc.Addresses[0].String()
			}
			s.printf("  %s %s %s %s\n", ifc.Name, ifc.Role, addr, state)
		}
		s.printf("  no user firewall rules or port forwards; LAN out masqueraded; web UI from the LAN\n")
	}
	if ok, err := s.confirmWord("", recoverWord); err != nil || !ok {
		return err
	}
	ctx, cancelCommit := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelCommit()
	what, err := recoverConfig(ctx, s, defaults, lan, user, pass)
	if err != nil {
		return err
	}
	s.printf("Done: %s (revision committed by recovery@console).\n", what)
	return nil
}

// ask reads one line and trims it.
func (s *session) ask(prompt string) (string, error) {
	line, err := s.readLine(prompt)
	return strings.TrimSpace(line), err
}

// boardDefaults is what a factory reset of the board gives: its own ports,
// as configd's first boot does, or eth0/eth1 for a board it does not know.
func boardDefaults(board string) *config.Config {
	b, err := boards.Lookup(board)
	if err != nil {
		return config.Default()
	}
	return configd.BoardDefaults(b)
}

// recoverConfig makes the changes and commits them. A candidate with
// someone's uncommitted edits is discarded first: the box is being
// rescued, and the edits may be what locked the admin out.
func recoverConfig(ctx context.Context, s *session, defaults *config.Config, lan bool, user string, pass []byte) (string, error) {
	c := s.configd
	cand, err := c.Candidate(ctx)
	if err != nil {
		return "", fmt.Errorf("recovery: configd: %w", err)
	}
	etag := cand.Etag
	if cand.Changed {
		if etag, err = c.Discard(ctx); err != nil {
			return "", fmt.Errorf("recovery: discard the candidate: %w", err)
		}
		s.printf("Uncommitted changes in the candidate were discarded.\n")
	}
	var done []string
	if lan {
		running, _, err := c.Running(ctx)
		if err != nil {
			return "", fmt.Errorf("recovery: %w", err)
		}
		etag, err = c.ReplaceCandidate(ctx, etag, withLANDefaults(running, defaults))
		if err != nil {
			return "", fmt.Errorf("recovery: %w", err)
		}
		done = append(done, "interfaces and firewall restored to the defaults")
	}
	if pass != nil {
		etag, err = c.SetPassword(ctx, etag, user, string(pass))
		if err != nil {
			return "", fmt.Errorf("recovery: %w", err)
		}
		done = append(done, "password of "+user+" set")
	}
	what := strings.Join(done, "; ")
	_, err = c.Commit(ctx, configd.CommitRequest{Etag: etag, Who: "recovery@console", Message: "console recovery: " + what})
	if errors.Is(err, config.ErrNoChanges) {
		return what + " (it already was so)", nil
	}
	if err != nil {
		return "", fmt.Errorf("recovery: commit: %w", err)
	}
	return what, nil
}

// withLANDefaults is running with the interfaces and the firewall of
// defaults. Routes through interfaces that no longer exist are dropped
// (they would not validate); tunnels, accounts and the rest stay.
func withLANDefaults(running, defaults *config.Config) *config.Config {
	c := running.Clone()
	d := defaults.Clone()
	c.Interfaces = d.Interfaces
	c.Firewall = d.Firewall
	var routes []config.Route
	for _, r := range c.Routes {
		if r.Interface == "" || c.Interface(r.Interface) != nil {
			routes = append(routes, r)
		}
	}
	c.Routes = append([]config.Route{}, routes...)
	return c
}
