package supervisor

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// Line is one line of a service's output or of the kernel log.
type Line struct {
	Time   time.Time `json:"time"`
	Stream string    `json:"stream"` // "stdout", "stderr", "kernel", "supervisor"
	Text   string    `json:"text"`
	// Level is the syslog severity for kernel lines (0 emerg .. 7 debug);
	// service output is sent to syslog as info (6).
	Level int `json:"level,omitempty"`
}

// lineOverhead is what a Line costs besides its text, so that a flood of
// empty lines is bounded as well as a flood of long ones.
const lineOverhead = 48

// MaxLineBytes is the longest line kept; longer output is split.
const MaxLineBytes = 1024

// Ring keeps the most recent lines written to it within a byte budget. It is
// the only place service output lives on the appliance: RAM is bounded and
// the card is not written for logs.
type Ring struct {
	mu    sync.Mutex
	limit int
	used  int
	lines []Line // lines[start:] are live, oldest first; the prefix is compacted away on append
	start int
	// dropped counts lines pushed out to stay within limit.
	dropped uint64
	// tap, if set, sees every line appended (remote syslog).
	tap func(Line)
}

// NewRing returns a ring that holds at most limit bytes of lines.
func NewRing(limit int) *Ring {
	return &Ring{limit: limit}
}

// Append adds a line, dropping the oldest lines to stay within the budget.
func (r *Ring) Append(l Line) {
	if len(l.Text) > MaxLineBytes {
		l.Text = l.Text[:MaxLineBytes]
	}
	cost := len(l.Text) + lineOverhead
	r.mu.Lock()
	for r.used+cost > r.limit && r.start < len(r.lines) {
		r.used -= len(r.lines[r.start].Text) + lineOverhead
		r.lines[r.start] = Line{}
		r.start++
		r.dropped++
	}
	if cost > r.limit {
		r.dropped++
		r.mu.Unlock()
		return
	}
	// Compact when the dead prefix is as large as the live part, so the
	// backing array stays within twice the live lines.
	if r.start > 0 && r.start >= len(r.lines)-r.start {
		n := copy(r.lines, r.lines[r.start:])
		clear(r.lines[n:])
		r.lines = r.lines[:n]
		r.start = 0
	}
	r.lines = append(r.lines, l)
	r.used += cost
	tap := r.tap
	r.mu.Unlock()
	if tap != nil {
		tap(l)
	}
}

// Lines returns a copy of the last n lines (all of them if n <= 0), oldest
// first, and how many lines were dropped since the ring was created.
func (r *Ring) Lines(n int) ([]Line, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	live := r.lines[r.start:]
	if n > 0 && n < len(live) {
		live = live[len(live)-n:]
	}
	return append([]Line(nil), live...), r.dropped
}

// Bytes reports the budget in use, for tests and status.
func (r *Ring) Bytes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.used
}

func (r *Ring) setTap(f func(Line)) {
	r.mu.Lock()
	r.tap = f
	r.mu.Unlock()
}

// copyLines reads rd until EOF and appends each line to the ring. Lines
// longer than MaxLineBytes are split rather than buffered without bound.
func (r *Ring) copyLines(rd io.Reader, stream string, now func() time.Time) {
	br := bufio.NewReaderSize(rd, MaxLineBytes)
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(chunk) > 0 || (err == nil && !isPrefix) {
			r.Append(Line{Time: now(), Stream: stream, Text: string(chunk)})
		}
		if err != nil {
			return
		}
	}
}
