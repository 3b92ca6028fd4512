package cli

import (
	"fmt"

	"golang.org/x/term"
)

// withCookedTerminal runs fn with the terminal in the mode it had before
// the CLI took it (the getty's cooked mode), for programs that do their
// own terminal handling: the expert shell.
func (s *session) withCookedTerminal(fn func() error) error {
	if s.fd < 0 {
		return fn()
	}
	raw, err := term.GetState(s.fd)
	if err != nil {
		return fmt.Errorf("terminal: %w", err)
	}
	if err := term.Restore(s.fd, s.cooked); err != nil {
		return fmt.Errorf("terminal: %w", err)
	}
	defer term.Restore(s.fd, raw)
	return fn()
}
