package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/config"
)

// Recovery is for an admin who is locked out: the password is lost, or a
// configuration change cut the LAN off. The getty offers it when `recover`
// is typed as the user name on the serial console, never over the network.
//
// Whoever reaches the serial line (often wired to a console server) is not
// necessarily the owner, so a new password is never given together with
// the old secrets: setting one first erases the admin accounts, the
// tunnels with their pre-shared keys, the configuration history and the
// stored files (the web UI's TLS key), from the card and not only from the
// database (config.Store.EraseSecrets); the interfaces, routes, firewall
// and system settings stay. A full factory reset is offered too, for when
// the rest cannot stand without the tunnels. Putting the interfaces and
// the firewall back to the board's defaults alone reveals nothing and
// keeps everything else. What recovery commits is a revision by
// recovery@console.

// recoverWord is what the user types to go ahead; eraseWord when the
// secrets are erased.
const (
	recoverWord = "recover"
	eraseWord   = "erase"
)

// recoverPlan is what the recovery dialogue settled on.
type recoverPlan struct {
	lan        bool   // interfaces and firewall back to the defaults
	everything bool   // a full factory reset rather than erasing the secrets
	user       string // with pass: the account to create
	pass       []byte // nil: no new password, nothing erased
}

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
	s.printf("\nConsole recovery. What it changes is committed as recovery@console.\n" +
		"A new password is only set together with erasing every secret of the box, so that\n" +
		"nobody at this port gets the old ones with it.\n\n" +
		"  1  erase the secrets and set a new admin password: admin accounts, tunnels and\n" +
		"     their keys, the configuration history and the web UI's TLS key are erased;\n" +
		"     interfaces, routes, firewall and system settings stay\n" +
		"  2  restore LAN access: interfaces and firewall back to this board's defaults\n" +
		"  3  both\n" +
		"  4  factory reset: erase everything, then set a new admin password\n" +
		"  q  leave recovery\n\n")
	choice, err := s.ask("Choice: ")
	if err != nil {
		return err
	}
	var password, lan, everything bool
	switch choice {
	case "1":
		password = true
	case "2":
		lan = true
	case "3":
		password, lan = true, true
	case "4":
		password, everything = true, true
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
	word := recoverWord
	if password {
		word = eraseWord
		if everything {
			s.printf("Everything is erased: the configuration becomes this board's defaults.\n")
		} else {
			s.printf("Erased: every admin account, every tunnel")
			if running, _, err := s.configd.Running(ctx); err == nil && len(running.Tunnels) > 0 {
				var names []string
				for _, t := range running.Tunnels {
					names = append(names, t.Name)
				}
				s.printf(" (%s)", strings.Join(names, ", "))
			}
			s.printf(", the history and the web UI's TLS key.\n")
		}
	}
	if ok, err := s.confirmWord("", word); err != nil || !ok {
		return err
	}
	ctx, cancelCommit := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelCommit()
	what, err := recoverConfig(ctx, s, defaults, recoverPlan{lan: lan, everything: everything, user: user, pass: pass})
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
	return config.BoardDefaults(b)
}

// recoverConfig makes the changes and commits them. A candidate with
// someone's uncommitted edits is discarded first: the box is being
// rescued, and the edits may be what locked the admin out.
func recoverConfig(ctx context.Context, s *session, defaults *config.Config, plan recoverPlan) (string, error) {
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
	if plan.pass != nil {
		// Erase before the new password exists: a failure here leaves
		// the box as it was, never a new password with the old secrets.
		erase, what := c.EraseSecrets, "secrets erased"
		if plan.everything {
			erase, what = c.FactoryReset, "factory reset"
		}
		if _, err := erase(ctx, "recovery@console"); err != nil {
			return "", fmt.Errorf("recovery: nothing changed, the secrets could not be erased (choose 4, factory reset, if the settings cannot stand without the tunnels): %w", err)
		}
		done = append(done, what)
		if cand, err = c.Candidate(ctx); err != nil {
			return "", fmt.Errorf("recovery: configd: %w", err)
		}
		etag = cand.Etag
	}
	lan, user, pass := plan.lan, plan.user, plan.pass
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
	_, err = c.Commit(ctx, configdapi.CommitRequest{Etag: etag, Who: "recovery@console", Message: "console recovery: " + what})
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
