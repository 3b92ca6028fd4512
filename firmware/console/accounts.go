package console

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// AdminUser is the one account the appliance has today.
const AdminUser = "admin"

// Password length limits: at least 8 characters; bcrypt uses at most 72
// bytes, and silently ignoring the rest would be worse than refusing.
const (
	MinPasswordLen = 8
	MaxPasswordLen = 72
)

// Accounts is what the console needs from whoever owns the accounts (the
// config store, once configd serves them).
type Accounts interface {
	HasAdmin() bool
	// Verify reports whether pass is user's password. It takes the same
	// time whether or not the user exists.
	Verify(user string, pass []byte) bool
	SetPassword(user string, pass []byte) error
}

// UserNames is what Accounts may also offer: whether a name is an
// account's. The console logs a failed login's user name only when it is
// one: an unknown name may be a password typed at the user prompt, and the
// log goes to the log ring and, in the clear, to remote syslog.
type UserNames interface {
	IsUser(user string) bool
}

// loggedName is user for a log line when accounts knows it, and "an
// unknown user" otherwise (also when accounts cannot tell).
func loggedName(accounts Accounts, user string) string {
	if names, ok := accounts.(UserNames); ok && names.IsUser(user) {
		return fmt.Sprintf("%q", sanitize(user))
	}
	return "an unknown user"
}

// CheckPassword says what is wrong with a new password, in words for the
// console, or returns nil.
func CheckPassword(pass []byte) error {
	switch {
	case len(pass) < MinPasswordLen:
		return fmt.Errorf("too short: at least %d characters", MinPasswordLen)
	case len(pass) > MaxPasswordLen:
		return fmt.Errorf("too long: at most %d bytes", MaxPasswordLen)
	}
	return nil
}

// RAMAccounts keeps the admin password's bcrypt hash in a file under /run,
// which is RAM: the password is LOST AT REBOOT and the console asks for a
// new one. It is the honest stand-in until configd stores accounts on the
// config partition; the console says so when a password is set.
type RAMAccounts struct {
	Dir  string // e.g. /run/flashgate/accounts
	Cost int    // bcrypt cost

	once  sync.Once
	dummy []byte // hash compared against for unknown users, for equal timing
}

// NewRAMAccounts returns the store in dir with bcrypt cost (0: the
// library default, 10).
func NewRAMAccounts(dir string, cost int) *RAMAccounts {
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	return &RAMAccounts{Dir: dir, Cost: cost}
}

func (a *RAMAccounts) file(user string) string { return filepath.Join(a.Dir, user+".bcrypt") }

// HasAdmin reports whether the admin password is set.
func (a *RAMAccounts) HasAdmin() bool {
	_, err := os.Stat(a.file(AdminUser))
	return err == nil
}

// Verify checks user and pass. An unknown user or a missing hash still
// costs one bcrypt comparison, so timing does not say which was wrong.
func (a *RAMAccounts) Verify(user string, pass []byte) bool {
	userOK := subtle.ConstantTimeCompare([]byte(user), []byte(AdminUser)) == 1
	hash, err := os.ReadFile(a.file(AdminUser))
	if err != nil || !userOK {
		hash = a.dummyHash()
	}
	match := bcrypt.CompareHashAndPassword(hash, pass) == nil
	return match && userOK && err == nil
}

// IsUser reports whether user is the admin account.
func (a *RAMAccounts) IsUser(user string) bool { return user == AdminUser }

func (a *RAMAccounts) dummyHash() []byte {
	a.once.Do(func() {
		random := make([]byte, 16)
		rand.Read(random)
		a.dummy, _ = bcrypt.GenerateFromPassword(random, a.Cost)
	})
	return a.dummy
}

// SetPassword stores the hash of pass for user, atomically (write a
// temporary file, then rename), so a full /run leaves the old hash or
// none, never half of one.
func (a *RAMAccounts) SetPassword(user string, pass []byte) error {
	if user != AdminUser {
		return fmt.Errorf("no account %q: only %q exists", user, AdminUser)
	}
	if err := CheckPassword(pass); err != nil {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword(pass, a.Cost)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	if err := os.MkdirAll(a.Dir, 0o700); err != nil {
		return fmt.Errorf("store password: %w", err)
	}
	tmp, err := os.CreateTemp(a.Dir, ".new-")
	if err != nil {
		return fmt.Errorf("store password: %w", err)
	}
	_, werr := tmp.Write(hash)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("store password in %s: %w", a.Dir, err)
	}
	if err := os.Rename(tmp.Name(), a.file(user)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("store password: %w", err)
	}
	return nil
}
