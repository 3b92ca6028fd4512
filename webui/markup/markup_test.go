package markup

import (
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/net/html"
)

func TestTextEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                          "plain",
		`<script>alert(1)</script>`:      "&lt;script&gt;alert(1)&lt;/script&gt;",
		`"><img src=x onerror=alert(1)>`: "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;",
		`' onmouseover='x`:               "&#39; onmouseover=&#39;x",
		"a & b":                          "a &amp; b",
		"&amp;":                          "&amp;amp;",
		"nul\x00":                        "nul\uFFFD",
		"bad\xffutf8":                    "bad\uFFFDutf8",
		"cr\r\n":                         "cr&#13;\n",
		"⇄ ünïcode":                      "⇄ ünïcode",
	} {
		var w Writer
		w.HTML(`<p>`)
		w.Text(in)
		w.HTML(`</p>`)
		if got := w.String(); got != "<p>"+want+"</p>" || w.Err() != nil {
			t.Errorf("Text(%q) = %q, %v; want <p>%s</p>", in, got, w.Err(), want)
		}
	}
}

func TestAttrQuotesAndEscapes(t *testing.T) {
	var w Writer
	w.HTML(`<input`)
	w.Attr("value", `"><script>x</script>' a=b`)
	w.HTML(`>`)
	want := `<input value="&#34;&gt;&lt;script&gt;x&lt;/script&gt;&#39; a=b">`
	if got := w.String(); got != want || w.Err() != nil {
		t.Errorf("got %s, %v; want %s", got, w.Err(), want)
	}
}

func TestURLAttributes(t *testing.T) {
	for _, c := range []struct {
		url  string
		kept bool
	}{
		{"/tunnels/branch", true},
		{"?state=down&q=x", true},
		{"#firmware", true},
		{"tunnels/branch/edit", true},
		{"/tunnels/a:b", true},
		{"http://example.net/", true},
		{"HTTPS://example.net/x", true},
		{"", true},
		{"javascript:alert(1)", false},
		{"JaVaScRiPt:alert(1)", false},
		{"  javascript:alert(1)", false},
		{"\x01\x1f javascript:alert(1)", false},
		{"java\tscript:alert(1)", false},
		{"java\nscript:alert(1)", false},
		{"java\rscript:alert(1)", false},
		{"data:text/html,<script>alert(1)</script>", false},
		{"DATA:text/html;base64,PHNjcmlwdD4=", false},
		{"vbscript:msgbox(1)", false},
		{"file:///etc/passwd", false},
		{"mailto:a@example.net", false},
		{"foo:bar", false},
	} {
		for _, name := range []AttrName{"href", "src", "action", "formaction"} {
			var w Writer
			w.HTML(`<a`)
			w.Attr(name, c.url)
			w.HTML(`>`)
			got := attrsOf(t, w.String(), "a")[string(name)]
			switch {
			case w.Err() != nil:
				t.Errorf("%s=%q: %v", name, c.url, w.Err())
			case c.kept && got != c.url:
				t.Errorf("%s=%q became %q", name, c.url, got)
			case !c.kept && got != "about:invalid#blocked":
				t.Errorf("%s=%q was kept as %q", name, c.url, got)
			}
		}
	}
	// Other attributes are not URLs: their values stay.
	var w Writer
	w.HTML(`<a`)
	w.Attr("title", "javascript:alert(1)")
	w.HTML(`>`)
	if got := attrsOf(t, w.String(), "a")["title"]; got != "javascript:alert(1)" {
		t.Errorf("title became %q", got)
	}
}

func TestMisplacedCallsAreRefused(t *testing.T) {
	for name, draw := range map[string]func(w *Writer){
		"text in a start tag":        func(w *Writer) { w.HTML(`<a href="`); w.Text("x") },
		"text in an open tag":        func(w *Writer) { w.HTML(`<a`); w.Text("x") },
		"text in a script":           func(w *Writer) { w.HTML(`<script>`); w.Text("x") },
		"text in a style":            func(w *Writer) { w.HTML(`<style>`); w.Text("x") },
		"text in a script with attr": func(w *Writer) { w.HTML(`<script`); w.Attr("src", "/a.js"); w.HTML(`>`); w.Text("x") },
		"attr outside a tag":         func(w *Writer) { w.HTML(`<p>`); w.Attr("title", "x") },
		"attr in a quoted value":     func(w *Writer) { w.HTML(`<p title="`); w.Attr("title", "x") },
		"attr in an end tag":         func(w *Writer) { w.HTML(`</p`); w.Attr("title", "x") },
		"event handler attr":         func(w *Writer) { w.HTML(`<p`); w.Attr("onclick", "x") },
		"upper-case attr":            func(w *Writer) { w.HTML(`<p`); w.Attr("Title", "x") },
		"attr name with space":       func(w *Writer) { w.HTML(`<p`); w.Attr("a b", "x") },
		"attr name with quote":       func(w *Writer) { w.HTML(`<p`); w.Attr(`a"`, "x") },
		"event handler in markup":    func(w *Writer) { w.HTML(`<p class="x" onmouseover="y">`) },
		"event handler upper case":   func(w *Writer) { w.HTML(`<p OnClick="y">`) },
		"style from data":            func(w *Writer) { w.HTML(`<p`); w.Attr("style", "x") },
		"srcset from data":           func(w *Writer) { w.HTML(`<img`); w.Attr("srcset", "x") },
		"a comment":                  func(w *Writer) { w.HTML(`<!-- x -->`) },
	} {
		var w Writer
		draw(&w)
		if w.Err() == nil {
			t.Errorf("%s: not refused: %s", name, w.String())
		}
	}
	// And what is right is not refused.
	var w Writer
	w.HTML(`<!doctype html><script src="/static/app.js" defer></script><p class="on" title="a > b">`)
	w.Text("after a script")
	w.HTML(`<a`)
	w.Attr("href", "/x")
	w.Attr("data-confirm", "Delete x?")
	w.HTML(` rel="next">`)
	w.Text("x")
	w.HTML(`</a><svg><polyline points="1,2"/><text x="4">`)
	w.Text("1 kbit/s")
	w.HTML(`</text></svg><textarea>`)
	w.Text("</textarea><script>")
	w.HTML(`</textarea><script>if (1<2) {}</script>`)
	w.Text("after an inline script")
	if w.Err() != nil {
		t.Error(w.Err())
	}
}

