package webui

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/flashgate/flashgate/internal/localapi"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"

	"github.com/gorilla/mux"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/hwcrypto"
	"github.com/flashgate/flashgate/services/configd/configdapi"
	"github.com/flashgate/flashgate/services/netd/netdapi"
	"github.com/flashgate/flashgate/upgrade/imagefile"
)

//go:embed static
var staticFS embed.FS

// BoardInfo is what the dashboard says about the hardware and firmware.
type BoardInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     string `json:"version"`
	Kernel      string `json:"kernel"` // uname -r, e.g. 6.1.192-3-flashgate
}

// Options configure a Server. Config is required; the others may be nil
// and their parts of the UI then say what is missing.
type Options struct {
	Config     *configdapi.Client
	Tunnels    TunnelSource
	Supervisor Supervisor
	// Links is netd, which reports the box's links; without it the
	// pages say the interfaces could not be read.
	Links  LinkSource
	Crypto *hwcrypto.Report
	Board  BoardInfo
	// Root is where /proc is read ("/" on the box): uptime, CPU and
	// memory. The crypto engines' report (Crypto) is read by the caller.
	Root string
	// Fingerprint of the TLS certificate, shown on the System page.
	Fingerprint     string
	IdleTimeout     time.Duration // default DefaultIdleTimeout
	AbsoluteTimeout time.Duration // default DefaultAbsoluteTimeout
	Now             func() time.Time
	Logf            func(format string, args ...any)
	// Upgrade is the card's boot partition and the running firmware, for
	// firmware upgrades; without Open the upgrade routes say there is none.
	Upgrade UpgradeSource
}

// Server is the web UI: pages, the JSON API and their shared state.
type Server struct {
	opts      Options
	sessions  *sessionStore
	limiter   *loginLimiter
	sampler   *sampler
	router    *mux.Router
	handler   http.Handler
	verifySem chan struct{} // one argon2id at a time: each takes 19 MiB
	proposals proposalCatalog
	upgrade   upgradeState
	runCache  runningCache
}

// Upload and body limits.
const (
	maxFormBody   = 64 << 10
	maxUploadBody = config.MaxDocumentSize + 64<<10 // a backup plus the form around it
	// maxFirmwareBody bounds an upgrade file: a header and two parts.
	maxFirmwareBody = 2*imagefile.MaxPart + int64(imagefile.MaxHeader)
)

// New builds the server and its routes.
func New(opts Options) (*Server, error) {
	if opts.Config == nil {
		return nil, fmt.Errorf("webui: a configd client is required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Root == "" {
		opts.Root = "/"
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.AbsoluteTimeout <= 0 {
		opts.AbsoluteTimeout = DefaultAbsoluteTimeout
	}
	if opts.Logf == nil {
		opts.Logf = log.Printf
	}
	if opts.Tunnels == nil {
		opts.Tunnels = noTunnels{}
	}
	if opts.Links == nil {
		opts.Links = noLinks{}
	}
	s := &Server{
		opts:      opts,
		sessions:  newSessionStore(opts.IdleTimeout, opts.AbsoluteTimeout, opts.Now),
		limiter:   newLoginLimiter(opts.Now),
		sampler:   newSampler(opts.Tunnels, opts.Root, opts.Now),
		verifySem: make(chan struct{}, 1),
		proposals: newProposalCatalog(opts.Crypto),
	}
	// Nobody logged in: no page needs the running configuration's copy.
	s.sampler.onStop = s.runCache.clear
	s.router = s.routes()
	s.handler = securityHeaders(http.NewCrossOriginProtection().Handler(withSnapshot(s.checkHost(s.router))))
	return s, nil
}

// noLinks stands in when no link source is given.
type noLinks struct{}

func (noLinks) Links(context.Context) ([]netdapi.LinkStatus, error) {
	return nil, errors.New("no netd to ask")
}

// noTunnels stands in when no tunnel source is given.
type noTunnels struct{}

func (noTunnels) Tunnels(context.Context) ([]ipsec.TunnelStatus, error) {
	return nil, ikedapi.ErrNotRunning
}

func (noTunnels) Counters(context.Context) ([]ikedapi.TunnelCounters, error) {
	return nil, ikedapi.ErrNotRunning
}

// ServeHTTP serves the UI.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Router exposes the routes (tests walk them).
func (s *Server) Router() *mux.Router { return s.router }

// Run samples throughput while someone is logged in and follows
// configd's changes until ctx is done.
func (s *Server) Run(ctx context.Context) {
	go s.followAccounts(ctx)
	s.sampler.run(ctx, s.sessions.active)
}

// followAccounts ends stale sessions at every change of the running
// configuration. requireSession checks at each request too; this closes
// the gap where a password change and a rollback to the old password both
// happen between two requests of a stolen session, which the per-request
// check alone would then let through again.
func (s *Server) followAccounts(ctx context.Context) {
	for ch := range s.opts.Config.Watch(ctx) {
		s.runCache.clear()
		// The configuration of the change's own revision, not the running
		// one: by the time this runs, a rollback may already have brought
		// the old password back, and a stolen session would survive.
		running, _, err := s.opts.Config.Revision(ctx, ch.Revision)
		if err != nil || ch.Reason == "current" {
			running, _, err = s.opts.Config.Running(ctx)
		}
		if err != nil {
			continue // every request checks again; the next change retries
		}
		if n := s.sessions.endStale(running); n > 0 {
			s.opts.Logf("configuration change ended %d session(s) whose account's password changed or is gone", n)
		}
	}
}

// What a protected route answers without a session or token: pages
// redirect to the login page and show an error page, the API and the live
// fragments answer with a status and JSON.
type routeClass int

const (
	classPage routeClass = iota
	classAPI
	classLive // like classAPI, but does not count as activity
)

func (s *Server) routes() *mux.Router {
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(s.notFound)
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	})

	static, _ := fs.Sub(staticFS, "static")
	r.PathPrefix("/static/").Handler(staticHandler(static)).Methods("GET", "HEAD")
	r.HandleFunc("/login", s.loginPage).Methods("GET")
	r.HandleFunc("/login", s.loginSubmit).Methods("POST")
	r.HandleFunc("/api/v1/login", s.apiLogin).Methods("POST")

	api := r.PathPrefix("/api/v1").Subrouter()
	api.Use(s.requireSession(classAPI), s.requireCSRF(classAPI))
	s.apiRoutes(api)

	live := r.PathPrefix("/live").Subrouter()
	live.Use(s.requireSession(classLive))
	live.HandleFunc("/dashboard", s.liveDashboard).Methods("GET")
	live.HandleFunc("/tunnels", s.liveTunnels).Methods("GET")
	live.HandleFunc("/tunnels/{name}", s.liveTunnel).Methods("GET")
	live.HandleFunc("/logs/{service}", s.liveLogs).Methods("GET")

	pages := r.PathPrefix("/").Subrouter()
	pages.Use(s.requireSession(classPage), s.requireCSRF(classPage))
	s.pageRoutes(pages)
	return r
}

