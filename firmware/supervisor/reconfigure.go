package supervisor

import (
	"slices"
)

// RestartWithArgs replaces a service's arguments and restarts it with
// them, for settings that reach a service only on its command line (the
// console getty's baud rate). The table is otherwise fixed: the path,
// environment and dependencies stay as declared.
//
// Arguments equal to the current ones change nothing and restart
// nothing. A service stopped on request stays stopped and gets the new
// arguments when it is started again; one still waiting for its
// dependencies starts with them.
func (s *Supervisor) RestartWithArgs(name string, args []string) error {
	s.mu.Lock()
	p, err := s.lookupLocked(name)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if slices.Equal(p.spec.Args, args) {
		s.mu.Unlock()
		return nil
	}
	// The table given to New may be shared with the caller: never write
	// through its slice.
	p.spec.Args = slices.Clone(args)
	restart := !p.stopRequested && p.state != StateWaiting
	s.mu.Unlock()
	s.logf("%s: arguments now %q", name, args)
	if !restart {
		return nil
	}
	return s.Restart(name)
}
