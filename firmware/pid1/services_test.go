package pid1

import (
	"slices"
	"testing"
)

func TestServiceTableGivesConfigdTheBoard(t *testing.T) {
	for _, tc := range []struct {
		board string
		want  []string
	}{
		{"alix2d13", []string{"configd", "-board", "alix2d13"}},
		{"unknown", []string{"configd", "-board", "unknown"}},
		{"", []string{"configd"}},
	} {
		var got []string
		for _, s := range serviceTable("/bbin/flashgate", consoleSpec{Device: "ttyS0", Baud: 38400, Board: tc.board}) {
			if s.Name == "configd" {
				got = s.Args
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("board %q: configd args %q, want %q", tc.board, got, tc.want)
		}
	}
}
