package main

import (
	"context"
	"fmt"
	"os"

	"github.com/flashgate/flashgate/firmware/cli"
	"github.com/flashgate/flashgate/firmware/console"
	"github.com/flashgate/flashgate/services/configd/configdapi"
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
		Notices: func(ctx context.Context) []string {
			return configNotices(ctx, configdapi.New(cli.DefaultConfigdSocket))
		},
	})
}

// configNotices tells the admin at the console when the box does not run
// the configuration on its card: a database that could not be read (set
// aside, defaults in use) or no config partition at all.
func configNotices(ctx context.Context, c *configdapi.Client) []string {
	st, err := c.Status(ctx)
	if err != nil {
		return []string{fmt.Sprintf("configd does not answer (%v): the configuration cannot be read or changed.", err)}
	}
	var out []string
	if st.Recovered != "" {
		out = append(out, "The configuration on the card could not be read and was set aside; the box runs with the default configuration. "+st.Recovered)
	}
	if st.Note != "" {
		out = append(out, st.Note)
	}
	return out
}
