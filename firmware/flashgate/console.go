package main

import (
	"context"
	"os"

	"github.com/flashgate/flashgate/firmware/cli"
	"github.com/flashgate/flashgate/firmware/console"
)

// The getty logs in with the config store's accounts (so the password set
// at first boot is on the card and works in the web UI too), runs the CLI
// after a login, and offers console recovery.
func init() {
	console.SetHooks(console.Hooks{
		Accounts: func() console.Accounts { return cli.NewAccounts(cli.DefaultConfigdSocket) },
		Session: func(ctx context.Context, tty *os.File, user, board string, shell func(context.Context) error) error {
			return cli.Run(ctx, tty, cli.Options{User: user, Board: board, Shell: shell})
		},
		Recover: func(ctx context.Context, tty *os.File, board string) error {
			return cli.Recover(ctx, tty, cli.Options{User: "recovery@console", Board: board})
		},
	})
}
