package configd

import (
	"errors"
	"net/http"
)

// The read-only API is what iked gets (configdapi.ReadSocket). iked parses
// packets from the WAN and runs as its own user with only the network
// capabilities it needs; it must read the running configuration with its
// PSKs and keys, but a process an attacker took over through it must not
// be able to change the configuration (set a password, open the
// firewall), read the candidate's drafts or the stored files, or verify
// password guesses. So this socket serves the running configuration, the
// status and the watch stream, and refuses everything else.

// ReadOnly makes NewServer serve only the read-only routes.
func ReadOnly() ServerOption {
	return func(s *Server) { s.readOnly = true }
}

// errReadOnly is what the read-only API answers for any other route.
var errReadOnly = errors.New("not served on configd's read-only socket")

// readOnlyRoute reports whether r is one of the read-only API's routes.
func readOnlyRoute(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.URL.Path {
	case "/v1/status", "/v1/running", "/v1/watch":
		return true
	}
	return false
}
