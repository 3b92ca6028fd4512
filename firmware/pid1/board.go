package pid1

import (
	"fmt"
	"strings"

	"github.com/flashgate/flashgate/boards"
)

// boardChoice is the board PID 1 runs as and how it came to that.
type boardChoice struct {
	Board boards.Board
	// Marker is the serial-console line after "flashgate init: ", which
	// the boot test asserts: "board qemu", or with the disagreement or
	// the problem in parentheses.
	Marker string
	Known  bool // false: no board identified; running with no modules
}

// chooseBoard decides the board from the kernel command line (written by
// the image builder, which chose the modules in the initramfs) checked
// against the probe. The command line wins when it names a supported board:
// the initramfs holds that board's modules and no other's. A disagreement
// is shown so a card moved to the wrong board is noticed.
func chooseBoard(cmdline string, probe func() (boards.Result, error)) boardChoice {
	res, perr := probe()
	probed := ""
	if perr == nil && res.Board != "" {
		if b, err := boards.Lookup(res.Board); err == nil {
			probed = b.Name
		}
	}
	evidence := strings.Join(res.Evidence, "; ")
	if perr != nil {
		evidence = perr.Error()
	}

	var problem string
	if cmdline == "" {
		problem = "no flashgate.board= on the kernel command line"
	} else if b, err := boards.Lookup(cmdline); err != nil {
		problem = fmt.Sprintf("kernel command line: %v", err)
	} else {
		c := boardChoice{Board: b, Known: true, Marker: "board " + b.Name}
		if probed != "" && probed != b.Name {
			c.Marker = fmt.Sprintf("board %s (probe says %s: %s)", b.Name, probed, evidence)
		}
		return c
	}
	if probed != "" {
		if b, err := boards.Lookup(probed); err == nil {
			return boardChoice{Board: b, Known: true,
				Marker: fmt.Sprintf("board %s (from the probe: %s; %s)", b.Name, evidence, problem)}
		}
	}
	what := "nothing identified the board"
	if perr != nil || res.Board != "" || len(res.Evidence) > 0 {
		what = "probe: " + res.String()
		if perr != nil {
			what = "probe: " + perr.Error()
		}
	}
	return boardChoice{
		Board:  boards.Board{Name: "unknown"},
		Marker: fmt.Sprintf("board unknown (%s; %s); no board modules loaded", problem, what),
	}
}
