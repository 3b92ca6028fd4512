package supervisor

import "time"

// Backoff computes the delay before restarting a service that exited: Base
// after the first exit, doubling with each exit that follows a short run, at
// most Max. A run that lasted at least Healthy resets the delay to Base, so a
// service that crashes once a day is restarted promptly every time.
type Backoff struct {
	Base    time.Duration
	Max     time.Duration
	Healthy time.Duration
}

// DefaultBackoff is the policy the appliance uses.
var DefaultBackoff = Backoff{Base: time.Second, Max: time.Minute, Healthy: time.Minute}

// Next returns the delay before the next start, given the previous delay
// (zero if the service has not been restarted yet) and how long the run that
// just ended lasted.
func (b Backoff) Next(prev, ran time.Duration) time.Duration {
	if prev == 0 || ran >= b.Healthy {
		return b.Base
	}
	next := prev * 2
	if next > b.Max || next <= 0 {
		next = b.Max
	}
	return next
}
