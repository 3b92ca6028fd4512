package configd

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flashgate/flashgate/internal/localapi"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/config"
)

// Request body limits. Documents (a whole config, a backup) may be up to
// config.MaxDocumentSize; everything else is a few fields.
const (
	maxSmallBody    = 64 << 10
	maxDocumentBody = config.MaxDocumentSize + 64<<10
)

// Server is configd's local API over a Store.
type Server struct {
	store   *config.Store
	storage string
	note    string
	logf    func(string, ...any)
	files   *FileStore
	mux     *http.ServeMux
	stop    chan struct{} // closed by StopWatches
	once    sync.Once

	// redact is set on the restricted API (see Restricted).
	redact *redactor
	// readOnly is set on the read-only API (see ReadOnly).
	readOnly bool
	// firmware is set by WithFirmware (firmware.go).
	firmware  *firmwareState
	verifySem chan struct{} // one argon2id at a time: each takes 19 MiB
	decoyOnce sync.Once
	decoyHash string
}

// StopWatches ends every watch stream (they never go idle, so
// http.Server.Shutdown would otherwise wait for them).
func (s *Server) StopWatches() { s.once.Do(func() { close(s.stop) }) }

// ServerOption changes a default of NewServer.
type ServerOption func(*Server)

// WithFiles serves files from fs instead of the default, a "files"
// directory next to the database written without a Card (which suits a
// writable directory, not the read-only config partition).
func WithFiles(fs *FileStore) ServerOption { return func(s *Server) { s.files = fs } }

// NewServer returns the API handler for store. storage and note are shown
// in the status (see Status).
func NewServer(store *config.Store, storage, note string, logf func(string, ...any), opts ...ServerOption) *Server {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s := &Server{store: store, storage: storage, note: note, logf: logf, mux: http.NewServeMux(), stop: make(chan struct{}),
		verifySem: make(chan struct{}, 1)}
	for _, o := range opts {
		o(s)
	}
	if s.files == nil {
		s.files = NewFileStore(filepath.Join(filepath.Dir(store.Path()), DefaultFilesDir), nil, logf)
	}
	s.mux.HandleFunc("GET /v1/status", s.status)
	s.mux.HandleFunc("GET /v1/running", s.running)
	s.mux.HandleFunc("GET /v1/running/system", s.runningSystem)
	s.mux.HandleFunc("GET /v1/candidate", s.candidate)
	s.mux.HandleFunc("PUT /v1/candidate", s.replaceCandidate)
	s.mux.HandleFunc("PATCH /v1/candidate", s.patchCandidate)
	s.mux.HandleFunc("POST /v1/candidate/set", s.set)
	s.mux.HandleFunc("POST /v1/candidate/delete", s.delete)
	s.mux.HandleFunc("POST /v1/candidate/discard", s.discard)
	s.mux.HandleFunc("POST /v1/candidate/password", s.password)
	s.mux.HandleFunc("GET /v1/validate", s.validate)
	s.mux.HandleFunc("GET /v1/diff", s.diff)
	s.mux.HandleFunc("POST /v1/commit", s.commit)
	s.mux.HandleFunc("POST /v1/confirm", s.confirm)
	s.mux.HandleFunc("POST /v1/rollback", s.rollback)
	s.mux.HandleFunc("GET /v1/history", s.history)
	s.mux.HandleFunc("GET /v1/history/{rev}", s.revision)
	s.mux.HandleFunc("POST /v1/export", s.export)
	s.mux.HandleFunc("POST /v1/import", s.requirePassword(s.importBackup))
	s.mux.HandleFunc("POST /v1/factory-reset", s.requirePassword(s.factoryReset))
	s.mux.HandleFunc("GET /v1/watch", s.watch)
	s.mux.HandleFunc("GET /v1/files/{name}", s.getFile)
	s.mux.HandleFunc("PUT /v1/files/{name}", s.putFile)
	s.mux.HandleFunc("POST /v1/verify-password", s.verifyPassword)
	s.mux.HandleFunc("POST /v1/handoff", s.handOff)
	s.certRoutes()
	s.firmwareRoutes()
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.readOnly && !readOnlyRoute(r) {
		s.fail(w, r, fmt.Errorf("%s %s: %w", r.Method, r.URL.Path, errReadOnly))
		return
	}
	s.mux.ServeHTTP(w, r)
}