func (s *Server) pageRoutes(r *mux.Router) {
	page := func(path, method string, h http.HandlerFunc) {
		r.HandleFunc(path, h).Methods(method)
	}
	page("/", "GET", s.dashboardPage)
	page("/logout", "POST", s.logout)

	// Each kind's forms; before the tunnel detail route, which would
	// otherwise take /tunnels/new for a tunnel called "new".
	page("/tunnels", "GET", s.tunnelsPage)
	page("/tunnels/import", "GET", s.importPage)
	page("/tunnels/import", "POST", s.importSubmit)
	page("/firewall", "GET", s.firewallPage)
	page("/routes", "GET", s.routesPage)
	page("/interfaces", "GET", s.interfacesPage)
	for _, k := range []*kind{kindTunnels, kindRules, kindForwards, kindMasquerade, kindExemptions, kindRoutes, kindInterfaces} {
		page(k.Base+"/new", "GET", s.elementNewPage(k))
		page(k.Base+"/new", "POST", s.elementCreate(k))
		page(k.Base+"/{name}/edit", "GET", s.elementEditPage(k))
		page(k.Base+"/{name}/edit", "POST", s.elementUpdate(k))
		page(k.Base+"/{name}/delete", "POST", s.elementDelete(k))
	}
	page("/tunnels/{name}", "GET", s.tunnelDetailPage)
	page("/tunnels/{name}/up", "POST", s.tunnelActionPage("up"))
	page("/tunnels/{name}/down", "POST", s.tunnelActionPage("down"))
	page("/firewall/rules/{name}/move", "POST", s.ruleMove)

	page("/certificates", "GET", s.certificatesPage)
	page("/certificates/ca", "POST", s.certCreateCA)
	page("/certificates/issue", "POST", s.certIssue)
	page("/certificates/import", "POST", s.certImport)
	page("/certificates/{name}/revoke", "POST", s.certRevoke)
	page("/certificates/{name}/delete", "POST", s.certDelete)
	page("/certificates/{name}/cert", "POST", s.certDownload("cert"))
	page("/certificates/{name}/crl", "POST", s.certDownload("crl"))

	page("/system", "GET", s.systemPage)
	page("/system/settings", "POST", s.systemSettings)
	page("/system/password", "POST", s.passwordChange)
	page("/system/backup", "POST", s.backupDownload)
	page("/system/restore", "POST", s.restoreUpload)
	page("/system/factory-reset", "POST", s.factoryReset)
	page("/system/reboot", "POST", s.reboot)

	page("/logs", "GET", s.logsPage)
	page("/logs/{service}", "GET", s.logsPage)

	page("/changes", "GET", s.changesPage)
	page("/changes/commit", "POST", s.commit)
	page("/changes/confirm", "POST", s.confirm)
	page("/changes/discard", "POST", s.discard)
	page("/changes/rollback/{rev:[0-9]+}", "POST", s.rollback)
}

