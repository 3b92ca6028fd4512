package importer

import (
	"net/netip"
	"strings"
	"testing"
)

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// lineOf is the 1-based number of the only line of text starting with
// prefix.
func lineOf(t *testing.T, text, prefix string) int {
	t.Helper()
	found := 0
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			if found != 0 {
				t.Fatalf("%q starts lines %d and %d", prefix, found, i+1)
			}
			found = i + 1
		}
	}
	if found == 0 {
		t.Fatalf("no line starts with %q", prefix)
	}
	return found
}
