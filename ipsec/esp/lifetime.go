package esp

import (
	"container/heap"
	"time"

	"github.com/flashgate/flashgate/ipsec"
)

// lifetimes are the time limits of every pair (ChildSA.SoftLifetime and
// HardLifetime) on one timer, set for the earliest: a timer and its
// closure per limit, two per pair, were about 300 bytes per CHILD_SA on a
// hub of a thousand. Guarded by Device.mu.
type lifetimes struct {
	epoch time.Time   // due times are durations since epoch (monotonic)
	timer *time.Timer // at the earliest due time; nil before the first limit
	due   lifetimeHeap
}

// pairLimits is what lifetimes keeps in a pair.
type pairLimits struct {
	softAt, hardAt     time.Duration // since lifetimes.epoch; 0: no limit
	softSent, hardSent bool
	index              int // in lifetimes.due; -1 when not in it
}

// next is the earliest limit of the pair not reached yet, or 0 for none.
func (l *pairLimits) next() time.Duration {
	var at time.Duration
	if l.softAt != 0 && !l.softSent {
		at = l.softAt
	}
	if l.hardAt != 0 && !l.hardSent && (at == 0 || l.hardAt < at) {
		at = l.hardAt
	}
	return at
}

// lifetimeHeap orders pairs by their next limit.
type lifetimeHeap []*pair

func (h lifetimeHeap) Len() int           { return len(h) }
func (h lifetimeHeap) Less(i, j int) bool { return h[i].limits.next() < h[j].limits.next() }
func (h lifetimeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].limits.index, h[j].limits.index = i, j
}
func (h *lifetimeHeap) Push(x any) {
	pr := x.(*pair)
	pr.limits.index = len(*h)
	*h = append(*h, pr)
}
func (h *lifetimeHeap) Pop() any {
	old := *h
	pr := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	pr.limits.index = -1
	return pr
}

// scheduleLifetimes starts the time limits of a new pair (c is its
// inbound ChildSA). Called with d.mu held.
func (d *Device) scheduleLifetimes(pr *pair, c *ipsec.ChildSA) {
	pr.limits.index = -1
	if c.SoftLifetime <= 0 && c.HardLifetime <= 0 {
		return
	}
	now := time.Since(d.life.epoch)
	if c.SoftLifetime > 0 {
		pr.limits.softAt = now + c.SoftLifetime
	}
	if c.HardLifetime > 0 {
		pr.limits.hardAt = now + c.HardLifetime
	}
	heap.Push(&d.life.due, pr)
	d.armLifetimes()
}

// unscheduleLifetimes forgets a deleted pair's limits. The timer may then
// fire early and find nothing due, which is harmless. Called with d.mu held.
func (d *Device) unscheduleLifetimes(pr *pair) {
	if pr.limits.index >= 0 {
		heap.Remove(&d.life.due, pr.limits.index)
	}
}

// armLifetimes sets the timer for the earliest limit. Called with d.mu held.
func (d *Device) armLifetimes() {
	if len(d.life.due) == 0 {
		if d.life.timer != nil {
			d.life.timer.Stop()
		}
		return
	}
	wait := d.life.due[0].limits.next() - time.Since(d.life.epoch)
	if d.life.timer == nil {
		d.life.timer = time.AfterFunc(wait, d.lifetimesDue)
	} else {
		d.life.timer.Reset(wait)
	}
}

// lifetimesDue runs on the timer: a soft limit tells iked to rekey, a hard
// one stops both SAs of the pair and tells iked (its SPI is the pair's
// inbound one, as for every time limit).
func (d *Device) lifetimesDue() {
	var expired []ipsec.Expire
	d.mu.Lock()
	if d.closed.Load() {
		d.mu.Unlock()
		return
	}
	now := time.Since(d.life.epoch)
	for len(d.life.due) > 0 {
		pr := d.life.due[0]
		l := &pr.limits
		at := l.next()
		if at > now {
			break
		}
		if l.hardAt == at && !l.hardSent {
			// A soft limit after the hard one is moot.
			l.softSent, l.hardSent = true, true
			pr.in.Kill()
			pr.out.Kill()
			expired = append(expired, ipsec.Expire{SPI: pr.in.SPI, Hard: true})
		} else {
			l.softSent = true
			expired = append(expired, ipsec.Expire{SPI: pr.in.SPI})
		}
		if l.next() == 0 {
			heap.Pop(&d.life.due)
		} else {
			heap.Fix(&d.life.due, 0)
		}
	}
	d.armLifetimes()
	d.mu.Unlock()
	for _, e := range expired {
		d.sendExpire(e)
	}
}
