package configdapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/paths"
)

// The sockets configd serves on the appliance.
const (
	// Socket is the full API: root only; secrets in the clear.
	Socket = paths.ConfigdSocket
	// WebSocket is the restricted API for the web UI: secrets redacted,
	// the firmware routes.
	WebSocket = paths.ConfigdWebSocket
	// ReadSocket is the read-only API for iked, which runs as its own
	// user: the running configuration (secrets included), the status and
	// the watch stream; nothing that changes anything.
	ReadSocket = paths.ConfigdReadSocket
	// RedactedSocket is the read-only API without secrets, for netd, which
	// runs as its own user: the running configuration with every secret
	// replaced by a mark (as the web UI gets it), the status and the watch
	// stream.
	RedactedSocket = paths.ConfigdRedactedSocket
)

// Source is what a service reads its configuration from: a *Client on
// the appliance, configdtest's twin in tests.
type Source interface {
	// Running returns the running configuration and its revision.
	Running(ctx context.Context) (*config.Config, uint64, error)
	// Watch delivers every change of the running configuration, the
	// first of each connection with Reason "current", until ctx ends.
	Watch(ctx context.Context) <-chan config.Change
}

// Following is how a service follows configd (Follow).
type Following struct {
	// Sections are the sections whose changes concern the service;
	// none: every change.
	Sections []config.Section
	// Apply applies the running configuration cfg at revision rev, read
	// after the change ch. An error makes Follow try again later (with
	// backoff) unless another change comes first. Apply logs its own
	// failures: it knows which are worth repeating.
	Apply func(ctx context.Context, cfg *config.Config, rev uint64, ch config.Change) error
	// Logf receives Follow's notes: configd silent, connected, a failed
	// read. Nil: the log package's.
	Logf func(format string, args ...any)
	// Name prefixes the notes ("netd").
	Name string
	// Where names src in the notes; default: src's String method (a
	// Client's is "configd at <socket>"), else "configd".
	Where string
	// Silent is how long configd may stay silent at start before Follow
	// says it is waiting for it; default 5 s.
	Silent time.Duration
	// RetryFirst and RetryMax bound the backoff of a failed read or
	// apply: it doubles from RetryFirst (default 1 s) to RetryMax
	// (default 30 s).
	RetryFirst, RetryMax time.Duration
}

// Follow applies the running configuration of src at start (configd's
// first change on every connection is "current") and after every change
// of f.Sections, until ctx ends or the watch closes. The watch reconnects
// by itself when configd restarts; a read or an apply that fails is tried
// again with backoff. When configd has not answered after f.Silent it says
// so once.
//
// Every service follows configd with this: netd (its reconcilers, and the
// time sync's servers), iked (the tunnels), hostd (the system section).
func Follow(ctx context.Context, src Source, f Following) {
	logf := f.Logf
	if logf == nil {
		logf = log.Printf
	}
	where := f.Where
	if s, ok := src.(fmt.Stringer); ok && where == "" {
		where = s.String()
	}
	where = cmp.Or(where, "configd")
	note := func(format string, args ...any) {
		if f.Name != "" {
			format = f.Name + ": " + format
		}
		logf(format, args...)
	}
	silentFor := cmp.Or(f.Silent, 5*time.Second)
	first, most := cmp.Or(f.RetryFirst, time.Second), cmp.Or(f.RetryMax, 30*time.Second)

	watch := src.Watch(ctx)
	silent := time.NewTimer(silentFor)
	defer silent.Stop()
	var (
		retry    <-chan time.Time
		backoff  = first
		last     config.Change
		lastRead string // the last read error logged, logged once while it lasts
	)
	refresh := func() {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		cfg, rev, err := src.Running(rctx)
		cancel()
		if err == nil {
			lastRead = ""
			err = f.Apply(ctx, cfg, rev, last)
		} else if err.Error() != lastRead && ctx.Err() == nil {
			lastRead = err.Error()
			note("read the running configuration: %v", err)
		}
		if err != nil && ctx.Err() == nil {
			retry, backoff = time.After(backoff), min(2*backoff, most)
			return
		}
		retry, backoff = nil, first
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-silent.C:
			note("%s has not answered for %s; waiting for it", where, silentFor)
		case ch, ok := <-watch:
			if !ok {
				return
			}
			silent.Stop()
			if ch.Reason == "current" {
				note("following %s, revision %d", where, ch.Revision)
			}
			if len(f.Sections) > 0 && !ch.Touches(f.Sections...) {
				continue
			}
			last = ch
			refresh()
		case <-retry:
			refresh()
		}
	}
}

// WaitRunning reads the running configuration from src, trying again for
// up to wait while configd does not answer: the supervisor starts the
// services as configd starts, which may be before it serves. The retries
// start at 50 ms (a missing socket fails at once, so they cost nothing)
// and back off to 500 ms, so that a waiting service (and the console's
// login prompt) goes on within 50–100 ms of configd. An answer that is an
// error (*APIError) is returned at once: waiting would not change it.
func WaitRunning(ctx context.Context, src Source, wait time.Duration) (*config.Config, uint64, error) {
	deadline := time.Now().Add(wait)
	pause := 50 * time.Millisecond
	for {
		// One try may take 2 s, or what is left of wait, up to 10 s.
		rctx, cancel := context.WithTimeout(ctx, min(max(time.Until(deadline), 2*time.Second), 10*time.Second))
		cfg, rev, err := src.Running(rctx)
		cancel()
		var apiErr *APIError
		if err == nil || errors.As(err, &apiErr) {
			return cfg, rev, err
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return nil, 0, fmt.Errorf("configd did not answer within %s: %w", wait, err)
		}
		select {
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("configd did not answer: %w", err)
		case <-time.After(pause):
		}
		pause = min(2*pause, 500*time.Millisecond)
	}
}