func writeText(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, text)
}

// fail writes err as an ErrorResponse with the status its kind calls for.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ve config.ValidationErrors
	var pe *config.PathError
	var mbe *http.MaxBytesError
	resp := configdapi.ErrorResponse{Error: err.Error(), Code: configdapi.CodeBadRequest}
	status := http.StatusBadRequest
	switch {
	case errors.Is(err, errRestricted), errors.Is(err, errReadOnly):
		status, resp.Code = http.StatusForbidden, configdapi.CodeForbidden
	case errors.Is(err, errWrongPassword):
		status, resp.Code = http.StatusForbidden, configdapi.CodeWrongPassword
	case errors.As(err, &mbe):
		status, resp.Code = http.StatusRequestEntityTooLarge, configdapi.CodeTooLarge
		resp.Error = fmt.Sprintf("request body larger than %d bytes", mbe.Limit)
	case errors.Is(err, config.ErrCandidateChanged):
		status, resp.Code = http.StatusConflict, configdapi.CodeCandidateChanged
	case errors.As(err, &ve):
		status, resp.Code, resp.Fields = http.StatusUnprocessableEntity, configdapi.CodeValidation, ve
	case errors.As(err, &pe):
		resp.Fields = []config.FieldError{{Path: pe.Path, Message: pe.Err.Error()}}
	case errors.Is(err, config.ErrNoChanges):
		status, resp.Code = http.StatusConflict, configdapi.CodeNoChanges
	case errors.Is(err, config.ErrNothingPending):
		status, resp.Code = http.StatusConflict, configdapi.CodeNothingPending
	case errors.Is(err, config.ErrHandedOff):
		status, resp.Code = http.StatusConflict, configdapi.CodeHandedOff
	case errors.Is(err, config.ErrNoRevision):
		status, resp.Code = http.StatusNotFound, configdapi.CodeNotFound
	case errors.Is(err, configdapi.ErrFileTooBig):
		status, resp.Code = http.StatusRequestEntityTooLarge, configdapi.CodeTooLarge
	case errors.As(err, new(*internalError)):
		status, resp.Code = http.StatusInternalServerError, configdapi.CodeInternal
	case errors.Is(err, fs.ErrNotExist):
		status, resp.Code = http.StatusNotFound, configdapi.CodeNoFile
	}
	if status >= 500 {
		s.logf("configd: %s %s: %v", r.Method, r.URL.Path, err)
	}
	localapi.WriteJSON(w, status, resp)
}

// internalError marks failures that are configd's or the card's, not the
// caller's.
type internalError struct{ err error }

func (e *internalError) Error() string { return e.err.Error() }
func (e *internalError) Unwrap() error { return e.err }

// storeErr classifies an error from a store write: validation, etag and
// state errors are the caller's; anything else (the card) is internal.
func storeErr(err error) error {
	var ve config.ValidationErrors
	if err == nil || errors.As(err, &ve) || errors.Is(err, config.ErrCandidateChanged) ||
		errors.Is(err, config.ErrNoChanges) || errors.Is(err, config.ErrNothingPending) ||
		errors.Is(err, config.ErrNoRevision) || errors.Is(err, config.ErrHandedOff) {
		return err
	}
	return &internalError{err}
}

// decodeBody reads a JSON request body strictly: at most limit bytes, no
// unknown fields, nothing after the document.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	if d.More() {
		return errors.New("request body: data after the JSON document")
	}
	return nil
}

// etag returns the If-Match header if present, else the body's etag.
func etag(r *http.Request, body string) string {
	if h := strings.Trim(r.Header.Get("If-Match"), `"`); h != "" {
		return h
	}
	return body
}

