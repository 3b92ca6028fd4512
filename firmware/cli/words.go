package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// splitWords splits a command line into words at spaces and tabs. A word
// in double quotes may hold spaces and Go escapes ("a b", "tab\there"),
// the same quoting `show config` prints, so a line copied from it can be
// typed back.
func splitWords(line string) ([]string, error) {
	var words []string
	rest := line
	for {
		rest = strings.TrimLeft(rest, " \t")
		if rest == "" {
			return words, nil
		}
		if rest[0] == '"' {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, fmt.Errorf("unfinished or malformed quoted word at %q", clip(rest, 20))
			}
			w, _ := strconv.Unquote(q)
			words = append(words, w)
			rest = rest[len(q):]
			if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
				return nil, fmt.Errorf("a quoted word must be followed by a space, at %q", clip(rest, 20))
			}
			continue
		}
		end := strings.IndexAny(rest, " \t")
		if end < 0 {
			end = len(rest)
		}
		w := rest[:end]
		if strings.Contains(w, `"`) {
			return nil, fmt.Errorf("a quote in the middle of %q: quote the whole word", clip(w, 20))
		}
		words = append(words, w)
		rest = rest[end:]
	}
}

// quoteWord returns w as splitWords reads it back.
func quoteWord(w string) string {
	if w == "" || strings.ContainsAny(w, " \t\"\\") || strings.ContainsFunc(w, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return strconv.Quote(w)
	}
	return w
}

// clip shortens s for an error message, and makes it printable.
func clip(s string, n int) string {
	s = printable(s)
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// printable replaces control characters so that echoing user input back
// cannot drive the terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return '?'
		}
		return r
	}, s)
}
