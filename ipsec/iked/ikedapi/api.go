// Package ikedapi is the contract of iked's local API: where its socket is,
// its routes, the JSON it answers, its error codes, and the one Client
// that the console, `flashgate ipsec` and the web UI use. It is a leaf: it
// imports nothing of the daemon (no IKE engine, no data plane), so a
// client links only this and the shared status types of package ipsec.
//
// The API is HTTP+JSON on a unix socket:
//
//	GET  /v1/tunnels              every tunnel's ipsec.TunnelStatus, sorted by name;
//	                              ?state=&q=&offset=&limit= narrow it (TunnelQuery), X-Tunnels-Matched counts the matches
//	GET  /v1/tunnels/{name}       one tunnel (404: no tunnel of that name)
//	POST /v1/tunnels/{name}/up    initiate now (resets the retry backoff; once for start action respond)
//	POST /v1/tunnels/{name}/down  delete the tunnel's IKE SAs (and their children)
//	POST /v1/tunnels/{name}/rekey?sa=ike|child  rekey now (default: the CHILD_SAs)
//	GET  /v1/counters             every tunnel's CHILD_SA byte counters and nothing else (TunnelCounters)
//	GET  /v1/stats                daemon-wide drop counters and the data plane in use
//
// Errors answer with a status code (404 no such tunnel, 409 the tunnel
// cannot do it now, 400 a bad request) and a Reply whose Error says why.
package ikedapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/flashgate/flashgate/internal/paths"
)

// DefaultSocket is where iked serves its local API on the appliance.
const DefaultSocket = paths.IkedSocket

// The routes, as net/http.ServeMux patterns; {name} is a tunnel's name.
const (
	RouteTunnels  = "GET /v1/tunnels"
	RouteTunnel   = "GET /v1/tunnels/{name}"
	RouteUp       = "POST /v1/tunnels/{name}/up"
	RouteDown     = "POST /v1/tunnels/{name}/down"
	RouteRekey    = "POST /v1/tunnels/{name}/rekey" // query sa=ike or sa=child
	RouteStats    = "GET /v1/stats"
	RouteCounters = "GET /v1/counters"
)

// Reply is the body of the answers that carry no document: Result on
// success ("initiating", "deleted", "rekeying"), Error otherwise (the
// shape of internal/localapi's ErrorResponse).
type Reply struct {
	Result string `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

// The results of the tunnel actions.
const (
	ResultInitiating = "initiating"
	ResultDeleted    = "deleted"
	ResultRekeying   = "rekeying"
)

var (
	// ErrNotRunning: iked's socket is missing or nothing answers on it.
	// Callers show tunnels as unknown then, never as down.
	ErrNotRunning = errors.New("iked is not running")
	// ErrNoTunnel: the name is not a configured tunnel (HTTP 404).
	ErrNoTunnel = errors.New("no such tunnel")
	// ErrConflict: the tunnel cannot do what was asked now (HTTP 409),
	// e.g. rekey without an established IKE SA; the Error says why.
	ErrConflict = errors.New("not possible now")
	// ErrBadRequest: the request itself is wrong (HTTP 400).
	ErrBadRequest = errors.New("bad request")
)

// Error is iked's answer to a request it refused: the HTTP status and
// iked's plain-language reason. errors.Is matches it against ErrNoTunnel,
// ErrConflict and ErrBadRequest by its status.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("iked answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return e.Message
}

// Is maps the status codes to the sentinel errors.
func (e *Error) Is(target error) bool {
	return target == StatusError(e.Status)
}

// StatusError is the sentinel of an HTTP status: what the server answers
// with is chosen by errors.Is against these, and the client maps back.
func StatusError(code int) error {
	switch code {
	case http.StatusNotFound:
		return ErrNoTunnel
	case http.StatusConflict:
		return ErrConflict
	case http.StatusBadRequest:
		return ErrBadRequest
	}
	return nil
}

// StatusOf is the HTTP status the server answers err with.
func StatusOf(err error) int {
	switch {
	case errors.Is(err, ErrNoTunnel):
		return http.StatusNotFound
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	default:
		return http.StatusConflict
	}
}
