package cli_test

import (
	"github.com/flashgate/flashgate/firmware/cli"
	"github.com/flashgate/flashgate/firmware/console"
)

// The getty takes the config store's accounts through its interface.
var _ console.Accounts = (*cli.Accounts)(nil)
