package console

import (
	"context"
	"os"
)

// Hooks connect the getty to the rest of the firmware without this package
// importing it (the CLI imports the services' clients; the getty must stay
// small and start even when they are broken). The multi-call binary sets
// them once, before Main runs.
type Hooks struct {
	// Accounts returns the admin accounts to log in with (the config
	// store's, through configd). Nil: accounts in RAM only.
	Accounts func() Accounts
	// Session runs after a login on the terminal (the CLI) and returns at
	// logout. Shell starts the expert shell from inside it. Nil: the
	// expert shell directly.
	Session func(ctx context.Context, tty *os.File, user, board string, shell func(ctx context.Context) error) error
	// Recover runs when "recover" is typed at the login prompt: physical
	// access to the console is what authorizes it. Nil: no recovery.
	Recover func(ctx context.Context, tty *os.File, board string) error
	// Notices returns lines the banner must show, such as a configuration
	// that could not be read and was replaced by the defaults. Nil: none.
	Notices func(ctx context.Context) []string
}

var hooks Hooks

// SetHooks installs the hooks; call it before Main.
func SetHooks(h Hooks) { hooks = h }

// RecoverUser is the name typed at the login prompt for console recovery.
const RecoverUser = "recover"
