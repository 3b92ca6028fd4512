package pid1

import (
	"errors"

	"github.com/flashgate/flashgate/firmware/supervisor"
)

// consoleBaudHook is the supervisor's ConsoleBaud hook: it restarts the
// console getty at a new speed (hostd asks for the configured one through
// the supervisor API), or nil when the box runs no console getty. sup is
// called for the supervisor, which exists only after its Config does.
//
// The getty is the only thing that changes speed: the kernel's console
// (its messages) and syslinux keep the speed of the image's command line
// until the next image build.
func consoleBaudHook(exe string, c consoleSpec, sup func() *supervisor.Supervisor) func(baud int) error {
	if c.Device == "" {
		return nil
	}
	return func(baud int) error {
		args, err := consoleArgs(exe, c, baud)
		if err != nil {
			return err
		}
		s := sup()
		if s == nil {
			return errors.New("the supervisor is not running yet")
		}
		// Arguments equal to the current ones restart nothing.
		return s.RestartWithArgs("console", args)
	}
}

// consoleArgs is the console getty's command line at a speed: the service
// table's own, so that the two cannot drift apart.
func consoleArgs(exe string, c consoleSpec, baud int) ([]string, error) {
	c.Baud = baud
	for _, svc := range serviceTable(exe, c, webListeners{}) {
		if svc.Name == "console" {
			return svc.Args, nil
		}
	}
	return nil, errors.New("the service table has no console getty")
}
