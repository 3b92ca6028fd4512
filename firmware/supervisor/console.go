package supervisor

import (
	"errors"
	"fmt"
	"slices"
)

// ConsoleBauds are the serial line speeds the console getty may be set to:
// the standard rates every 16550-compatible UART on our boards divides to
// exactly.
var ConsoleBauds = []int{1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200}

// ErrNoConsole is returned when the box runs no console getty to re-speed.
var ErrNoConsole = errors.New("this box runs no console getty")

// SetConsoleBaud checks that baud is a standard speed and has the console
// getty restarted at it through the ConsoleBaud hook.
func (s *Supervisor) SetConsoleBaud(baud int) error {
	if !slices.Contains(ConsoleBauds, baud) {
		return fmt.Errorf("console baud %d: want one of %v", baud, ConsoleBauds)
	}
	if s.cfg.ConsoleBaud == nil {
		return fmt.Errorf("console baud %d: %w", baud, ErrNoConsole)
	}
	if err := s.cfg.ConsoleBaud(baud); err != nil {
		return fmt.Errorf("console baud %d: %w", baud, err)
	}
	// Noted, not printed: the console is the line that just changed speed.
	s.Note(fmt.Sprintf("console getty restarted at %d baud", baud))
	return nil
}
