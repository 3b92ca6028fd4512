package pid1

import (
	"errors"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/boards"
)

func TestChooseBoard(t *testing.T) {
	qemuProbe := func() (boards.Result, error) {
		return boards.Result{Board: "qemu", Confidence: boards.Certain, Evidence: []string{"DMI sys_vendor=QEMU"}}, nil
	}
	nothing := func() (boards.Result, error) { return boards.Result{}, nil }
	broken := func() (boards.Result, error) { return boards.Result{}, errors.New("probe board: /sys not mounted") }
	for _, tc := range []struct {
		name, cmdline string
		probe         func() (boards.Result, error)
		wantBoard     string
		wantKnown     bool
		wantMarker    string // prefix
	}{
		{"agree", "qemu", qemuProbe, "qemu", true, "board qemu"},
		{"alias on the command line", "qemu-i386", qemuProbe, "qemu", true, "board qemu"},
		{"disagree", "alix2d13", qemuProbe, "alix2d13", true, "board alix2d13 (probe says qemu: DMI sys_vendor=QEMU)"},
		{"probe found nothing", "alix2d13", nothing, "alix2d13", true, "board alix2d13"},
		{"probe failed", "alix2d13", broken, "alix2d13", true, "board alix2d13"},
		{"unknown name, probe knows", "alix9", qemuProbe, "qemu", true, `board qemu (from the probe: DMI sys_vendor=QEMU; kernel command line: unknown board "alix9"`},
		{"no name, nothing probed", "", nothing, "unknown", false, "board unknown (no flashgate.board= on the kernel command line; nothing identified the board)"},
		{"unknown name, probe failed", "zz", broken, "unknown", false, `board unknown (kernel command line: unknown board "zz"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := chooseBoard(tc.cmdline, tc.probe)
			if c.Board.Name != tc.wantBoard || c.Known != tc.wantKnown || !strings.HasPrefix(c.Marker, tc.wantMarker) {
				t.Errorf("chooseBoard(%q) = %s known=%v %q; want %s known=%v, marker starting %q",
					tc.cmdline, c.Board.Name, c.Known, c.Marker, tc.wantBoard, tc.wantKnown, tc.wantMarker)
			}
			if tc.wantMarker == "board "+tc.wantBoard && c.Marker != tc.wantMarker {
				t.Errorf("marker %q, want exactly %q", c.Marker, tc.wantMarker)
			}
		})
	}
}
