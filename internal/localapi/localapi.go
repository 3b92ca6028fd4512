// Package localapi is the HTTP side of the appliance's local APIs: JSON
// over unix sockets under paths.RunDir (docs/architecture.md). Each
// service binds its socket with Listen, serves its handler with Serve and
// answers with WriteJSON and WriteError; its contract package's Client
// reaches it through NewTransport. The socket rules (a live socket is
// never taken over, a stale one is replaced, the mode is set before
// anyone else can connect) are internal/localsock's.
package localapi

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/flashgate/flashgate/internal/localsock"
)

// Access says who may connect to a socket besides root; see
// localsock.Access.
type Access = localsock.Access

// RootOnly is the access of a socket only root may use (0600).
var RootOnly = localsock.RootOnly

// Group is the access of a socket root and the members of gid may use
// (0660); gid -1 means root's group.
func Group(gid int) Access { return localsock.Group(gid) }

// Listen binds the unix socket at path with access a: see
// localsock.Listen (a socket that still answers is refused, a stale one
// replaced).
func Listen(path string, a Access) (net.Listener, error) { return localsock.Listen(path, a) }

// Serve serves h on ln until ctx ends, then closes the server (open
// streams such as configd's watch end with it). It returns nil after ctx
// ended and the error that stopped the server otherwise.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			srv.Close()
		case <-stopped:
		}
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// WriteJSON answers with status code and v as JSON, indented for people
// reading it with curl.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// ErrorResponse is the body of an error answer: {"error": "..."}.
// configd's answers add a code and field errors (configdapi).
type ErrorResponse struct {
	Error string `json:"error"`
}

// WriteError answers with status code and msg as an ErrorResponse.
func WriteError(w http.ResponseWriter, code int, msg string) {
	WriteJSON(w, code, ErrorResponse{Error: msg})
}

// NewTransport returns an HTTP transport whose every connection goes to
// the unix socket at path, whatever the URL's host (clients use
// "http://<service>/v1/...").
func NewTransport(path string) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return localsock.Dial(ctx, path)
		},
		MaxIdleConns:    4,
		IdleConnTimeout: 30 * time.Second,
	}
}
