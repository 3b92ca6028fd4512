package configd

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/flashgate/flashgate/internal/localapi"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/config"
)

// The restricted API is what the web UI gets (configdapi.WebSocket): the same
// routes, but no secret ever leaves configd through it.
//
//   - Configurations come with every secret replaced by a redaction mark:
//     a PSK by "redacted:" and a digest keyed with a random key of this
//     configd start (so that it says nothing about the key), a password
//     hash by a PHC string of its digest that no password matches
//     (argon2id with m=1, and a key that is the digest). A mark changes
//     when its secret changes, so the web UI can still tell that a
//     password changed (it ends the sessions of the old one).
//   - A configuration sent back may carry marks: each is replaced by the
//     secret it stands for in the candidate or the running configuration
//     (a renamed tunnel keeps its key). A mark that stands for nothing is
//     refused, and so is a password hash that is not a mark: passwords
//     are set through POST /v1/candidate/password.
//   - Export with secrets in the clear is refused (encrypted or none only);
//     files other than the web UI's own (webui.*) are refused.
//   - POST /v1/verify-password checks a password in configd, so the web UI
//     never needs a hash.
//   - A factory reset, an import, an export with secrets and a firmware
//     install need an admin's current password in the request
//     (ReauthUserHeader, ReauthPasswordHeader), checked here.

// Restricted makes NewServer serve the restricted API.
func Restricted() ServerOption {
	return func(s *Server) {
		s.redact = newRedactor()
	}
}

// redactor makes and resolves redaction marks.
type redactor struct {
	once sync.Once
	key  [32]byte
}

// newRedactor returns a redactor whose key is drawn at its first use, not
// here: early in a boot getrandom blocks until the kernel's random pool is
// ready (about a second on the emulated qemu board), and configd tells the
// supervisor it is ready, which the console's login prompt waits for,
// only once all its APIs are built (issue 17).
func newRedactor() *redactor {
	return &redactor{}
}

func (r *redactor) digest(kind, secret string) []byte {
	r.once.Do(func() {
		if _, err := rand.Read(r.key[:]); err != nil {
			panic("configd: no randomness: " + err.Error()) // crypto/rand does not fail on Linux ≥ 3.17
		}
	})
	m := hmac.New(sha256.New, r.key[:])
	m.Write([]byte(kind))
	m.Write([]byte{0})
	m.Write([]byte(secret))
	return m.Sum(nil)
}

func (r *redactor) pskMark(psk string) string {
	return configdapi.PSKMarkPrefix + base64.RawURLEncoding.EncodeToString(r.digest("psk", psk))
}

// hashMark is a valid argon2id PHC string (so that the web UI's own
// validation of a configuration passes) that no password matches. Unlike
// a PSK's mark it is not keyed, so it stays the same across configd
// restarts and a restart does not end the web sessions bound to it: a
// digest of an argon2id hash, whose salt and key are random, helps nobody
// guess the password.
func (r *redactor) hashMark(hash string) string {
	d := sha256.Sum256([]byte("flashgate password hash mark\x00" + hash))
	enc := base64.RawStdEncoding
	return "$argon2id$v=19$m=1,t=1,p=1$" + enc.EncodeToString(d[:16]) + "$" + enc.EncodeToString(d[:])
}

// out is c with every secret replaced by its mark (a copy; c is not
// changed). Empty secrets stay empty.
func (r *redactor) out(c *config.Config) *config.Config {
	if c == nil {
		return nil
	}
	o := c.Clone()
	for i := range o.Tunnels {
		if p := o.Tunnels[i].PSK.Reveal(); p != "" {
			o.Tunnels[i].PSK = config.NewSecret(r.pskMark(p))
		}
	}
	for i := range o.System.Admins {
		if h := o.System.Admins[i].PasswordHash.Reveal(); h != "" {
			o.System.Admins[i].PasswordHash = config.NewSecret(r.hashMark(h))
		}
	}
	for i := range o.Certificates {
		if k := o.Certificates[i].Key.Reveal(); k != "" {
			o.Certificates[i].Key = config.NewSecret(r.keyMark(k))
		}
	}
	return o
}

