package webui

import (
	"context"
	"fmt"
	"github.com/flashgate/flashgate/webui/markup"
	"html"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
)

// The throughput graphs need history the tunnels do not keep: the sampler
// reads iked's byte counters (GET /v1/counters, nothing else) every interval and keeps the rates of the last
// few minutes per tunnel in a fixed ring. Counters are tracked per CHILD_SA
// (by inbound SPI) so that a rekey, which replaces an SA and restarts its
// counters at zero, does not show up as a negative or a huge spike.
//
// It samples only while someone is logged in: reading a head office's
// thousand tunnels from iked every 5 s cost iked and the web UI their CPU
// and garbage all day for graphs nobody looked at (issue 22). A request of
// a session wakes it; it stops, and forgets its history, once no session
// is live (they end after DefaultIdleTimeout without a click), so the
// graphs and the CPU figure start from the first page after a quiet time.

const (
	sampleInterval = 5 * time.Second
	sampleKeep     = 72 // 6 minutes at 5 s
)

// Rate is one throughput sample, in bytes per second.
type Rate struct {
	At  time.Time `json:"at"`
	In  float64   `json:"in_bps"`
	Out float64   `json:"out_bps"`
}

type rateRing struct {
	buf  [sampleKeep]Rate
	next int
	n    int
}

func (r *rateRing) add(s Rate) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % sampleKeep
	r.n = min(r.n+1, sampleKeep)
}

// samples returns the ring oldest first.
func (r *rateRing) samples() []Rate {
	out := make([]Rate, 0, r.n)
	for i := 0; i < r.n; i++ {
		out = append(out, r.buf[(r.next-r.n+i+sampleKeep)%sampleKeep])
	}
	return out
}

type saBytes struct{ in, out uint64 }

type sampler struct {
	src      TunnelSource
	now      func() time.Time
	interval time.Duration // sampleInterval; tests shorten it

	wakeup   chan struct{} // a session's request while not sampling
	sampling atomic.Bool
	onStop   func() // when the last session has ended, after forget

	mu       sync.Mutex
	rings    map[string]*rateRing
	last     map[string]map[uint32]saBytes // tunnel -> inbound SPI -> counters
	lastAt   time.Time
	root     string
	cpuLast  CPUTimes
	cpuBusy  float64 // percent over the last interval, -1 until known
	cpuKnown bool
}

func newSampler(src TunnelSource, root string, now func() time.Time) *sampler {
	return &sampler{src: src, root: root, now: now, rings: map[string]*rateRing{}, last: map[string]map[uint32]saBytes{},
		interval: sampleInterval, wakeup: make(chan struct{}, 1)}
}

// wake starts the sampling if it is not running: every request of a
// session calls it, and while sampling it costs an atomic load.
func (s *sampler) wake() {
	if !s.sampling.Load() {
		select {
		case s.wakeup <- struct{}{}:
		default:
		}
	}
}

// run samples every sampleInterval while active reports a live session,
// from the first wake on, and waits for the next wake when none is left,
// until ctx is done.
func (s *sampler) run(ctx context.Context, active func() bool) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wakeup:
		}
		s.sampling.Store(true)
		s.sampleWhile(ctx, active)
	}
}

func (s *sampler) sampleWhile(ctx context.Context, active func() bool) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		if !active() {
			// A session that starts after this store wakes run again;
			// one that started before it is seen by the second look.
			s.sampling.Store(false)
			if !active() {
				s.forget()
				if s.onStop != nil {
					s.onStop()
				}
				return
			}
			s.sampling.Store(true)
		}
		s.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// forget drops the history: after a pause the next rates would span it,
// and the graphs would join samples minutes apart as neighbours.
func (s *sampler) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.rings)
	clear(s.last)
	s.lastAt = time.Time{}
	s.cpuLast, s.cpuBusy, s.cpuKnown = CPUTimes{}, 0, false
}