// attrsOf parses doc and returns the attributes of its first element
// called tag.
func attrsOf(t testing.TB, doc, tag string) map[string]string {
	t.Helper()
	n := find(t, doc, tag)
	if n == nil {
		t.Fatalf("no <%s> in %s", tag, doc)
	}
	out := map[string]string{}
	for _, a := range n.Attr {
		out[a.Key] = a.Val
	}
	return out
}

func find(t testing.TB, doc, tag string) *html.Node {
	root, err := html.Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("parse %q: %v", doc, err)
	}
	for n := range root.Descendants() {
		if n.Type == html.ElementNode && n.Data == tag {
			return n
		}
	}
	return nil
}

// asWritten is s as Text and Attr keep it: NUL and invalid UTF-8 become
// U+FFFD.
func asWritten(s string) string {
	var b strings.Builder
	for _, r := range s { // each invalid byte is a RuneError of its own
		if r == 0 {
			r = utf8.RuneError
		}
		b.WriteRune(r)
	}
	return b.String()
}

// FuzzText: whatever the string, a parser finds exactly one text node
// holding it, and no element, inside the paragraph it was written into.
func FuzzText(f *testing.F) {
	for _, s := range []string{"", "x", "<script>alert(1)</script>", `"><img src=x onerror=alert(1)>`, "</p><p>", "&amp;", "a\r\nb", "\x00", "{{.}}", "<!--", "]]>", "</textarea>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var w Writer
		w.HTML(`<!doctype html><html><head></head><body><p id="t">`)
		w.Text(s)
		w.HTML(`</p></body></html>`)
		if w.Err() != nil {
			t.Fatal(w.Err())
		}
		p := find(t, w.String(), "p")
		if p == nil {
			t.Fatalf("no paragraph in %q", w.String())
		}
		var texts []string
		for c := p.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.TextNode {
				t.Fatalf("Text(%q) made a %v node %q", s, c.Type, c.Data)
			}
			texts = append(texts, c.Data)
		}
		want := asWritten(s)
		switch {
		case want == "" && len(texts) != 0:
			t.Fatalf("Text(%q) made %q", s, texts)
		case want != "" && (len(texts) != 1 || texts[0] != want):
			t.Fatalf("Text(%q) parses back as %q", s, texts)
		}
		if p.NextSibling != nil {
			t.Fatalf("Text(%q) ended the paragraph early", s)
		}
	})
}

// FuzzAttr: whatever the string, a parser finds exactly the attributes
// written, the value intact; in a URL attribute the value is either intact
// and judged safe, or replaced.
func FuzzAttr(f *testing.F) {
	for _, s := range []string{"", "x", `" onmouseover="x`, `' onmouseover='x`, "javascript:alert(1)", " JaVaScRiPt:x", "java\tscript:x", "data:,x", "/ok", "a\r\nb", "\x00", "&quot;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var w Writer
		w.HTML(`<!doctype html><html><head></head><body><a`)
		w.Attr("title", s)
		w.Attr("href", s)
		w.HTML(` class="c">x</a></body></html>`)
		if w.Err() != nil {
			t.Fatal(w.Err())
		}
		a := find(t, w.String(), "a")
		if a == nil {
			t.Fatalf("no link in %q", w.String())
		}
		// The parser may list attributes in any order: by name, then.
		attrs := map[string]string{}
		for _, at := range a.Attr {
			attrs[at.Key] = at.Val
		}
		if len(a.Attr) != 3 || len(attrs) != 3 {
			t.Fatalf("Attr(%q) made the attributes %v", s, a.Attr)
		}
		want := asWritten(s)
		if got, ok := attrs["title"]; !ok || got != want {
			t.Fatalf("Attr(title, %q) parses back as %q", s, got)
		}
		switch href, ok := attrs["href"]; {
		case !ok:
			t.Fatalf("Attr(href, %q) lost: %v", s, a.Attr)
		case href == "about:invalid#blocked":
			if SafeURL(s) {
				t.Fatalf("a safe URL %q was replaced", s)
			}
		case href != want || !SafeURL(s):
			t.Fatalf("Attr(href, %q) parses back as %q", s, href)
		}
		if scheme := browserScheme(attrs["href"]); scheme != "" && scheme != "http" && scheme != "https" && scheme != "about" {
			t.Fatalf("Attr(href, %q) kept the scheme %q", s, scheme)
		}
		if attrs["class"] != "c" {
			t.Fatalf("Attr(%q) disturbed the next attribute: %v", s, a.Attr)
		}
		if !utf8.ValidString(attrs["title"]) {
			t.Fatalf("invalid UTF-8 out of %q", s)
		}
	})
}

// browserScheme is the scheme a browser would find in u (lower case), ""
// for a relative URL: leading C0 controls and spaces dropped, tabs and line
// breaks removed, then a letter followed by letters, digits, + - . up to ':'.
func browserScheme(u string) string {
	u = strings.TrimLeft(u, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")
	u = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(u)
	for i := 0; i < len(u); i++ {
		c := u[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return strings.ToLower(u[:i])
		default:
			return ""
		}
	}
	return ""
}