// in replaces the marks in c by the secrets they stand for in the known
// configurations, in place. It refuses marks that stand for nothing and
// password hashes that are not marks.
func (r *redactor) in(c *config.Config, known ...*config.Config) error {
	psks, hashes, keys := map[string]string{}, map[string]string{}, map[string]string{}
	for _, k := range known {
		if k == nil {
			continue
		}
		for _, e := range k.Certificates {
			if p := e.Key.Reveal(); p != "" {
				keys[r.keyMark(p)] = p
			}
		}
		for _, t := range k.Tunnels {
			if p := t.PSK.Reveal(); p != "" {
				psks[r.pskMark(p)] = p
			}
		}
		for _, a := range k.System.Admins {
			if h := a.PasswordHash.Reveal(); h != "" {
				hashes[r.hashMark(h)] = h
			}
		}
	}
	var errs config.ValidationErrors
	for i := range c.Tunnels {
		t := &c.Tunnels[i]
		p := t.PSK.Reveal()
		if !strings.HasPrefix(p, configdapi.PSKMarkPrefix) {
			continue // a new key, or none
		}
		real, ok := psks[p]
		if !ok {
			errs = append(errs, config.FieldError{Path: fmt.Sprintf("tunnels[%s].psk", t.Name),
				Message: "the redacted pre-shared key stands for no key any more: enter the key again"})
			continue
		}
		t.PSK = config.NewSecret(real)
	}
	for i := range c.System.Admins {
		a := &c.System.Admins[i]
		h := a.PasswordHash.Reveal()
		if h == "" {
			continue
		}
		real, ok := hashes[h]
		if !ok {
			errs = append(errs, config.FieldError{Path: fmt.Sprintf("system.admins[%s].password_hash", a.Name),
				Message: "password hashes cannot be set here: set the password (POST /v1/candidate/password)"})
			continue
		}
		a.PasswordHash = config.NewSecret(real)
	}
	for i := range c.Certificates {
		e := &c.Certificates[i]
		k := e.Key.Reveal()
		if !strings.HasPrefix(k, configdapi.PSKMarkPrefix) {
			continue // none, or a key the web UI sends in (it never gets one out)
		}
		real, ok := keys[k]
		if !ok {
			errs = append(errs, config.FieldError{Path: fmt.Sprintf("certificates[%s].key", e.Name),
				Message: "the redacted private key stands for no key any more: import the certificate and key again"})
			continue
		}
		e.Key = config.NewSecret(real)
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// keyMark stands for a certificate's private key on the restricted API.
func (r *redactor) keyMark(key string) string {
	return configdapi.PSKMarkPrefix + base64.RawURLEncoding.EncodeToString(r.digest("key", key))
}

// known is what marks may stand for: the candidate's and the running
// configuration's secrets.
func (s *Server) known() []*config.Config {
	cand, _ := s.store.Candidate()
	running, _ := s.store.Running()
	return []*config.Config{cand, running}
}

// outConfig is c as this server may show it.
func (s *Server) outConfig(c *config.Config) *config.Config {
	if s.redact == nil {
		return c
	}
	return s.redact.out(c)
}

// editIn wraps an edit of the restricted API: after fn, the marks in the
// candidate are resolved (and anything unresolvable refuses the edit).
func (s *Server) editIn(etag string, fn func(*config.Config) error) (string, error) {
	if s.redact == nil {
		return s.store.EditCandidate(etag, fn)
	}
	known := s.known()
	return s.store.EditCandidate(etag, func(c *config.Config) error {
		if err := fn(c); err != nil {
			return err
		}
		return s.redact.in(c, known...)
	})
}

// errRestricted is what the restricted API answers for secrets.
var errRestricted = errors.New("not available on the web UI's configd socket: it hands out no secrets")

func (s *Server) verifyPassword(w http.ResponseWriter, r *http.Request) {
	var req configdapi.VerifyPasswordRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	ok, err := s.passwordOK(r.Context(), req.User, req.Password)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	localapi.WriteJSON(w, http.StatusOK, configdapi.VerifyPasswordResponse{OK: ok})
}

// passwordOK checks a password against the running configuration's
// account, one argon2id at a time, with the same work for an unknown user.
func (s *Server) passwordOK(ctx context.Context, user, password string) (bool, error) {
	running, _ := s.store.Running()
	admin := running.Admin(user)
	known := admin != nil && admin.PasswordHash.IsSet() && len(password) <= config.MaxPasswordLen
	check := admin
	if !known {
		check = &config.Admin{PasswordHash: config.NewSecret(s.decoy())}
	}
	select {
	case s.verifySem <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	ok := check.VerifyPassword(password)
	<-s.verifySem
	return ok && known, nil
}

// errWrongPassword is that refusal.
var errWrongPassword = errors.New("the current password of an admin is needed for this, and it is missing or wrong")

// reauthenticated reports whether the request carries an admin's current
// password; on the full API every request does (root's socket).
func (s *Server) reauthenticated(r *http.Request) (bool, error) {
	if s.redact == nil {
		return true, nil
	}
	user := r.Header.Get(configdapi.ReauthUserHeader)
	password, err := url.PathUnescape(r.Header.Get(configdapi.ReauthPasswordHeader))
	if user == "" || password == "" || err != nil {
		return false, nil
	}
	return s.passwordOK(r.Context(), user, password)
}

// requirePassword wraps a handler of the restricted API that needs
// re-authentication.
func (s *Server) requirePassword(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ok, err := s.reauthenticated(r)
		switch {
		case err != nil:
			s.fail(w, r, err)
		case !ok:
			s.fail(w, r, errWrongPassword)
		default:
			h(w, r)
		}
	}
}

// decoy is a hash with the parameters of ours that no password matches,
// for unknown users: the check costs what a real one does.
func (s *Server) decoy() string {
	s.decoyOnce.Do(func() {
		var pw [32]byte
		rand.Read(pw[:])
		h, err := config.HashPassword(base64.RawStdEncoding.EncodeToString(pw[:])[:config.MaxPasswordLen/2])
		if err == nil {
			s.decoyHash = h
		}
	})
	return s.decoyHash
}