func wantText(r *http.Request) bool { return r.URL.Query().Get("format") == "text" }

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	_, rev := s.store.RunningSystem()
	changed, err := s.store.CandidateChanged()
	if err != nil {
		s.fail(w, r, &internalError{fmt.Errorf("compare the candidate with the running configuration: %w", err)})
		return
	}
	localapi.WriteJSON(w, http.StatusOK, configdapi.Status{Revision: rev, Pending: s.store.Pending(), CandidateChanged: changed,
		Schema: config.SchemaVersion, Database: s.store.Path(), Storage: s.storage, Recovered: s.store.Recovered(), Note: s.note})
}

// runningSystem answers with the running configuration's system section
// alone (host name, accounts, time): what the web UI checks at every
// request, without a head office's thousand tunnels.
func (s *Server) runningSystem(w http.ResponseWriter, r *http.Request) {
	sys, rev := s.store.RunningSystem()
	w.Header().Set("X-Revision", strconv.FormatUint(rev, 10))
	if s.redact != nil {
		sys = s.redact.out(&config.Config{System: sys}).System
	}
	localapi.WriteJSON(w, http.StatusOK, configdapi.RunningSystemResponse{Revision: rev, System: sys})
}

func (s *Server) running(w http.ResponseWriter, r *http.Request) {
	c, rev := s.store.Running()
	w.Header().Set("X-Revision", strconv.FormatUint(rev, 10))
	if wantText(r) {
		writeText(w, c.Text())
		return
	}
	localapi.WriteJSON(w, http.StatusOK, configdapi.RunningResponse{Revision: rev, Config: s.outConfig(c)})
}

func (s *Server) candidate(w http.ResponseWriter, r *http.Request) {
	c, tag := s.store.Candidate()
	w.Header().Set("ETag", `"`+tag+`"`)
	if wantText(r) {
		writeText(w, c.Text())
		return
	}
	running, _ := s.store.Running()
	resp := configdapi.CandidateResponse{Etag: tag, Config: s.outConfig(c), Changed: len(config.ChangedSections(running, c)) > 0, Errors: []config.FieldError{}}
	var ve config.ValidationErrors
	if errors.As(c.Validate(), &ve) {
		resp.Errors = ve
	}
	localapi.WriteJSON(w, http.StatusOK, resp)
}

func (s *Server) edited(w http.ResponseWriter, r *http.Request, tag string, err error) {
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("ETag", `"`+tag+`"`)
	localapi.WriteJSON(w, http.StatusOK, configdapi.EtagResponse{Etag: tag})
}

func (s *Server) replaceCandidate(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDocumentBody))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	c, err := config.Decode(body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	tag, err := s.editIn(etag(r, ""), func(cand *config.Config) error { *cand = *c.Clone(); return nil })
	s.edited(w, r, tag, err)
}

func (s *Server) patchCandidate(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDocumentBody))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(body) > config.MaxDocumentSize {
		s.fail(w, r, fmt.Errorf("patch is %d bytes, more than the %d allowed", len(body), config.MaxDocumentSize))
		return
	}
	var tag string
	if s.redact == nil {
		tag, err = s.store.PatchCandidate(etag(r, ""), body)
	} else {
		tag, err = s.editIn(etag(r, ""), func(c *config.Config) error {
			// The patch applies to what this API shows: the marks.
			p, err := s.redact.out(c).MergePatch(body)
			if err != nil {
				return err
			}
			*c = *p
			return nil
		})
	}
	s.edited(w, r, tag, err)
}

func (s *Server) set(w http.ResponseWriter, r *http.Request) {
	var req configdapi.SetRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	tag, err := s.editIn(etag(r, req.Etag), func(c *config.Config) error {
		if s.redact != nil {
			*c = *s.redact.out(c) // the path and values refer to what this API shows
		}
		return c.Set(req.Path, req.Values...)
	})
	s.edited(w, r, tag, err)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	var req configdapi.DeleteRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	tag, err := s.editIn(etag(r, req.Etag), func(c *config.Config) error {
		if s.redact != nil {
			*c = *s.redact.out(c)
		}
		return c.Delete(req.Path)
	})
	s.edited(w, r, tag, err)
}

