package webui

import (
	"github.com/flashgate/flashgate/webui/markup"

	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/flashgate/flashgate/internal/localapi"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd/configdapi"
)

// Accounts are the running configuration's system.admins: a password
// counts once it is committed. There is no default password: on a fresh
// box the console asks for one before anything else, and until then the
// login page says so.

// loginResult is what a login attempt came to; every failure reads the
// same to the client, so that neither the user name nor the password is
// confirmed separately.
type loginResult int

const (
	loginOK loginResult = iota
	loginWrong
	loginNoAdmin
	loginLimited
	loginUnavailable
)

const wrongLogin = "Wrong user name or password."

// authenticate checks a user name and password for a login.
func (s *Server) authenticate(ctx context.Context, addr, user, password string) (loginResult, time.Duration, [32]byte, error) {
	return s.checkPassword(ctx, "login", addr, user, password)
}

// checkPassword checks a user name and password against the running
// configuration, under the per-client rate limit and the one-at-a-time
// argon2 section, and logs the outcome as what ("login", "password
// change"). On success it also returns the account's key for the session.
func (s *Server) checkPassword(ctx context.Context, what, addr, user, password string) (loginResult, time.Duration, [32]byte, error) {
	var account [32]byte
	if ok, wait := s.limiter.allow(addr); !ok {
		// Not logged: the lockout's start was, and a client hammering
		// during it would flush the log ring.
		return loginLimited, wait, account, nil
	}
	running, _, err := s.running(ctx)
	if err != nil {
		return loginUnavailable, 0, account, err
	}
	if len(running.System.Admins) == 0 {
		return loginNoAdmin, 0, account, nil
	}
	admin := running.Admin(user)
	isUser := admin != nil
	select {
	case s.verifySem <- struct{}{}:
	case <-ctx.Done():
		return loginUnavailable, 0, account, ctx.Err()
	}
	if d := s.limiter.slowdown(); d > 0 {
		// Failures from many clients: one check at a time, and slowly.
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			<-s.verifySem
			return loginUnavailable, 0, account, ctx.Err()
		}
	}
	// configd checks the password: the web UI gets no password hashes
	// (its configd socket shows them redacted), and configd does the
	// same work for an unknown user as for a known one.
	ok, err := s.opts.Config.VerifyPassword(ctx, user, password)
	<-s.verifySem
	if err != nil {
		return loginUnavailable, 0, account, err
	}
	known := isUser
	// The user name is logged only when it names an account: an unknown
	// one may be a password typed into the wrong field.
	who := fmt.Sprintf("%q", user)
	if !isUser {
		who = "an unknown user"
	}
	if !ok || !known {
		if wait := s.limiter.failure(addr); wait > 0 {
			s.opts.Logf("%s of %s from %s failed; the address is locked out for %s", what, who, addr, wait.Round(time.Second))
			return loginLimited, wait, account, nil
		}
		s.opts.Logf("%s of %s from %s failed: wrong password", what, who, addr)
		return loginWrong, 0, account, nil
	}
	s.limiter.success(addr)
	s.opts.Logf("%s of %s from %s", what, who, addr)
	return loginOK, 0, accountKey(user, admin.PasswordHash), nil
}

type loginView struct {
	NoAdmin bool
	Error   string
	User    string
	Next    string
	Token   string
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if _, ok := s.sessions.lookup(c.Value); ok {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
	}
	v := loginView{Next: r.URL.Query().Get("next")}
	if !safeNext(v.Next) {
		v.Next = "/"
	}
	sys, err := s.runningSystem(r.Context())
	switch {
	case err != nil:
		v.Error = "The configuration service is not answering: " + err.Error()
	case len(sys.Admins) == 0:
		v.NoAdmin = true
	}
	s.renderLogin(w, r, http.StatusOK, v)
}

// renderLogin shows the login form with a fresh login CSRF token: a
// random value in a cookie that the form must echo (double submit), so a
// foreign page cannot log the browser into an account of its choosing.
func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, code int, v loginView) {
	v.Token = randomToken()
	setCookie(w, loginCookie, v.Token, 600)
	s.renderBare(w, code, "login", func(p *markup.Writer) { loginPage(p, v) })
}

