package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"unicode/utf8"

	"golang.org/x/term"
)

// filterAll runs data through a fresh input filter.
func filterAll(data []byte) []byte {
	in := newInput(context.Background(), nil, -1, 0)
	for _, b := range data {
		in.filter(b)
	}
	return in.out
}

func TestInputFilter(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"CR", "ab\r", "ab\r"},
		{"LF", "ab\n", "ab\r"},
		{"CRLF", "ab\r\ncd\r\n", "ab\rcd\r"},
		{"LFCR is two Enters", "\n\r", "\r\r"},
		{"CRCR", "\r\r", "\r\r"},
		{"^C clears the line", "ab\x03", "ab\x05\x15"},
		{"NUL dropped", "a\x00b", "ab"},
		{"arrows", "\x1b[A\x1b[B", "\x1b[A\x1b[B"},
		{"SS3 arrows", "\x1bOA\x1bOD", "\x1b[A\x1b[D"},
		{"delete key", "\x1b[3~", "\x1b[3~"},
		{"alt-right", "\x1b[1;3C", "\x1b[1;3C"},
		{"lone escape then key", "\x1bx", "x"},
		{"overlong sequence dropped", "\x1b[1;2;3;4;5;6;7;8;9;10xy", "y"},
		{"overlong sequence cut by a key", "\x1b[1;2;3;4;5;6;7;8;9;10 y", " y"},
		{"sequence cut by Enter", "\x1b[12\r", "\r"},
		{"paste marks dropped", "\x1b[200~a\x01\x1b[201~", "a\x01"},
		{"UTF-8 kept", "ä€😀", "ä€😀"},
		{"invalid UTF-8 dropped", "a\xffb\xc3(c\xe2\x82", "ab(c"},
		{"overlong encoding dropped", "\xc0\xafx", "x"},
		{"surrogate dropped", "\xed\xa0\x80y", "y"},
	} {
		if got := string(filterAll([]byte(tc.in))); got != tc.want {
			t.Errorf("%s: filter(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestInputFilterAcrossReads(t *testing.T) {
	// A CRLF or a sequence split between two reads is handled as if whole.
	in := newInput(context.Background(), nil, -1, 0)
	for _, part := range []string{"ls\r", "\nx\x1b[", "Ay\xe2\x82", "\xac"} {
		for _, b := range []byte(part) {
			in.filter(b)
		}
	}
	if got, want := string(in.out), "ls\rx\x1b[Ay€"; got != want {
		t.Errorf("split input filtered to %q, want %q", got, want)
	}
}

// FuzzTerminalInput feeds arbitrary bytes through the filter into the line
// editor: it must end at the end of the input (no spin, no panic), and
// every line it returns must be valid UTF-8 without control characters
// and within the line limit.
func FuzzTerminalInput(f *testing.F) {
	for _, s := range []string{
		"show status\r", "a\r\nb\n\rc\r", "\x1b[A\x1b[B\x1bOC\r", "\x1b[200~paste\x1b[201~\r",
		"\x1b[1;2;3;4;5;6;7;8;9;10;11;12;13;14", "\xff\xfe\xc3\r", "\x03\x04", "\x1b\x1b\x1b[[[~\r",
		string(bytes.Repeat([]byte("x"), 5000)) + "\r",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := newInput(context.Background(), bytes.NewReader(data), -1, 0)
		tm := term.NewTerminal(struct {
			io.Reader
			io.Writer
		}{in, io.Discard}, "> ")
		// Each line needs at least one input byte, so more reads than
		// bytes means the editor is spinning.
		for i := 0; i <= len(data)+1; i++ {
			line, err := tm.ReadLine()
			if err != nil && !errors.Is(err, term.ErrPasteIndicator) {
				return
			}
			if !utf8.ValidString(line) {
				t.Fatalf("line %q is not valid UTF-8", line)
			}
			for _, r := range line {
				if r < ' ' && r != '\t' || r == 0x7f {
					t.Fatalf("line %q has control character %#x", line, r)
				}
			}
			if len([]rune(line)) > maxLine {
				t.Fatalf("line of %d runes, limit %d", len([]rune(line)), maxLine)
			}
		}
		t.Fatalf("the editor returned more lines than the %d input bytes allow", len(data))
	})
}
