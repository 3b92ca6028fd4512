package cli

import (
	"context"
	"crypto/subtle"
	"errors"
	"reflect"
	"slices"
	"strings"

	"github.com/flashgate/flashgate/config"
)

// A secret (a field of type config.Secret: a tunnel's pre-shared key) is
// something that must not stay where the next person at the console can
// read it. The line editor echoes what is typed and keeps every line for
// Up-arrow, so secrets get two things here:
//
//   - `set PATH` on a secret with no value asks for it twice with echo off;
//   - a line that sets a secret inline enters the history with the value
//     replaced by secretMark, and the first such line of a session is
//     followed by a word that the value is on the screen.
//
// The path decides what is secret, from the schema's types, so a secret
// field added to config is covered without a list here to keep in step.

// secretMark stands for the value in the history. Run as a command (the
// recalled line with Enter), it asks for the value as a bare `set PATH`
// does, rather than setting the secret to the mark.
const secretMark = "<secret>"

var secretType = reflect.TypeFor[config.Secret]()

// isSecretPath reports whether path names a secret field. It walks the
// schema (an empty configuration: element names need not exist), so it
// answers without configd.
func isSecretPath(path string) bool {
	segs := strings.Split(path, ".")
	if slices.Contains(segs, "") {
		return false // configd refuses the path
	}
	n, ok := walkPath(&config.Config{}, segs)
	return ok && n.v.Type() == secretType
}

// secretLabel is how the hidden prompt names the secret at path.
func secretLabel(path string) string {
	field := path[strings.LastIndexByte(path, '.')+1:]
	if field == "psk" {
		return "PSK"
	}
	return strings.ReplaceAll(field, "_", " ")
}

// redactLine is line as the history keeps it: a `set` of a secret with a
// value loses the value. A line that does not parse is judged by its
// first two space-separated words, so that an unfinished quote cannot
// carry a secret into the history.
func redactLine(line string) string {
	words, err := splitWords(line)
	if err != nil {
		words = strings.Fields(line)
		if len(words) > 1 {
			words[1] = strings.Trim(words[1], `"`)
		}
	}
	if len(words) < 3 || words[0] != "set" || !isSecretPath(words[1]) {
		return line
	}
	return "set " + quoteWord(words[1]) + " " + secretMark
}

// history is the session's Up-arrow history: term.Terminal's, but with
// secrets taken out of the lines before they are kept.
type history struct {
	lines []string // oldest first
	limit int
}

func newHistory(limit int) *history { return &history{limit: limit} }

// Add keeps line, redacted, as the newest entry. An empty line or a
// repeat of the newest one is not kept: Up should not walk through blanks.
func (h *history) Add(line string) {
	line = redactLine(line)
	if strings.TrimSpace(line) == "" || len(h.lines) > 0 && h.lines[len(h.lines)-1] == line {
		return
	}
	if len(h.lines) == h.limit {
		h.lines = append(h.lines[:0], h.lines[1:]...)
	}
	h.lines = append(h.lines, line)
}

func (h *history) Len() int { return len(h.lines) }

// At returns the entry idx back from the newest (0).
func (h *history) At(idx int) string { return h.lines[len(h.lines)-1-idx] }

// setSecret asks for the secret at path twice without echo and sets it.
// Nothing is set when the two differ or the answer is empty.
func (s *session) setSecret(ctx context.Context, path string) error {
	label := secretLabel(path)
	a, err := s.readPassword(label + ": ")
	if err != nil {
		return err
	}
	if a == "" {
		s.printf("Empty: nothing was set. (delete %s removes it.)\n", path)
		return nil
	}
	b, err := s.readPassword("Repeat: ")
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(a), []byte(b)) != 1 {
		return errors.New("the two do not match; nothing was set")
	}
	ctx, cancel := apiContext(ctx)
	defer cancel()
	if _, err := s.configd.Set(ctx, "", path, a); err != nil {
		return editErr(err)
	}
	s.printf("%s set in the candidate.\n", label)
	return nil
}

// noteInlineSecret says, once a session, that a secret typed on the
// command line was on the screen.
func (s *session) noteInlineSecret(path string) {
	if s.warnedInline {
		return
	}
	s.warnedInline = true
	s.printf("Note: a value typed after the path is shown on the screen (the history keeps\n"+
		"it as %s). `set %s` alone asks for it without echo.\n", secretMark, path)
}
