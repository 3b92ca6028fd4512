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

// parsePages parses each page together with the layout and the shared
// partials; login stands alone.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" || strings.HasPrefix(name, "_") {
			continue
		}
		files := []string{n}
		if name != "login" {
			files = append(files, "templates/layout.html", "templates/_partials.html")
		}
		t, err := template.New(name).Funcs(templateFuncs).ParseFS(templateFS, files...)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// execute renders into a buffer first, so that a template error becomes a
// clean 500 instead of half a page.
func (s *Server) execute(w http.ResponseWriter, code int, page, tmpl string, data any) {
	t, ok := s.pages[page]
	if !ok {
		http.Error(w, "no template "+page, http.StatusInternalServerError)
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
	if st, err := s.status(ctx); err == nil {
		v.Pending = st.Pending
	}
	if cand, err := s.candidate(ctx); err == nil {
		v.Changed = cand.Changed
		v.Hostname = cand.Config.System.Hostname
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
