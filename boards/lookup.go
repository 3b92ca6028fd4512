package boards

import (
	"fmt"
	"slices"
	"strings"
)

// definitions builds every board, in the order boards are listed to users.
// Each is a function so that every call hands out fresh slices: a caller
// that appends to a board's module list changes no other board.
var definitions = []func() Board{
	alix2d13, alix3d,
	net4501, net4801, net5501, net6501,
	epiaC3, epiaC3Ezra, epiaC7,
	apu2,
	genericX8664,
	qemuI386, qemuX8664,
}

// All returns every board flashgate knows, unsupported ones included (their
// Unsupported field says why).
func All() []Board {
	out := make([]Board, 0, len(definitions))
	for _, def := range definitions {
		out = append(out, def())
	}
	return out
}

// UnsupportedError is returned by Lookup for a board flashgate knows but
// cannot run on.
type UnsupportedError struct {
	Board  string
	Reason string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("board %s is not supported: %s", e.Board, e.Reason)
}

// UnknownBoardError is returned by Lookup for a name no board answers to.
type UnknownBoardError struct {
	Name  string
	Valid []string // supported board names
}

func (e *UnknownBoardError) Error() string {
	return fmt.Sprintf("unknown board %q: valid boards are %s", e.Name, strings.Join(e.Valid, ", "))
}

// Lookup finds a board by name or alias, ignoring case. For a known but
// unsupported board it returns the board and an *UnsupportedError, so that
// callers can show what the board is and why it cannot be used; for an
// unknown name it returns an *UnknownBoardError listing the valid names.
func Lookup(name string) (Board, error) {
	want := strings.ToLower(strings.TrimSpace(name))
	var valid []string
	for _, b := range All() {
		if b.Name == want || slices.Contains(b.Aliases, want) {
			if b.Unsupported != "" {
				return b, &UnsupportedError{Board: b.Name, Reason: b.Unsupported}
			}
			return b, nil
		}
		if b.Unsupported == "" {
			valid = append(valid, b.Name)
		}
	}
	return Board{}, &UnknownBoardError{Name: name, Valid: valid}
}