// clientIP is the peer address without the port: the rate limit key. No
// proxy headers are trusted: nothing sits in front of the box's UI.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

type ctxKey int

const sessionKey ctxKey = iota

type authed struct {
	id   string
	sess *session
	addr string // the client's address (clientIP)
}

func sessionOf(r *http.Request) *session {
	if a, ok := r.Context().Value(sessionKey).(authed); ok {
		return a.sess
	}
	return nil
}

func sessionID(r *http.Request) string {
	if a, ok := r.Context().Value(sessionKey).(authed); ok {
		return a.id
	}
	return ""
}

// requireSession lets a request through only with a live session. Pages
// without one are sent to the login page (which brings them back); API
// and live requests get 401, so scripts and fetch see the real status.
func (s *Server) requireSession(class routeClass) mux.MiddlewareFunc {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := r.Cookie(sessionCookie)
			var sess *session
			ok := false
			switch {
			case err != nil:
			case class == classLive:
				sess, ok = s.sessions.peek(c.Value)
			default:
				sess, ok = s.sessions.lookup(c.Value)
			}
			if ok {
				// The account must still be what it was at login. When
				// configd does not answer, nothing can have changed the
				// account since followAccounts last checked, and the
				// pages that do not need configd (logs, status, reboot)
				// must stay usable to find out why: the session goes on.
				sys, err := s.runningSystem(r.Context())
				if k, known := accountIn(sys, sess.User); err == nil && (!known || subtle.ConstantTimeCompare(k[:], sess.Account[:]) != 1) {
					s.sessions.delete(c.Value)
					s.opts.Logf("session of %q from %s ended: the account's password changed or the account is gone", sess.User, clientIP(r))
					ok = false
				}
			}
			if !ok {
				if class == classPage {
					next := "/"
					if p := r.URL.EscapedPath(); r.Method == http.MethodGet && safeNext(p) {
						next = p
					}
					http.Redirect(w, r, "/login?next="+urlQueryEscape(next), http.StatusSeeOther)
					return
				}
				localapi.WriteError(w, http.StatusUnauthorized, "not logged in, or the session expired")
				return
			}
			s.sampler.wake() // someone looks: the graphs need samples
			ctx := context.WithValue(r.Context(), sessionKey, authed{id: c.Value, sess: sess, addr: clientIP(r)})
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// requireCSRF checks the session's token on every request that may change
// something. Pages send it as a hidden form field or a header, the API as
// the X-CSRF-Token header only. The body size is bounded here too, before
// any form parsing reads it.
func (s *Server) requireCSRF(class routeClass) mux.MiddlewareFunc {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.Method {
			case http.MethodGet, http.MethodHead:
				next.ServeHTTP(w, r)
				return
			}
			limit := int64(maxFormBody)
			switch {
			case strings.HasSuffix(r.URL.Path, "/restore"):
				limit = maxUploadBody
			case r.URL.Path == "/tunnels/import":
				limit = maxImportBody
			case r.URL.Path == "/api/v1/upgrade" && class == classAPI:
				// A firmware file, streamed into the slot, never
				// held; the handler bounds it by its manifest.
				limit = maxFirmwareBody
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			sess := sessionOf(r)
			token := r.Header.Get(csrfHeader)
			if token == "" && class == classPage {
				if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
					if err := r.ParseMultipartForm(1 << 20); err != nil {
						http.Error(w, "upload too large or malformed: "+err.Error(), http.StatusRequestEntityTooLarge)
						return
					}
				}
				token = r.PostFormValue(csrfField)
			}
			if sess == nil || !tokensEqual(token, sess.CSRF) {
				if class == classPage {
					http.Error(w, "the form expired or did not come from this page (CSRF token missing or wrong); reload the page and try again", http.StatusForbidden)
					return
				}
				localapi.WriteError(w, http.StatusForbidden, "missing or wrong X-CSRF-Token header")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// securityHeaders sets what every response needs: no framing, no
// sniffing, scripts and styles from the box only, no caching of pages
// that carry configuration. No HSTS: with a self-signed certificate it
// would make a certificate change impossible to click through.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "+
			"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if !strings.HasPrefix(r.URL.Path, "/static/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

func staticHandler(root fs.FS) http.Handler {
	files := http.StripPrefix("/static/", http.FileServerFS(root))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no directory listings
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=86400")
		files.ServeHTTP(w, r)
	})
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		localapi.WriteError(w, http.StatusNotFound, "no such API route")
		return
	}
	http.Error(w, "page not found", http.StatusNotFound)
}

// APIError is the body of every API error. Fields maps form field names to
// their problem, for validation errors.
type APIError struct {
	Error  string            `json:"error"`
	Fields map[string]string `json:"fields,omitempty"`
}
