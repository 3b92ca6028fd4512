package cli

import (
	"fmt"
	"strings"
)

// A dumb terminal has no scrollback: output longer than the screen is
// shown a screenful at a time, like more(1).

const morePrompt = "--More-- (Space: next page, Enter: next line, q: stop)"

// page prints text a screenful at a time, waiting for a key between
// screens. q, ^C or end of input stop it.
func (s *session) page(text string) {
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	screen := max(2, s.opts.Height-1) // the last line is for the prompt
	if len(lines) <= screen {
		s.printf("%s", text)
		return
	}
	next := screen
	s.printf("%s", strings.Join(lines[:next], ""))
	for next < len(lines) {
		step, ok := s.more()
		if !ok {
			return
		}
		end := min(len(lines), next+step)
		if step == 0 {
			end = min(len(lines), next+screen)
		}
		s.printf("%s", strings.Join(lines[next:end], ""))
		next = end
	}
}

// more shows the --More-- prompt and reads a key: it returns how many
// lines to show next (0: a screenful) or false to stop.
func (s *session) more() (int, bool) {
	// The editor is not reading a line, so the prompt goes straight to
	// the terminal and is wiped the same way.
	fmt.Fprint(s.rw, morePrompt)
	defer fmt.Fprintf(s.rw, "\r%s\r", strings.Repeat(" ", len(morePrompt)))
	var key [16]byte
	for {
		n, err := s.in.Read(key[:])
		if err != nil || n == 0 {
			return 0, false
		}
		switch key[0] {
		case ' ':
			return 0, true
		case '\r':
			return 1, true
		case 'q', 'Q', keyCtrlE, keyCtrlU, keyCtrlD: // ^C arrives as ^E ^U
			return 0, false
		}
	}
}
