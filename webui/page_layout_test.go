package webui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/mux"

	"github.com/flashgate/flashgate/webui/markup"
)

// A name goes into a link as one path segment, percent-encoded, so that a
// candidate holding a name validation will refuse ("a?b #c": it is only
// refused at commit) still links to that name and not to "a" with a query:
// the router gives the handler the name back as written.
func TestLinksEscapeNamesAsPathSegments(t *testing.T) {
	const name = "a?b #c"
	var p markup.Writer
	tunnelsLive(&p, tunnelList{Total: 1, Matched: 1, From: 1, To: 1, Pages: 1, Rows: []tunnelRow{{Name: name}}})
	if p.Err() != nil {
		t.Fatal(p.Err())
	}
	const want = `href="/tunnels/a%3Fb%20%23c"`
	if !strings.Contains(p.String(), want) {
		t.Fatalf("the tunnel list links %q as something else than %s:\n%s", name, want, p.String())
	}
	var got string
	r := mux.NewRouter()
	r.HandleFunc("/tunnels/{name}", func(w http.ResponseWriter, r *http.Request) { got = mux.Vars(r)["name"] })
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/tunnels/a%3Fb%20%23c", nil))
	if got != name {
		t.Fatalf("the router gave the handler %q for the link, want %q", got, name)
	}
}

// The navigation bar marks the current section (a tunnel's page is in
// Tunnels) and only it, and Changes says when the candidate differs.
func TestNavigationMarksTheCurrentSection(t *testing.T) {
	var p markup.Writer
	layout(&p, &view{Nav: "tunnel", Changed: true, Title: "t"}, func(*markup.Writer, *view) {})
	if p.Err() != nil {
		t.Fatal(p.Err())
	}
	out := p.String()
	if n := strings.Count(out, `aria-current="page"`); n != 1 || !strings.Contains(out, `<a href="/tunnels" aria-current="page">Tunnels</a>`) {
		t.Errorf("%d links marked current, want only Tunnels:\n%s", n, out)
	}
	if !strings.Contains(out, `<a href="/changes">Changes <span class="badge">pending</span></a>`) {
		t.Errorf("Changes does not say the candidate differs:\n%s", out)
	}
	p = markup.Writer{}
	layout(&p, &view{Nav: "changes"}, func(*markup.Writer, *view) {})
	if out := p.String(); strings.Contains(out, "badge") || !strings.Contains(out, `<a href="/changes" aria-current="page">Changes</a>`) {
		t.Errorf("with nothing pending, on the changes page:\n%s", out)
	}
}