func (s *Server) discard(w http.ResponseWriter, r *http.Request) {
	s.edited(w, r, s.store.DiscardCandidate(), nil)
}

func (s *Server) password(w http.ResponseWriter, r *http.Request) {
	var req configdapi.PasswordRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	// Hash outside the store's lock: argon2id takes a while on a Geode.
	var a config.Admin
	if err := a.SetPassword(req.Password); err != nil {
		s.fail(w, r, &config.PathError{Path: "system.admins." + req.Admin + ".password_hash", Err: err})
		return
	}
	// Straight to the store: the new hash is no mark, and is meant.
	tag, err := s.store.EditCandidate(etag(r, req.Etag), func(c *config.Config) error {
		return c.Set("system.admins."+req.Admin+".password_hash", a.PasswordHash.Reveal())
	})
	s.edited(w, r, tag, err)
}

func (s *Server) validate(w http.ResponseWriter, r *http.Request) {
	c, _ := s.store.Candidate()
	var ve config.ValidationErrors
	errs := []config.FieldError{}
	if errors.As(c.Validate(), &ve) {
		errs = ve
	}
	localapi.WriteJSON(w, http.StatusOK, struct {
		Errors []config.FieldError `json:"errors"`
	}{errs})
}

// configAt resolves "running", "candidate" or a revision number.
func (s *Server) configAt(which string) (*config.Config, error) {
	switch which {
	case "running":
		c, _ := s.store.Running()
		return c, nil
	case "candidate":
		c, _ := s.store.Candidate()
		return c, nil
	}
	rev, err := strconv.ParseUint(which, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%q is not running, candidate or a revision number", which)
	}
	c, _, err := s.store.Revision(rev)
	return c, err
}

func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	from, to := r.URL.Query().Get("from"), r.URL.Query().Get("to")
	if from == "" {
		from = "running"
	}
	if to == "" {
		to = "candidate"
	}
	a, err := s.configAt(from)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	b, err := s.configAt(to)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if wantText(r) {
		writeText(w, config.DiffText(a, b))
		return
	}
	resp := configdapi.DiffResponse{From: from, To: to, Lines: []configdapi.DiffLine{}}
	for _, d := range config.Diff(a, b) {
		resp.Lines = append(resp.Lines, configdapi.DiffLine{Op: string(d.Op), Line: d.Line.String()})
	}
	localapi.WriteJSON(w, http.StatusOK, resp)
}

// who names the committer: what the caller says, or the peer's uid and pid
// from the socket when it says nothing.
func who(r *http.Request, said string) string {
	if said != "" {
		return said
	}
	if cred, ok := r.Context().Value(peerCredKey{}).(*unix.Ucred); ok {
		return fmt.Sprintf("uid %d (pid %d)", cred.Uid, cred.Pid)
	}
	return ""
}

func (s *Server) commit(w http.ResponseWriter, r *http.Request) {
	var req configdapi.CommitRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	o := config.CommitOptions{Who: who(r, req.Who), Message: req.Message, Etag: etag(r, req.Etag)}
	if req.ConfirmTimeout != "" {
		d, err := time.ParseDuration(req.ConfirmTimeout)
		if err != nil || d <= 0 || d > config.MaxConfirmWindow {
			s.fail(w, r, fmt.Errorf("confirm_timeout %q is not a duration like 5m (up to %v)", req.ConfirmTimeout, config.MaxConfirmWindow))
			return
		}
		o.ConfirmWithin = d
	}
	info, err := s.store.CommitWith(o)
	if err != nil {
		s.fail(w, r, storeErr(err))
		return
	}
	localapi.WriteJSON(w, http.StatusOK, info)
}

