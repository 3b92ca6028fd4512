package hostd

import (
	"context"
	"slices"
	"time"

	"github.com/flashgate/flashgate/config"
)

// configSource is what hostd needs from configd: the running
// configuration and the stream of changes (services/configd/client).
type configSource interface {
	Running(ctx context.Context) (*config.Config, uint64, error)
	Watch(ctx context.Context) <-chan config.Change
}

// pacing is how hostd waits: how long configd may stay silent at start
// before hostd says it is waiting for it, and how a failed attempt is
// retried (doubling from retryFirst up to retryMax).
type pacing struct {
	configdWait time.Duration
	retryFirst  time.Duration
	retryMax    time.Duration
}

var defaultPacing = pacing{configdWait: 5 * time.Second, retryFirst: time.Second, retryMax: 30 * time.Second}

// follow applies the system section from src at start (configd's first
// change on every connection is "current") and after every change of it,
// until ctx ends or the stream closes. The watch stream reconnects by
// itself when configd restarts; what fails here (configd answering the
// stream but not the read, the supervisor restarting) is tried again
// with backoff. configd names the source in the log.
func (h *host) follow(ctx context.Context, src configSource, configd string, p pacing) {
	watch := src.Watch(ctx)
	silent := time.NewTimer(p.configdWait)
	defer silent.Stop()
	var retry <-chan time.Time
	backoff := p.retryFirst
	refresh := func() {
		if h.refresh(ctx, src) {
			retry, backoff = time.After(backoff), min(2*backoff, p.retryMax)
			return
		}
		retry, backoff = nil, p.retryFirst
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-silent.C:
			h.logf("configd at %s has not answered for %s; waiting for it", configd, p.configdWait)
		case ch, ok := <-watch:
			if !ok {
				return
			}
			silent.Stop()
			if ch.Reason == "current" {
				h.logf("following configd at %s, revision %d", configd, ch.Revision)
			}
			if !slices.Contains(ch.Sections, "system") {
				continue
			}
			refresh()
		case <-retry:
			refresh()
		}
	}
}

// refresh reads the running configuration and applies it; it reports
// whether to try again later.
func (h *host) refresh(ctx context.Context, src configSource) (retry bool) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	cfg, _, err := src.Running(rctx)
	cancel()
	if !h.check("configd", err, "read the running configuration") {
		return true
	}
	return h.apply(cfg.System)
}
