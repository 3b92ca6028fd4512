package cli

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/console"
)

// CheckPassword says what is wrong with a new password, in words for the
// console, or returns nil. The getty's rules are the CLI's.
func CheckPassword(pass []byte) error { return console.CheckPassword(pass) }

// One password length limit everywhere: this fails to build when the
// console's and the configuration's differ.
var _ = [1]struct{}{}[console.MaxPasswordLen-config.MaxPasswordLen]
var _ = [1]struct{}{}[console.MinPasswordLen-config.MinPasswordLen]

// Accounts are the admin accounts of the config store (config.Admin in
// system.admins), the same ones the web UI uses, read and changed through
// configd. It has the method set of firmware/console's Accounts interface.
// A password set here is committed, so it is on the card and survives a
// reboot.
type Accounts struct {
	c *configdapi.Client
	// Wait is how long HasAdmin waits for configd to answer (the console
	// may start before it); default 15s.
	Wait time.Duration

	once  sync.Once
	dummy config.Admin // compared against for unknown users, for equal timing
}

// NewAccounts returns the accounts served by configd on socket.
func NewAccounts(socket string) *Accounts {
	return &Accounts{c: configdapi.New(socket), Wait: 15 * time.Second}
}

// running fetches the running configuration, waiting for up to wait for
// configd (configdapi.WaitRunning). At boot the console asks before
// configd serves, and the login prompt waits for the answer.
func (a *Accounts) running(wait time.Duration) (*config.Config, error) {
	c, _, err := configdapi.WaitRunning(context.Background(), a.c, wait)
	if err != nil {
		return nil, fmt.Errorf("accounts: %w", err)
	}
	return c, nil
}

// HasAdmin reports whether some admin account has a password. When
// configd cannot be reached it says yes: the console must not offer to
// set a first password on a box that may well have one.
func (a *Accounts) HasAdmin() bool {
	c, err := a.running(a.Wait)
	if err != nil {
		return true
	}
	for _, ad := range c.System.Admins {
		if ad.PasswordHash.IsSet() {
			return true
		}
	}
	return false
}

// Verify reports whether pass is user's password. An unknown user, a user
// without a password and an unreachable configd still cost one hash
// comparison, so the time taken does not tell which it was.
func (a *Accounts) Verify(user string, pass []byte) bool {
	ad := a.dummyAdmin()
	known := false
	if c, err := a.running(0); err == nil {
		if found := c.Admin(user); found != nil && found.PasswordHash.IsSet() {
			ad, known = found, true
		}
	}
	ok := ad.VerifyPassword(string(pass))
	return subtle.ConstantTimeByteEq(b2u(ok), 1)&subtle.ConstantTimeByteEq(b2u(known), 1) == 1
}

// IsUser reports whether user is an admin of the running configuration
// (false when configd does not answer: the name is then not logged).
func (a *Accounts) IsUser(user string) bool {
	c, err := a.running(0)
	return err == nil && c.Admin(user) != nil
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func (a *Accounts) dummyAdmin() *config.Admin {
	a.once.Do(func() {
		random := make([]byte, 24)
		rand.Read(random)
		a.dummy.SetPassword(fmt.Sprintf("%x", random))
		clear(random)
	})
	return &a.dummy
}

// ErrUncommitted refuses a password change while the candidate holds
// someone's unfinished edits: committing the password would commit them
// too.
var ErrUncommitted = errors.New("the candidate configuration has uncommitted changes; commit or discard them first (show diff lists them)")

// SetPassword sets user's password (creating the account) and commits it
// so that it is on the card. It refuses when the candidate has other
// uncommitted changes, and when someone edits the candidate in between.
func (a *Accounts) SetPassword(user string, pass []byte) error {
	if err := CheckPassword(pass); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cand, err := a.c.Candidate(ctx)
	if err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	if cand.Changed {
		return ErrUncommitted
	}
	return setPasswordAndCommit(ctx, a.c, cand.Etag, user, pass, user+"@console", "password of "+user+" set on the console")
}

// setPasswordAndCommit sets user's password in the candidate read with
// etag and commits it, refusing if the candidate changed in between.
func setPasswordAndCommit(ctx context.Context, c *configdapi.Client, etag, user string, pass []byte, who, message string) error {
	etag, err := c.SetPassword(ctx, etag, user, string(pass))
	if err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	if _, err := c.Commit(ctx, configdapi.CommitRequest{Etag: etag, Who: who, Message: message}); err != nil {
		return fmt.Errorf("set password: commit: %w", err)
	}
	return nil
}