func (s *Server) confirm(w http.ResponseWriter, r *http.Request) {
	if err := s.store.Confirm(); err != nil {
		s.fail(w, r, storeErr(err))
		return
	}
	localapi.WriteJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) rollback(w http.ResponseWriter, r *http.Request) {
	var req configdapi.RollbackRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.store.Rollback(req.Revision, who(r, req.Who))
	if err != nil {
		s.fail(w, r, storeErr(err))
		return
	}
	localapi.WriteJSON(w, http.StatusOK, info)
}

// handOff: POST /v1/handoff, before the console reboots into the other
// slot's firmware. Only the full API (the console) may: the web UI has
// no "boot other slot".
func (s *Server) handOff(w http.ResponseWriter, r *http.Request) {
	if s.redact != nil {
		s.fail(w, r, fmt.Errorf("hand the database to the other slot: %w", errRestricted))
		return
	}
	var req configdapi.HandOffRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Schema <= 0 {
		s.fail(w, r, fmt.Errorf("schema %d: give the newest configuration schema the other firmware reads", req.Schema))
		return
	}
	resp, err := s.handOffTo(req.DBFormats, req.Schema)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	localapi.WriteJSON(w, http.StatusOK, resp)
}

// handOffTo makes the database one that firmware reading database
// formats and configuration schemas up to schema reads (see handOff).
func (s *Server) handOffTo(formats []int, schema int) (configdapi.HandOffResponse, error) {
	var resp configdapi.HandOffResponse
	switch {
	case config.ReadsDBFormat(formats):
		// It reads this database; the schema must do too.
		if schema < config.SchemaVersion {
			return resp, fmt.Errorf("the other firmware reads configurations up to schema %d, this one is %d: it could not read the running configuration", schema, config.SchemaVersion)
		}
		_, resp.Running.Revision = s.store.Running()
	case slices.Contains(formats, 2):
		if p := s.store.Pending(); p != nil { // the caller's to settle, not configd's failure
			return resp, fmt.Errorf("revision %d waits for confirmation: confirm it or let it roll back before switching firmware", p.Revision)
		}
		info, err := s.store.HandOff(schema)
		if err != nil {
			return resp, storeErr(err)
		}
		resp.Converted, resp.Running = true, info
		s.logf("configd: the database is in format 2 now for the firmware in the other slot (running revision %d); commits are refused until configd restarts", info.Revision)
	default:
		return resp, fmt.Errorf("the other firmware reads configuration database formats %v; this one writes %d and can write 2 only", formats, config.DBFormat)
	}
	return resp, nil
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	h, err := s.store.History()
	if err != nil {
		s.fail(w, r, &internalError{err})
		return
	}
	localapi.WriteJSON(w, http.StatusOK, h)
}

func (s *Server) revision(w http.ResponseWriter, r *http.Request) {
	rev, err := strconv.ParseUint(r.PathValue("rev"), 10, 64)
	if err != nil {
		s.fail(w, r, fmt.Errorf("%q is not a revision number", r.PathValue("rev")))
		return
	}
	c, info, err := s.store.Revision(rev)
	if err != nil {
		s.fail(w, r, storeErr(err))
		return
	}
	if wantText(r) {
		writeText(w, c.Text())
		return
	}
	localapi.WriteJSON(w, http.StatusOK, configdapi.RevisionResponse{Info: info, Config: s.outConfig(c)})
}

func (s *Server) export(w http.ResponseWriter, r *http.Request) {
	var req configdapi.ExportRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.redact != nil && req.Secrets == config.SecretsIncluded {
		s.fail(w, r, fmt.Errorf("export with secrets in the clear: %w (export them encrypted with a passphrase)", errRestricted))
		return
	}
	if req.Secrets != config.SecretsOmitted {
		if ok, err := s.reauthenticated(r); err != nil || !ok {
			s.fail(w, r, cmp.Or(err, errWrongPassword))
			return
		}
	}
	data, err := s.store.Export(req.Secrets, req.Passphrase)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}

