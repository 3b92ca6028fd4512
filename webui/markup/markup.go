// Package markup writes HTML that is safe by construction: the web UI's
// pages are plain Go functions that call a Writer, and no value from data
// can reach the output except escaped for where it goes.
//
// A page is written as a sequence of three kinds of calls:
//
//   - HTML writes markup as is. Its argument is a Trusted, and the only
//     Trusted values are string constants of our own code (an untyped
//     constant converts by itself; anything else needs an explicit,
//     greppable markup.Trusted(...) conversion).
//   - Text writes a string as text content, escaped.
//   - Attr writes one attribute of the start tag the markup left open,
//     quoted and escaped; a URL attribute (href, src, action, ...) keeps
//     only a relative or http(s) URL.
//
// The Writer follows the markup it writes well enough to refuse a call in
// the wrong place: Text inside a start tag or inside a script or style
// element, Attr outside a start tag, an attribute name that is not a
// plain lower-case name, an event handler attribute (on...) in markup or
// from Attr, a style, srcset or ping attribute from Attr, or an HTML
// comment (whose end it does not look for). A refused call writes nothing and makes Err non-nil, so
// that the page becomes an error instead of half-escaped output.
package markup

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Trusted is markup written as is. Only string constants in our code, and
// the graph builder that escapes what it puts in, may produce one.
type Trusted string

// AttrName is the name of an attribute: a constant in our code, never data.
type AttrName string

// Writer accumulates one page (or one fragment of one).
type Writer struct {
	buf []byte
	err error

	inTag   bool   // a start tag is open: attributes may follow, text may not
	quote   byte   // the quote of an attribute value the markup left open
	rawText string // "script" or "style" while inside one: no text at all
	tagName []byte // the name of the tag being opened, while it is read
	readTag bool   // reading tagName
	space   bool   // inside a tag, the last byte was white space
}

// Bytes is what was written.
func (w *Writer) Bytes() []byte { return w.buf }

// String is what was written.
func (w *Writer) String() string { return string(w.buf) }

// Err is the first refused call, or nil.
func (w *Writer) Err() error { return w.err }

func (w *Writer) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("markup: "+format+" (after %q)", append(args, tail(w.buf))...)
	}
}

// tail is the end of what was written, for errors.
func tail(b []byte) string {
	if len(b) > 60 {
		b = b[len(b)-60:]
	}
	return string(b)
}

// HTML writes trusted markup as is, and follows it.
func (w *Writer) HTML(m Trusted) {
	for i := 0; i < len(m); i++ {
		w.follow(m, i)
	}
	w.buf = append(w.buf, m...)
}

// follow updates the Writer's idea of where the output is with byte i of m.
func (w *Writer) follow(m Trusted, i int) {
	c := m[i]
	switch {
	case w.quote != 0:
		if c == w.quote {
			w.quote = 0
		}
	case w.inTag:
		if w.readTag {
			if isNameByte(c) || c == '/' || c == '!' {
				w.tagName = append(w.tagName, lower(c))
				return
			}
			w.readTag = false
		}
		switch c {
		case '"', '\'':
			w.quote = c
		case '>':
			w.inTag = false
			switch name := string(w.tagName); name {
			case "!--":
				w.fail("a comment in markup %q: the Writer does not follow comments", string(m))
			case "script", "style":
				w.rawText = name
			case "/script", "/style":
				w.rawText = ""
			}
		case ' ', '\t', '\n', '\r', '\f':
			w.space = true
			return
		default:
			if w.space && (c == 'o' || c == 'O') && i+1 < len(m) && lower(m[i+1]) == 'n' {
				w.fail("an event handler attribute in markup %q", string(m))
			}
		}
		w.space = false
	case c == '<':
		if w.rawText != "" && (i+1 >= len(m) || m[i+1] != '/') {
			return // a script's or style's own '<': only an end tag ends them
		}
		w.inTag, w.readTag, w.space = true, true, false
		w.tagName = w.tagName[:0]
	}
}

// Text writes s as text content: & < > " ' escaped, NUL and invalid UTF-8
// replaced by U+FFFD, a carriage return written as a reference so that it
// survives. Inside a start tag, or a script or style element, it is refused.
func (w *Writer) Text(s string) {
	switch {
	case w.inTag:
		w.fail("text %q inside a start tag", s)
		return
	case w.rawText != "":
		w.fail("text %q inside a %s element", s, w.rawText)
		return
	}
	w.buf = appendEscaped(w.buf, s)
}

// Attr writes ` name="value"` into the open start tag, the value escaped as
// Text escapes it. For an attribute that takes a URL, a value that is
// neither relative nor http(s) (javascript:, data:, vbscript: ...) is
// replaced by "about:invalid#blocked".
func (w *Writer) Attr(name AttrName, value string) {
	switch {
	case !w.inTag || w.quote != 0 || len(w.tagName) == 0 || w.tagName[0] == '/':
		w.fail("attribute %s outside a start tag", name)
		return
	case !validAttrName(name):
		w.fail("attribute name %q", name)
		return
	}
	w.readTag, w.space = false, false
	if isURLAttr(name) && !SafeURL(value) {
		value = "about:invalid#blocked"
	}
	w.buf = append(w.buf, ' ')
	w.buf = append(w.buf, name...)
	w.buf = append(w.buf, '=', '"')
	w.buf = appendEscaped(w.buf, value)
	w.buf = append(w.buf, '"')
}

// validAttrName: lower-case letters, digits and '-', starting with a
// letter, and not an event handler (on...). Nor style (CSS has its own
// ways to run or load things), srcset or ping (lists of URLs): a page that
// needs one writes it as constant markup.
func validAttrName(n AttrName) bool {
	if n == "" || n[0] < 'a' || n[0] > 'z' || strings.HasPrefix(string(n), "on") {
		return false
	}
	switch n {
	case "style", "srcset", "ping":
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isURLAttr: the attributes whose value a browser loads or follows.
func isURLAttr(n AttrName) bool {
	switch n {
	case "href", "src", "action", "formaction", "cite", "poster", "background", "manifest", "data":
		return true
	}
	return false
}

// SafeURL reports whether u is relative (starting with "/", "?", "#", or a
// path with no scheme) or an http or https URL. It judges u as a browser
// reads it: leading spaces and control characters dropped, tabs and line
// breaks anywhere removed; anything that looks like a scheme before the
// first '/', '?' or '#' must be http or https.
func SafeURL(u string) bool {
	u = strings.TrimLeft(u, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")
	u = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, u)
	end := strings.IndexAny(u, "/?#")
	if end < 0 {
		end = len(u)
	}
	colon := strings.IndexByte(u[:end], ':')
	if colon < 0 {
		return true
	}
	scheme := strings.ToLower(u[:colon])
	return scheme == "http" || scheme == "https"
}

func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, "\uFFFD"...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		switch c {
		case '&':
			b = append(b, "&amp;"...)
		case '<':
			b = append(b, "&lt;"...)
		case '>':
			b = append(b, "&gt;"...)
		case '"':
			b = append(b, "&#34;"...)
		case '\'':
			b = append(b, "&#39;"...)
		case '\r':
			b = append(b, "&#13;"...)
		case 0:
			b = append(b, "\uFFFD"...)
		default:
			b = append(b, c)
		}
		i++
	}
	return b
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
