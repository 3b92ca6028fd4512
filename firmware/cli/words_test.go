package cli

import (
	"slices"
	"testing"
)

func TestSplitWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"", nil, false},
		{"   \t ", nil, false},
		{"show  status", []string{"show", "status"}, false},
		{"\tset a.b  1 2\t", []string{"set", "a.b", "1", "2"}, false},
		{`commit "two words"`, []string{"commit", "two words"}, false},
		{`set x ""`, []string{"set", "x", ""}, false},
		{`set x "tab\there" y`, []string{"set", "x", "tab\there", "y"}, false},
		{`set x "open`, nil, true},
		{`set x "a"b`, nil, true},
		{`set x a"b`, nil, true},
		{`set x "bad\q"`, nil, true},
	} {
		got, err := splitWords(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// FuzzSplitWords checks that splitting never panics and that words quoted
// with quoteWord split back to themselves.
func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{"show status", `commit "a b"`, `"`, `"\x00"`, "a\tb", `"\u00e4" x`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words, err := splitWords(line)
		if err != nil {
			return
		}
		var quoted string
		for i, w := range words {
			if i > 0 {
				quoted += " "
			}
			quoted += quoteWord(w)
		}
		again, err := splitWords(quoted)
		if err != nil || !slices.Equal(again, words) {
			t.Fatalf("%q split to %q, quoted back to %q, which splits to %q (%v)", line, words, quoted, again, err)
		}
	})
}