func (s *Server) importBackup(w http.ResponseWriter, r *http.Request) {
	var req configdapi.ImportRequest
	if err := decodeBody(w, r, maxDocumentBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.Backup) == 0 {
		s.fail(w, r, errors.New("backup: missing"))
		return
	}
	tag, err := s.store.Import(etag(r, req.Etag), req.Backup, req.Passphrase)
	s.edited(w, r, tag, err)
}

func (s *Server) factoryReset(w http.ResponseWriter, r *http.Request) {
	var req configdapi.FactoryResetRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Confirm != "factory-reset" {
		s.fail(w, r, errors.New(`confirm must be "factory-reset"`))
		return
	}
	reset := s.store.FactoryReset
	if req.KeepSettings {
		reset = s.store.EraseSecrets
	}
	info, err := reset(who(r, req.Who))
	if err != nil {
		s.fail(w, r, storeErr(err))
		return
	}
	// The stored files are keys of this box's identity: a reset box must
	// not keep them. They go after the configuration, so that a failure
	// here (reported) never leaves the old configuration with new keys.
	if err := s.files.RemoveAll(); err != nil {
		s.fail(w, r, &internalError{fmt.Errorf("configuration reset, but %w", err)})
		return
	}
	localapi.WriteJSON(w, http.StatusOK, info)
}

// fileAllowed reports whether the restricted API may hand out or store
// name: only the web UI's own key and certificate.
func (s *Server) fileAllowed(name string) bool {
	return s.redact == nil || strings.HasPrefix(name, "webui.")
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	if !s.fileAllowed(r.PathValue("name")) {
		s.fail(w, r, fmt.Errorf("file %q: %w", r.PathValue("name"), errRestricted))
		return
	}
	data, err := s.files.Get(r.PathValue("name"))
	if err != nil {
		if !errors.Is(err, configdapi.ErrBadFileName) && !errors.Is(err, fs.ErrNotExist) {
			err = &internalError{err}
		}
		s.fail(w, r, err)
		return
	}
	defer clear(data) // most likely a private key
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Storage", s.storage)
	w.Write(data)
}

func (s *Server) putFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !s.fileAllowed(name) {
		s.fail(w, r, fmt.Errorf("file %q: %w", name, errRestricted))
		return
	}
	if !configdapi.ValidFileName(name) {
		s.fail(w, r, fmt.Errorf("file %q: %w", name, configdapi.ErrBadFileName))
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, configdapi.MaxFileSize))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer clear(data) // most likely a private key
	if err := s.files.Put(name, data); err != nil {
		s.fail(w, r, &internalError{err})
		return
	}
	info := configdapi.FileInfo{Name: name, Size: len(data), Storage: s.storage}
	if s.storage == "ram" {
		info.Note = "no config partition: the file is kept in RAM (" + s.files.Dir() + ") and lost on reboot"
	}
	localapi.WriteJSON(w, http.StatusOK, info)
}

// watch streams one JSON object per line: first the current revision with
// reason "current" and every section (a subscriber applies the whole config
// on connecting), then a config.Change after every change of the running
// config. The stream ends if the subscriber falls behind; it should then
// reconnect, which gives it the current state again.
func (s *Server) watch(w http.ResponseWriter, r *http.Request) {
	ch, cancel := s.store.Subscribe()
	defer cancel()
	_, rev := s.store.Running()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	send := func(c config.Change) bool {
		if err := enc.Encode(c); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if !send(config.Change{Revision: rev, Sections: config.Sections, Reason: "current", When: time.Now().UTC()}) {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		case c, ok := <-ch:
			if !ok || !send(c) {
				return
			}
		}
	}
}

type peerCredKey struct{}

// connContext records the peer's credentials of each unix socket
// connection, so that a commit without a "who" still says who made it.
func connContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) {
		cred, _ = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if cred == nil {
		return ctx
	}
	return context.WithValue(ctx, peerCredKey{}, cred)
}
