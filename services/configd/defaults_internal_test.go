package configd

import (
	"fmt"
	"strings"
	"testing"
)

func TestDefaultsForSaysWhyItFallsBack(t *testing.T) {
	for _, tc := range []struct {
		board    string
		ports    []string
		logLines int
		log      string // a substring of the log line
	}{
		{"alix2d13", []string{"eth0", "eth1", "eth2"}, 0, ""},
		{"APU3", []string{"eth0", "eth1", "eth2"}, 0, ""}, // an alias, any case
		{"unknown", []string{"eth0", "eth1"}, 1, `unknown board "unknown"`},
		{"", []string{"eth0", "eth1"}, 1, "no -board given"},
	} {
		var logged []string
		logf := func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) }
		defaults := defaultsFor(tc.board, logf)
		var got []string
		for _, ifc := range defaults().Interfaces {
			got = append(got, ifc.Name)
		}
		if strings.Join(got, " ") != strings.Join(tc.ports, " ") {
			t.Errorf("board %q: ports %q, want %q", tc.board, got, tc.ports)
		}
		if len(logged) != tc.logLines || (tc.log != "" && !strings.Contains(logged[0], tc.log)) {
			t.Errorf("board %q: logged %q, want %d line(s) containing %q", tc.board, logged, tc.logLines, tc.log)
		}
	}
}
