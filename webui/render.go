package webui

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/webui/markup"
)

// view is what the layout shows around every page.
type view struct {
	Title    string
	Nav      string
	User     string
	CSRF     string
	Flash    flash
	Changed  bool            // the candidate differs from running
	Pending  *config.Pending // a commit-confirmed waiting for Confirm
	Hostname string
}

// The helpers the pages format values with.

// ago is how long ago t was, "-" for never.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return roundDuration(time.Since(t)) + " ago"
}

func dur(d time.Duration) string { return roundDuration(d) }

// clock is t in the box's time zone, "-" for never.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.In(zone.Location()).Format("2006-01-02 15:04:05")
}

func short(d fmt.Stringer) string { return compactDuration(d.String()) }
func pct(f float64) string        { return fmt.Sprintf("%.0f%%", f) }
func kib(n uint64) uint64         { return n * 1024 }

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

// execute draws a page into a buffer first, so that a page that fails
// (a refused markup call, or a panic) becomes a clean 500 instead of half a
// page. name says which page, for the log.
func (s *Server) execute(w http.ResponseWriter, code int, name string, draw func(p *markup.Writer)) {
	var p markup.Writer
	if err := drawPage(&p, draw); err != nil {
		s.opts.Logf("webui: render %s: %v", name, err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(p.Bytes())
}

// drawPage runs draw, turning a panic into an error.
func drawPage(p *markup.Writer, draw func(p *markup.Writer)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	draw(p)
	return p.Err()
}

// renderBare shows a page without the layout (the login page).
func (s *Server) renderBare(w http.ResponseWriter, code int, name string, draw func(p *markup.Writer)) {
	s.execute(w, code, name, draw)
}

// render shows a page inside the layout; nav is the page's name, for the
// navigation bar.
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, nav, title string, content func(p *markup.Writer, v *view)) {
	v := s.baseView(r, title, nav)
	s.execute(w, code, nav, func(p *markup.Writer) { layout(p, &v, content) })
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

// fieldOf is: a field of a form, with the
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