func (s *Server) loginSubmit(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	v := loginView{User: r.PostFormValue("user"), Next: r.PostFormValue("next")}
	if !safeNext(v.Next) {
		v.Next = "/"
	}
	c, err := r.Cookie(loginCookie)
	if err != nil || !tokensEqual(c.Value, r.PostFormValue(csrfField)) {
		v.Error = "The login form expired; please try again."
		s.renderLogin(w, r, http.StatusForbidden, v)
		return
	}
	res, wait, account, err := s.authenticate(r.Context(), clientIP(r), v.User, r.PostFormValue("password"))
	switch res {
	case loginOK:
		id, _ := s.sessions.create(v.User, account)
		setCookie(w, sessionCookie, id, 0)
		setCookie(w, loginCookie, "", -1)
		http.Redirect(w, r, v.Next, http.StatusSeeOther)
		return
	case loginNoAdmin:
		v.NoAdmin = true
		s.renderLogin(w, r, http.StatusForbidden, v)
	case loginLimited:
		w.Header().Set("Retry-After", fmt.Sprint(int(wait.Seconds())+1))
		v.Error = fmt.Sprintf("Too many failed logins from your address. Try again in %s.", roundWait(wait))
		s.renderLogin(w, r, http.StatusTooManyRequests, v)
	case loginUnavailable:
		v.Error = "The configuration service is not answering: " + err.Error()
		s.renderLogin(w, r, http.StatusServiceUnavailable, v)
	default:
		v.Error = wrongLogin
		s.renderLogin(w, r, http.StatusUnauthorized, v)
	}
}

func roundWait(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%d seconds", int(d.Seconds())+1)
	}
	return fmt.Sprintf("%d minutes", int(d.Minutes())+1)
}

// LoginRequest is the body of POST /api/v1/login.
type LoginRequest struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// SessionInfo answers a login and GET /api/v1/session.
type SessionInfo struct {
	User      string    `json:"user"`
	CSRFToken string    `json:"csrf_token"` // send as X-CSRF-Token on every POST, PUT, DELETE
	Created   time.Time `json:"created"`
	IdleLimit string    `json:"idle_limit"`
	Limit     string    `json:"absolute_limit"`
}

// apiLogin logs in with JSON. Requiring a JSON body is its CSRF defence: a
// foreign page cannot send one without a CORS preflight, which is refused.
func (s *Server) apiLogin(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		localapi.WriteError(w, http.StatusUnsupportedMediaType, "send the credentials as application/json")
		return
	}
	var req LoginRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		localapi.WriteError(w, http.StatusBadRequest, "login body: "+err.Error())
		return
	}
	res, wait, account, err := s.authenticate(r.Context(), clientIP(r), req.User, req.Password)
	switch res {
	case loginOK:
		id, sess := s.sessions.create(req.User, account)
		setCookie(w, sessionCookie, id, 0)
		localapi.WriteJSON(w, http.StatusOK, s.sessionInfo(sess))
	case loginNoAdmin:
		localapi.WriteError(w, http.StatusForbidden, "no admin password is set: set it on the serial console first")
	case loginLimited:
		w.Header().Set("Retry-After", fmt.Sprint(int(wait.Seconds())+1))
		localapi.WriteError(w, http.StatusTooManyRequests, "too many failed logins from your address; try again in "+roundWait(wait))
	case loginUnavailable:
		localapi.WriteError(w, http.StatusServiceUnavailable, "configuration service: "+err.Error())
	default:
		localapi.WriteError(w, http.StatusUnauthorized, wrongLogin)
	}
}

func (s *Server) sessionInfo(sess *session) SessionInfo {
	return SessionInfo{User: sess.User, CSRFToken: sess.CSRF, Created: sess.Created,
		IdleLimit: s.opts.IdleTimeout.String(), Limit: s.opts.AbsoluteTimeout.String()}
}