func (s *sampler) sample(ctx context.Context) {
	if ct, err := readCPUTimes(s.root); err == nil {
		s.mu.Lock()
		if s.cpuLast.Total > 0 && ct.Total > s.cpuLast.Total {
			s.cpuBusy = 100 * float64(ct.Busy-min(s.cpuLast.Busy, ct.Busy)) / float64(ct.Total-s.cpuLast.Total)
			s.cpuKnown = true
		}
		s.cpuLast = ct
		s.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	tunnels, err := s.src.Counters(ctx)
	if err != nil {
		return
	}
	s.record(tunnels, s.now())
}

// record turns counters into rates against the previous sample.
func (s *sampler) record(tunnels []ikedapi.TunnelCounters, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dt := now.Sub(s.lastAt).Seconds()
	first := s.lastAt.IsZero()
	s.lastAt = now
	seen := map[string]bool{}
	for _, t := range tunnels {
		seen[t.Name] = true
		prev := s.last[t.Name]
		cur := make(map[uint32]saBytes, len(t.Children))
		var din, dout uint64
		for _, c := range t.Children {
			b := saBytes{c.BytesIn, c.BytesOut}
			cur[c.InboundSPI] = b
			p, ok := prev[c.InboundSPI]
			if !ok || b.in < p.in || b.out < p.out {
				p = saBytes{} // new SA: all its bytes are new
			}
			din += b.in - p.in
			dout += b.out - p.out
		}
		s.last[t.Name] = cur
		if first || dt <= 0 || prev == nil {
			continue // no baseline yet
		}
		r := s.rings[t.Name]
		if r == nil {
			r = &rateRing{}
			s.rings[t.Name] = r
		}
		r.add(Rate{At: now, In: float64(din) / dt, Out: float64(dout) / dt})
	}
	for name := range s.last {
		if !seen[name] {
			delete(s.last, name)
			delete(s.rings, name)
		}
	}
}

func (s *sampler) rates(tunnel string) []Rate {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.rings[tunnel]; r != nil {
		return r.samples()
	}
	return nil
}

// cpuPercent returns the CPU busy share over the last interval.
func (s *sampler) cpuPercent() (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cpuBusy, s.cpuKnown
}

// rateGraph draws rates as an inline SVG: in and out as two lines over a
// fixed time axis (the ring's length), scaled to the largest sample, with
// the scale written in the corner. Inline SVG costs no request and no
// script, and stays a few hundred bytes.
func rateGraph(rates []Rate, width, height int) markup.Trusted {
	const pad = 2
	maxv := 0.0
	for _, r := range rates {
		maxv = max(maxv, r.In, r.Out)
	}
	scale := niceCeil(maxv*8) / 8 // round in bits per second, the unit shown
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="graph" viewBox="0 0 %d %d" role="img" aria-label="throughput, last %d minutes">`,
		width, height, sampleKeep*int(sampleInterval/time.Second)/60)
	for i := 1; i < 4; i++ {
		y := pad + (height-2*pad)*i/4
		fmt.Fprintf(&b, `<line class="grid" x1="0" y1="%d" x2="%d" y2="%d"/>`, y, width, y)
	}
	line := func(class string, v func(Rate) float64) {
		if len(rates) < 2 {
			return
		}
		fmt.Fprintf(&b, `<polyline class="%s" points="`, class)
		var x, y float64
		for i, r := range rates {
			// Right-align: the newest sample is at the right edge.
			x = float64(width) - float64(len(rates)-1-i)*float64(width)/float64(sampleKeep-1)
			y = float64(height-pad) - v(r)/scale*float64(height-2*pad)
			fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
		}
		b.WriteString(`"/>`)
		// A dot on the newest sample: with little history the line is
		// short, and the current value is what people look for.
		fmt.Fprintf(&b, `<circle class="%s" cx="%.1f" cy="%.1f" r="2.5"/>`, class, x-2.5, y)
	}
	line("in", func(r Rate) float64 { return r.In })
	line("out", func(r Rate) float64 { return r.Out })
	label := "no traffic yet"
	if len(rates) >= 2 {
		label = formatRate(scale)
	}
	fmt.Fprintf(&b, `<text x="4" y="12">%s</text></svg>`, html.EscapeString(label))
	return markup.Trusted(b.String()) // numbers, constants and the escaped label
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, at least 1000,
// so that the scale label is a round number.
func niceCeil(v float64) float64 {
	p := 1000.0
	for {
		for _, m := range []float64{1, 2, 5} {
			if v <= m*p {
				return m * p
			}
		}
		p *= 10
	}
}

// formatRate shows bytes per second as bits per second, the unit links
// are sold in.
func formatRate(bps float64) string {
	bits := bps * 8
	switch {
	case bits >= 1e9:
		return fmt.Sprintf("%.3g Gbit/s", bits/1e9)
	case bits >= 1e6:
		return fmt.Sprintf("%.3g Mbit/s", bits/1e6)
	case bits >= 1e3:
		return fmt.Sprintf("%.3g kbit/s", bits/1e3)
	}
	return fmt.Sprintf("%.0f bit/s", bits)
}

// formatBytes shows a byte count with a binary prefix.
func formatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
