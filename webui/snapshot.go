package webui

import (
	"context"
	"net/http"
	"sync"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/config"
)

// A page asks configd for the candidate, the running configuration and
// its status in several places (the layout, the page, the tunnel rows), and
// configd validates the candidate at every ask. A snapshot remembers the
// answers for the length of one GET request, so each is asked for once.
// Each is asked for only by what needs it: the session and Host checks
// read the running system section (runningSystem), the layout the status
// (candidate_changed), so that a page that shows no configuration does
// not fetch a head office's thousand tunnels, twice (issue 22).
// Requests that change something never get one: they read fresh and edit.
type snapshot struct {
	mu sync.Mutex

	cand     configdapi.CandidateResponse
	candErr  error
	candDone bool

	running    *config.Config
	runningRev uint64
	runningErr error
	runDone    bool

	status     configdapi.Status
	statusErr  error
	statusDone bool

	system     *config.System
	systemErr  error
	systemDone bool
}

type snapshotKey struct{}

// withSnapshot gives every GET request a snapshot.
func withSnapshot(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			r = r.WithContext(context.WithValue(r.Context(), snapshotKey{}, &snapshot{}))
		}
		next.ServeHTTP(w, r)
	})
}

func snapshotOf(ctx context.Context) *snapshot {
	sn, _ := ctx.Value(snapshotKey{}).(*snapshot)
	return sn
}

// candidate returns the candidate, from the request's snapshot if it has
// one. The result is shared: read it, never change it (editCandidate reads
// its own copy).
func (s *Server) candidate(ctx context.Context) (configdapi.CandidateResponse, error) {
	sn := snapshotOf(ctx)
	if sn == nil {
		return s.opts.Config.Candidate(ctx)
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if !sn.candDone {
		sn.cand, sn.candErr = s.opts.Config.Candidate(ctx)
		sn.candDone = true
	}
	return sn.cand, sn.candErr
}

// running returns the running configuration and its revision, shared like
// candidate's: from the web UI's copy of the running configuration when
// configd's status names the revision it holds, else from configd.
func (s *Server) running(ctx context.Context) (*config.Config, uint64, error) {
	sn := snapshotOf(ctx)
	if sn == nil {
		return s.opts.Config.Running(ctx)
	}
	var rev uint64
	known := false
	if st, err := s.status(ctx); err == nil {
		rev, known = st.Revision, true
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if !sn.runDone {
		if c := s.runCache.get(rev); known && c != nil {
			sn.running, sn.runningRev = c, rev
		} else {
			sn.running, sn.runningRev, sn.runningErr = s.opts.Config.Running(ctx)
			if sn.runningErr == nil && sn.running != nil {
				s.runCache.put(sn.runningRev, sn.running)
			}
		}
		sn.runDone = true
	}
	return sn.running, sn.runningRev, sn.runningErr
}

// runningCache is the running configuration of one revision, for the
// pages: a head office's tunnel list and dashboard need every configured
// tunnel, and configd sending a thousand of them, redacted and encoded, at
// every render and live refresh cost more than half of the page (issue 22).
// A revision names one configuration for the life of a database; every
// change configd reports (followAccounts, a reconnect after a restart
// included) drops the copy anyway. It is shared by every GET request: read
// it, never change it.
type runningCache struct {
	mu  sync.Mutex
	rev uint64
	cfg *config.Config
}

func (c *runningCache) get(rev uint64) *config.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg == nil || c.rev != rev {
		return nil
	}
	return c.cfg
}

func (c *runningCache) put(rev uint64, cfg *config.Config) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rev, c.cfg = rev, cfg
}

func (c *runningCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rev, c.cfg = 0, nil
}

// status returns configd's status (revision, pending confirmation).
func (s *Server) status(ctx context.Context) (configdapi.Status, error) {
	sn := snapshotOf(ctx)
	if sn == nil {
		return s.opts.Config.Status(ctx)
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if !sn.statusDone {
		sn.status, sn.statusErr = s.opts.Config.Status(ctx)
		sn.statusDone = true
	}
	return sn.status, sn.statusErr
}

// runningSystem returns the running configuration's system section (host
// name, accounts), shared like running's: from the running configuration
// when the request already has it, else configd's GET /v1/running/system.
func (s *Server) runningSystem(ctx context.Context) (*config.System, error) {
	sn := snapshotOf(ctx)
	if sn == nil {
		sys, _, err := s.opts.Config.RunningSystem(ctx)
		return &sys, err
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if !sn.systemDone {
		switch {
		case sn.runDone && sn.runningErr == nil && sn.running != nil:
			sn.system = &sn.running.System
		default:
			var sys config.System
			sys, _, sn.systemErr = s.opts.Config.RunningSystem(ctx)
			sn.system = &sys
		}
		sn.systemDone = true
	}
	return sn.system, sn.systemErr
}