func (s *Server) apiSession(w http.ResponseWriter, r *http.Request) {
	localapi.WriteJSON(w, http.StatusOK, s.sessionInfo(sessionOf(r)))
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	s.sessions.delete(sessionID(r))
	setCookie(w, sessionCookie, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (s *Server) apiLogout(w http.ResponseWriter, r *http.Request) {
	s.sessions.delete(sessionID(r))
	setCookie(w, sessionCookie, "", -1)
	localapi.WriteJSON(w, http.StatusOK, map[string]string{"result": "logged out"})
}

// safeNext accepts only local paths as the place to return to after
// login, so the login page cannot be used as an open redirect.
// Browsers parse a Location with the WHATWG URL rules, which drop TAB, CR
// and LF anywhere and take a backslash for a slash: "/\t/evil.example" is
// "//evil.example", another host. So p must be plain printable ASCII
// (anything else arrives percent-encoded from a real link), parse with
// net/url as a path alone (no scheme, no host, no user), and start with
// exactly one slash.
func safeNext(p string) bool {
	if len(p) == 0 || len(p) > 2048 || p[0] != '/' || strings.HasPrefix(p, "//") {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return false
		}
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return false
	}
	return !strings.HasPrefix(u.Path, "/login") && !strings.HasPrefix(u.Path, "/api/") && !strings.HasPrefix(u.Path, "/live/")
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// passwordChange is used by the System page and the API: the current
// password must be given again, the new one is hashed by configd into the
// candidate, and committed at once when nothing else is pending (a
// password that waits in the candidate surprises people).
func (s *Server) changePassword(ctx context.Context, user, current, next, repeat string) (string, map[string]string) {
	errs := map[string]string{}
	// The current password is checked like a login: rate limited per
	// client and one argon2 at a time, or a stolen session could guess
	// it at the speed of the CPU and run the box out of memory.
	var addr string
	if a, ok := ctx.Value(sessionKey).(authed); ok {
		addr = a.addr
	}
	switch res, wait, _, err := s.checkPassword(ctx, "password change", addr, user, current); res {
	case loginOK:
	case loginLimited:
		return "", map[string]string{"current": fmt.Sprintf("Too many wrong passwords from your address. Try again in %s.", roundWait(wait))}
	case loginUnavailable:
		return "", map[string]string{"": "The configuration service is not answering: " + err.Error()}
	default:
		errs["current"] = "This is not your current password."
	}
	switch {
	case len(next) < config.MinPasswordLen:
		errs["new"] = fmt.Sprintf("At least %d characters.", config.MinPasswordLen)
	case len(next) > config.MaxPasswordLen:
		errs["new"] = fmt.Sprintf("At most %d bytes.", config.MaxPasswordLen)
	}
	if next != repeat {
		errs["repeat"] = "The two new passwords differ."
	}
	if len(errs) > 0 {
		return "", errs
	}
	cand, err := s.candidate(ctx)
	if err != nil {
		return "", map[string]string{"": err.Error()}
	}
	tag, err := s.opts.Config.SetPassword(ctx, cand.Etag, user, next)
	if err != nil {
		return "", map[string]string{"": err.Error()}
	}
	if cand.Changed {
		return "The new password is in the pending changes; commit them to use it.", nil
	}
	// Commit naming the etag: if someone edited the candidate in between,
	// their half-done change is not committed with the password.
	req := commitRequest(user, "password of "+user+" changed", 0)
	req.Etag = tag
	if _, err := s.opts.Config.Commit(ctx, req); err != nil {
		return "The new password is in the pending changes (" + err.Error() + "); commit them to use it.", nil
	}
	// This session stays (the caller ends the account's others); it now
	// belongs to the new password.
	if fresh, _, err := s.opts.Config.Running(ctx); err == nil {
		if k, ok := accountOf(fresh, user); ok {
			if a, isAuthed := ctx.Value(sessionKey).(authed); isAuthed {
				s.sessions.rebind(a.id, k)
			}
		}
	}
	return "Password changed.", nil
}

// Re-authentication: the actions that hand out or replace everything, or
// replace the firmware (a backup with secrets, restore, factory reset,
// firmware upgrade), need the current password again, so that a session
// left open in a browser, or stolen, is not enough for them. The password
// is checked as a login's (checkPassword): a wrong one counts against the
// client's login rate limit and is logged with the action's name.

// reauthHeader carries the current password on API calls whose body is
// not a form or JSON object (the firmware upload); the others take it in
// their "password" field, or in this header. Its value is the password
// percent-encoded as UTF-8 (JavaScript's encodeURIComponent, Go's
// url.PathEscape): a header holds ASCII only.
const reauthHeader = "X-Flashgate-Password"

// reauth checks password (or the one in reauthHeader) as the session's
// user's current password and returns configd's client carrying it for
// the action (configd's restricted API checks it again, so that a web UI
// taken over cannot act without it), or why it is refused, with the HTTP
// status for the refusal.
func (s *Server) reauth(r *http.Request, what, password string) (*configdapi.Client, string, int) {
	password, msg, status := s.reauthPassword(r, what, password)
	if msg != "" {
		return nil, msg, status
	}
	return s.opts.Config.WithPassword(sessionOf(r).User, password), "", 0
}

// reauthPassword is reauth's check; it returns the password checked.
func (s *Server) reauthPassword(r *http.Request, what, password string) (string, string, int) {
	if password == "" {
		if h := r.Header.Get(reauthHeader); h != "" {
			if p, err := url.PathUnescape(h); err == nil {
				password = p
			} else {
				password = h
			}
		}
	}
	if password == "" {
		return "", "Enter your current password to confirm the " + what + ".", http.StatusUnauthorized
	}
	var addr string
	if a, ok := r.Context().Value(sessionKey).(authed); ok {
		addr = a.addr
	}
	switch res, wait, _, err := s.checkPassword(r.Context(), what, addr, sessionOf(r).User, password); res {
	case loginOK:
		return password, "", 0
	case loginLimited:
		return "", fmt.Sprintf("Too many wrong passwords from your address. Try again in %s.", roundWait(wait)), http.StatusTooManyRequests
	case loginUnavailable:
		return "", "The configuration service is not answering: " + err.Error(), http.StatusBadGateway
	default:
		return "", "Wrong password: the " + what + " needs your current password. Nothing was changed.", http.StatusForbidden
	}
}

// reauthorized is reauth for the JSON API: a refusal is answered, and
// the client is nil.
func (s *Server) reauthorized(w http.ResponseWriter, r *http.Request, what, password string) *configdapi.Client {
	cfg, msg, status := s.reauth(r, what, password)
	if msg != "" {
		localapi.WriteError(w, status, msg)
	}
	return cfg
}
