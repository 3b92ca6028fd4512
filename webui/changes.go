package webui

import (
	"github.com/flashgate/flashgate/webui/markup"

	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/gorilla/mux"

	"github.com/flashgate/flashgate/config"
)

func muxVar(r *http.Request, name string) string { return mux.Vars(r)[name] }

// Changes is the pending-changes page, also GET /api/v1/changes.
type Changes struct {
	Diff    []configdapi.DiffLine `json:"diff"`
	Errors  []config.FieldError   `json:"errors"` // why a commit would be refused
	Pending *config.Pending       `json:"pending,omitempty"`
	History []config.RevisionInfo `json:"history"`
	Running uint64                `json:"running_revision"`
}

func (s *Server) changes(ctx context.Context) (Changes, error) {
	var c Changes
	var err error
	if c.Diff, err = s.opts.Config.Diff(ctx, "running", "candidate"); err != nil {
		return c, err
	}
	cand, err := s.candidate(ctx)
	if err != nil {
		return c, err
	}
	c.Errors = cand.Errors
	st, err := s.status(ctx)
	if err != nil {
		return c, err
	}
	c.Pending, c.Running = st.Pending, st.Revision
	if c.History, err = s.opts.Config.History(ctx); err != nil {
		return c, err
	}
	if len(c.History) > 20 {
		c.History = c.History[:20]
	}
	return c, nil
}

func (s *Server) changesPage(w http.ResponseWriter, r *http.Request) {
	c, err := s.changes(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	s.render(w, r, http.StatusOK, "changes", "Pending changes", func(p *markup.Writer, v *view) { changesPage(p, v, c) })
}

func commitRequest(who, message string, confirm time.Duration) configdapi.CommitRequest {
	req := configdapi.CommitRequest{Who: who + " (web)", Message: message}
	if confirm > 0 {
		req.ConfirmTimeout = confirm.String()
	}
	return req
}

// maxConfirmMinutes bounds the commit-confirmed window offered.
const maxConfirmMinutes = 60

// parseConfirmMinutes reads the form's confirm window; empty is a plain
// commit.
func parseConfirmMinutes(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("confirm within %q: give 1 to %d minutes", s, maxConfirmMinutes)
	}
	return confirmWindow(n)
}

// confirmWindow checks a commit-confirmed window in minutes; 0 is a plain
// commit.
func confirmWindow(minutes int) (time.Duration, error) {
	if minutes < 0 || minutes > maxConfirmMinutes {
		return 0, fmt.Errorf("confirm within %d minutes: give 1 to %d minutes", minutes, maxConfirmMinutes)
	}
	return time.Duration(minutes) * time.Minute, nil
}

func (s *Server) commit(w http.ResponseWriter, r *http.Request) {
	minutes := ""
	if r.PostFormValue("mode") == "confirmed" {
		minutes = r.PostFormValue("confirm_minutes")
	}
	confirm, err := parseConfirmMinutes(minutes)
	if err != nil {
		s.redirect(w, r, "/changes", sentence(err.Error()), true)
		return
	}
	info, err := s.opts.Config.Commit(r.Context(), commitRequest(sessionOf(r).User, r.PostFormValue("message"), confirm))
	switch {
	case errors.Is(err, config.ErrNoChanges):
		s.redirect(w, r, "/changes", "There is nothing to commit.", true)
	case err != nil:
		s.redirect(w, r, "/changes", "Commit refused: "+err.Error(), true)
	case confirm > 0:
		s.redirect(w, r, "/changes", fmt.Sprintf("Revision %d is running. Confirm it within %s or it is rolled back by itself.", info.Revision, confirm), false)
	default:
		s.redirect(w, r, "/changes", fmt.Sprintf("Revision %d is running.", info.Revision), false)
	}
}

func (s *Server) confirm(w http.ResponseWriter, r *http.Request) {
	if err := s.opts.Config.Confirm(r.Context()); err != nil {
		s.redirect(w, r, "/changes", sentence(err.Error()), true)
		return
	}
	s.redirect(w, r, "/changes", "Confirmed: the commit stays.", false)
}

func (s *Server) discard(w http.ResponseWriter, r *http.Request) {
	if _, err := s.opts.Config.Discard(r.Context()); err != nil {
		s.redirect(w, r, "/changes", sentence(err.Error()), true)
		return
	}
	s.redirect(w, r, "/changes", "Pending changes discarded.", false)
}

func (s *Server) rollback(w http.ResponseWriter, r *http.Request) {
	rev, err := strconv.ParseUint(mux.Vars(r)["rev"], 10, 64)
	if err != nil {
		s.redirect(w, r, "/changes", "Not a revision number.", true)
		return
	}
	info, err := s.opts.Config.Rollback(r.Context(), rev, sessionOf(r).User+" (web)")
	if err != nil {
		s.redirect(w, r, "/changes", "Rollback failed: "+err.Error(), true)
		return
	}
	s.redirect(w, r, "/changes", fmt.Sprintf("Revision %d restored as revision %d.", rev, info.Revision), false)
}
