package webui

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec"
)

// view is what every page template gets: the layout's needs plus the
// page's own Data.
type view struct {
	Title    string
	Nav      string
	User     string
	CSRF     string
	Flash    flash
	Changed  bool            // the candidate differs from running
	Pending  *config.Pending // a commit-confirmed waiting for Confirm
	Hostname string
	Data     any
}

var templateFuncs = template.FuncMap{
	"bytes": formatBytes,
	"rate":  formatRate,
	"graph": rateGraph,
	"join":  strings.Join,
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return roundDuration(time.Since(t)) + " ago"
	},
	"dur": func(d time.Duration) string { return roundDuration(d) },
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.In(zone.Location()).Format("2006-01-02 15:04:05")
	},
	"unix":       func(t time.Time) int64 { return t.Unix() },
	"short":      func(d fmt.Stringer) string { return compactDuration(d.String()) },
	"stateClass": stateClass,
	"pct":        func(f float64) string { return fmt.Sprintf("%.0f%%", f) },
	"field":      fieldOf,
	"kib":        func(n uint64) uint64 { return n * 1024 },
	"del": func(base, name, csrf string) deleteButton {
		return deleteButton{Base: base, Name: name, CSRF: csrf}
	},
}

// deleteButton is the data of the "delete" template.
type deleteButton struct{ Base, Name, CSRF string }

func roundDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// stateClass maps a tunnel state to a CSS class; the state itself is always
// written out too, so color is never the only signal.
func stateClass(s ipsec.TunnelState) string {
	switch s {
	case ipsec.StateUp:
		return "ok"
	case ipsec.StateConnecting:
		return "busy"
	case ipsec.StateFailed:
		return "bad"
	case ipsec.StateDown:
		return "off"
	}
	return "unknown"
}

// pageSet holds the pages' templates, each parsed on its first render and
// kept from then on. Parsed, with the layout and the partials each page
// includes, they take about a megabyte of heap (on amd64) that an
// appliance nobody browses would hold all its life; a page costs about
// half a millisecond to parse here, once.
type pageSet struct {
	files  map[string][]string // page name -> its template files
	mu     sync.Mutex
	parsed map[string]*template.Template
}

// parsePages finds the pages and checks that every one parses, so that a
// broken template still stops the UI at start, and keeps none of them.
func parsePages() (*pageSet, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	p := &pageSet{files: map[string][]string{}, parsed: map[string]*template.Template{}}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" || strings.HasPrefix(name, "_") {
			continue
		}
		files := []string{n}
		if name != "login" {
			files = append(files, "templates/layout.html", "templates/_partials.html")
		}
		p.files[name] = files
		if _, err := p.parse(name); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// parse parses a page together with the layout and the shared partials;
// login stands alone.
func (p *pageSet) parse(name string) (*template.Template, error) {
	t, err := template.New(name).Funcs(templateFuncs).ParseFS(templateFS, p.files[name]...)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	return t, nil
}

// lookup returns a page's templates, parsing them on the page's first
// render; ok is false for a page that does not exist.
func (p *pageSet) lookup(name string) (t *template.Template, ok bool, err error) {
	if _, ok := p.files[name]; !ok {
		return nil, false, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.parsed[name]; t != nil {
		return t, true, nil
	}
	if t, err = p.parse(name); err != nil {
		return nil, true, err
	}
	p.parsed[name] = t
	return t, true, nil
}

// execute renders into a buffer first, so that a template error becomes a
// clean 500 instead of half a page.
func (s *Server) execute(w http.ResponseWriter, code int, page, tmpl string, data any) {
	t, ok, err := s.pages.lookup(page)
	if !ok {
		http.Error(w, "no template "+page, http.StatusInternalServerError)
		return
	}
	if err != nil {
		s.opts.Logf("webui: %v", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, tmpl, data); err != nil {
		s.opts.Logf("webui: render %s/%s: %v", page, tmpl, err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

func (s *Server) renderBare(w http.ResponseWriter, code int, page string, data any) {
	s.execute(w, code, page, page, data)
}

// render shows a page inside the layout.
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, page, title string, data any) {
	v := s.baseView(r, title, page)
	v.Data = data
	s.execute(w, code, page, "layout", v)
}

func (s *Server) baseView(r *http.Request, title, nav string) view {
	v := view{Title: title, Nav: nav}
	if sess := sessionOf(r); sess != nil {
		v.User, v.CSRF = sess.User, sess.CSRF
		v.Flash = s.sessions.takeFlash(sessionID(r))
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	// The status and the system section, not the candidate: configd
	// answered "changed" by sending the whole candidate, validated, and
	// the running configuration came with it for the session check, some
	// 26 MB allocated per page at 1000 tunnels (issue 22).
	if st, err := s.status(ctx); err == nil {
		v.Pending, v.Changed = st.Pending, st.CandidateChanged
	}
	if sys, err := s.runningSystem(ctx); err == nil {
		v.Hostname = sys.Hostname
	}
	return v
}

// redirect ends a POST with a message for the next page (post, redirect,
// get: a reload never repeats the action).
func (s *Server) redirect(w http.ResponseWriter, r *http.Request, to, msg string, isErr bool) {
	if msg != "" {
		s.sessions.setFlash(sessionID(r), flash{Text: msg, Error: isErr})
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// fieldOf is the "field" template function: a field of a form, with the
// choices its configuration offers.
func fieldOf(f field, form *formState) fieldView {
	if f.Choices != nil && form != nil && form.Config != nil {
		choices := f.Choices(form.Config)
		if f.Kind == fSelect {
			f.Options = choices
			if v := form.Values[f.Key]; len(v) == 1 && !slices.Contains(choices, v[0]) {
				f.Options = append(f.Options, v[0]) // a name the store lost: shown, and validation says why
			}
		} else if len(choices) > 0 {
			f.Help += " In the store: " + strings.Join(choices, ", ") + "."
		}
	}
	return fieldView{f, form}
}
