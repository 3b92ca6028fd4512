package webui

import (
	"github.com/flashgate/flashgate/webui/markup"

	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/supervisor"
)

type systemData struct {
	Settings    *formState
	Now         time.Time
	Timezone    string
	Fingerprint string
	Board       BoardInfo
	PasswordErr formErrors
	Storage     configdapi.Status
	Upgrade     UpgradeView
}

func (s *Server) systemData(ctx context.Context, settings *formState) (systemData, error) {
	cand, err := s.candidate(ctx)
	if err != nil {
		return systemData{}, err
	}
	if settings == nil {
		vals, _ := kindSystem.values(cand.Config, "")
		settings = s.newForm(kindSystem, "", false, vals, nil)
	}
	st, _ := s.status(ctx)
	return systemData{Settings: settings, Now: s.opts.Now(), Timezone: cand.Config.System.Timezone,
		Fingerprint: s.opts.Fingerprint, Board: s.opts.Board, Storage: st, Upgrade: s.upgradeView(ctx)}, nil
}

func (s *Server) systemPage(w http.ResponseWriter, r *http.Request) {
	d, err := s.systemData(r.Context(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	s.renderSystem(w, r, http.StatusOK, d)
}

func (s *Server) systemSettings(w http.ResponseWriter, r *http.Request) {
	vals := formValues(r, kindSystem)
	ferrs, err := s.saveElement(r.Context(), kindSystem, "", vals, false, false)
	if err != nil {
		ferrs = formErrors{"": err.Error()}
	}
	if ferrs != nil {
		d, err := s.systemData(r.Context(), s.newForm(kindSystem, "", false, vals, ferrs))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		s.renderSystem(w, r, http.StatusUnprocessableEntity, d)
		return
	}
	s.redirect(w, r, "/system", "Settings saved to the pending changes. Commit them to apply.", false)
}

func (s *Server) passwordChange(w http.ResponseWriter, r *http.Request) {
	sess := sessionOf(r)
	msg, errs := s.changePassword(r.Context(), sess.User, r.PostFormValue("current"), r.PostFormValue("new"), r.PostFormValue("repeat"))
	if errs != nil {
		d, err := s.systemData(r.Context(), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		d.PasswordErr = errs
		s.renderSystem(w, r, http.StatusUnprocessableEntity, d)
		return
	}
	s.sessions.deleteUser(sess.User, sessionID(r)) // other logins of this account end
	s.redirect(w, r, "/system", msg, false)
}

// backup returns a backup document of the running configuration.
// Secrets in the clear (allowPlain) are for scripted transfers through the
// API; the page does not offer them (a file of plaintext PSKs in a
// downloads folder).
// cfg is configd's client, carrying the current password for a backup
// with secrets (reauth).
func (s *Server) backup(ctx context.Context, cfg *configdapi.Client, secrets, passphrase string, allowPlain bool) ([]byte, string, error) {
	switch {
	case secrets == config.SecretsOmitted, secrets == config.SecretsEncrypted:
	case secrets == config.SecretsIncluded && allowPlain:
	default:
		return nil, "", fmt.Errorf("secrets must be %q or %q", config.SecretsOmitted, config.SecretsEncrypted)
	}
	data, err := cfg.Export(ctx, secrets, passphrase)
	if err != nil {
		return nil, "", err
	}
	running, _, _ := s.running(ctx)
	host := "flashgate"
	if running != nil {
		host = running.System.Hostname
	}
	name := fmt.Sprintf("%s-%s-%s.json", host, s.opts.Now().UTC().Format("20060102-1504"), secrets)
	return data, name, nil
}

func (s *Server) backupDownload(w http.ResponseWriter, r *http.Request) {
	cfg := s.opts.Config
	if r.PostFormValue("secrets") != config.SecretsOmitted {
		var msg string
		if cfg, msg, _ = s.reauth(r, "backup with secrets", r.PostFormValue("password")); msg != "" {
			s.redirect(w, r, "/system", "Backup refused: "+msg, true)
			return
		}
	}
	data, name, err := s.backup(r.Context(), cfg, r.PostFormValue("secrets"), r.PostFormValue("passphrase"), false)
	if err != nil {
		s.redirect(w, r, "/system", "Backup failed: "+err.Error(), true)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Write(data)
}

// readUpload reads the "backup" file of a multipart form, bounded.
func readUpload(r *http.Request) ([]byte, error) {
	if r.MultipartForm == nil {
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			return nil, fmt.Errorf("upload: %w", err)
		}
	}
	f, _, err := r.FormFile("backup")
	if err != nil {
		return nil, errors.New("no backup file was chosen")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, config.MaxDocumentSize+1))
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	if len(data) > config.MaxDocumentSize {
		return nil, fmt.Errorf("the file is larger than a backup can be (%d KiB)", config.MaxDocumentSize>>10)
	}
	return data, nil
}

// restore makes a backup the candidate. configd checks it completely
// (format, schema, secrets, validation) before anything changes.
func (s *Server) restore(ctx context.Context, cfg *configdapi.Client, data []byte, passphrase string) error {
	cand, err := s.candidate(ctx)
	if err != nil {
		return err
	}
	_, err = cfg.Import(ctx, cand.Etag, data, passphrase)
	return err
}

func (s *Server) restoreUpload(w http.ResponseWriter, r *http.Request) {
	data, err := readUpload(r)
	var cfg *configdapi.Client
	if err == nil {
		var msg string
		if cfg, msg, _ = s.reauth(r, "restore", r.FormValue("password")); msg != "" {
			err = errors.New(msg)
		}
	}
	if err == nil {
		err = s.restore(r.Context(), cfg, data, r.FormValue("passphrase"))
	}
	if err != nil {
		s.redirect(w, r, "/system", "Restore refused, nothing was changed: "+err.Error(), true)
		return
	}
	s.redirect(w, r, "/changes", "The backup is now the pending configuration. Review the changes and commit them to apply.", false)
}

func (s *Server) factoryReset(w http.ResponseWriter, r *http.Request) {
	if r.PostFormValue("confirm") != "factory-reset" {
		s.redirect(w, r, "/system", "Type factory-reset into the box to confirm.", true)
		return
	}
	cfg, msg, _ := s.reauth(r, "factory reset", r.PostFormValue("password"))
	if msg != "" {
		s.redirect(w, r, "/system", "Factory reset refused: "+msg, true)
		return
	}
	if _, err := cfg.FactoryReset(r.Context(), sessionOf(r).User); err != nil {
		s.redirect(w, r, "/system", "Factory reset failed: "+err.Error(), true)
		return
	}
	// The admin accounts are gone with the rest: the session is over.
	s.sessions.delete(sessionID(r))
	setCookie(w, sessionCookie, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (s *Server) doReboot(ctx context.Context) error {
	if s.opts.Supervisor == nil {
		return errors.New("the supervisor is not reachable")
	}
	return s.opts.Supervisor.Power(ctx, supervisor.Reboot)
}

func (s *Server) reboot(w http.ResponseWriter, r *http.Request) {
	if err := s.doReboot(r.Context()); err != nil {
		s.redirect(w, r, "/system", "Reboot failed: "+err.Error(), true)
		return
	}
	s.redirect(w, r, "/system", "Rebooting. The box will be back in a minute or two.", false)
}

// LogsView is the logs page: the services and one ring.
type LogsView struct {
	Services []supervisor.ServiceStatus `json:"services"`
	Current  string                     `json:"current"`
	Lines    []supervisor.Line          `json:"lines"`
	Dropped  uint64                     `json:"dropped"`
	Error    string                     `json:"error,omitempty"`
}

const logLines = 300

func (s *Server) logsView(ctx context.Context, name string) LogsView {
	v := LogsView{Current: name}
	if s.opts.Supervisor == nil {
		v.Error = "the supervisor is not reachable"
		return v
	}
	svcs, err := s.opts.Supervisor.Services(ctx)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.Services = svcs
	if v.Current == "" && len(svcs) > 0 {
		v.Current = svcs[0].Name
	}
	if v.Current != "" {
		rep, err := s.opts.Supervisor.Logs(ctx, v.Current, logLines)
		if err != nil {
			v.Error = err.Error()
		} else {
			v.Lines, v.Dropped = rep.Lines, rep.Dropped
		}
	}
	return v
}

func (s *Server) logsPage(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSpace(muxVar(r, "service"))
	d := s.logsView(r.Context(), name)
	s.render(w, r, http.StatusOK, "logs", "Logs", func(p *markup.Writer, v *view) { logsPage(p, v, d) })
}

func (s *Server) liveLogs(w http.ResponseWriter, r *http.Request) {
	d := s.logsView(r.Context(), muxVar(r, "service"))
	s.execute(w, http.StatusOK, "logs live", func(p *markup.Writer) { logsLive(p, d) })
}

func (s *Server) renderSystem(w http.ResponseWriter, r *http.Request, code int, d systemData) {
	s.render(w, r, code, "system", "System", func(p *markup.Writer, v *view) { systemPage(p, v, d) })
}
