package hostd

import (
	"context"
	"errors"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd/configdapi"
)

// pacing is how hostd waits: how long configd may stay silent at start
// before hostd says it is waiting for it, and how a failed attempt is
// retried (doubling from retryFirst up to retryMax).
type pacing struct {
	configdWait time.Duration
	retryFirst  time.Duration
	retryMax    time.Duration
}

var defaultPacing = pacing{configdWait: 5 * time.Second, retryFirst: time.Second, retryMax: 30 * time.Second}

// errRetry asks Follow to apply again later: apply has logged why.
var errRetry = errors.New("a setting is not applied yet")

// follow applies the system section from src at start and after every
// change of it, until ctx ends or the stream closes
// (configdapi.Follow: what fails is tried again with backoff, a silent
// configd is said once). where names the source in the log.
func (h *host) follow(ctx context.Context, src configdapi.Source, where string, p pacing) {
	configdapi.Follow(ctx, src, configdapi.Following{
		Sections:   []config.Section{config.SectionSystem},
		Logf:       h.logf,
		Where:      where,
		Silent:     p.configdWait,
		RetryFirst: p.retryFirst,
		RetryMax:   p.retryMax,
		Apply: func(ctx context.Context, cfg *config.Config, rev uint64, ch config.Change) error {
			if h.apply(cfg.System) {
				return errRetry
			}
			return nil
		},
	})
}
