package configd

import (
	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/config"
)

// defaultsFor returns the store's Defaults for the board PID 1 names. A
// missing or unknown name (a host run, a board the probe could not tell)
// falls back to eth0/eth1, saying so once: those may not be the box's
// ports, and whoever reads the log should know why the defaults look
// generic.
func defaultsFor(board string, logf func(string, ...any)) func() *config.Config {
	if board == "" {
		logf("configd: no -board given: defaults use eth0 (wan) and eth1 (lan)")
		return config.Default
	}
	b, err := boards.Lookup(board)
	if err != nil {
		logf("configd: %v: defaults use eth0 (wan) and eth1 (lan)", err)
		return config.Default
	}
	if len(b.NICs) == 0 {
		logf("configd: board %s lists no ports: defaults use eth0 (wan) and eth1 (lan)", b.Name)
		return config.Default
	}
	return func() *config.Config { return config.BoardDefaults(b) }
}
