package supervisor

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestRingKeepsNewestWithinBudget(t *testing.T) {
	const limit = 1000
	r := NewRing(limit)
	for i := range 500 {
		r.Append(Line{Text: fmt.Sprintf("line %03d", i)})
		if used := r.Bytes(); used > limit {
			t.Fatalf("after %d appends the ring uses %d bytes, limit %d", i+1, used, limit)
		}
	}
	lines, dropped := r.Lines(0)
	perLine := len("line 000") + lineOverhead
	if want := limit / perLine; len(lines) != want {
		t.Errorf("ring holds %d lines, want %d (%d-byte budget, %d per line)", len(lines), want, limit, perLine)
	}
	if got, want := lines[len(lines)-1].Text, "line 499"; got != want {
		t.Errorf("newest line %q, want %q", got, want)
	}
	if int(dropped)+len(lines) != 500 {
		t.Errorf("dropped %d + kept %d != 500 appended", dropped, len(lines))
	}
	last3, _ := r.Lines(3)
	if len(last3) != 3 || last3[0].Text != "line 497" || last3[2].Text != "line 499" {
		t.Errorf("Lines(3) = %v, want lines 497..499", last3)
	}
	// The backing array is compacted: it never grows past twice the
	// live lines plus one.
	if c := cap(r.lines); c > 4*len(lines)+8 {
		t.Errorf("backing array capacity %d for %d live lines: not compacted", c, len(lines))
	}
}

func TestRingTruncatesLongLinesAndRejectsOversize(t *testing.T) {
	r := NewRing(4 * MaxLineBytes)
	r.Append(Line{Text: strings.Repeat("x", 3*MaxLineBytes)})
	lines, _ := r.Lines(0)
	if len(lines) != 1 || len(lines[0].Text) != MaxLineBytes {
		t.Fatalf("a %d-byte line should be kept truncated to %d bytes; ring has %d lines", 3*MaxLineBytes, MaxLineBytes, len(lines))
	}
	tiny := NewRing(10) // smaller than one line's overhead
	tiny.Append(Line{Text: "x"})
	if l, d := tiny.Lines(0); len(l) != 0 || d != 1 {
		t.Errorf("a line larger than the whole budget: kept %d, dropped %d; want 0 kept, 1 dropped", len(l), d)
	}
}

func TestCopyLinesSplitsLongLines(t *testing.T) {
	r := NewRing(1 << 20)
	input := "short\n" + strings.Repeat("y", MaxLineBytes+10) + "\nno newline at end"
	r.copyLines(strings.NewReader(input), "stdout", time.Now)
	lines, _ := r.Lines(0)
	var got []int
	for _, l := range lines {
		got = append(got, len(l.Text))
	}
	want := []int{5, MaxLineBytes, 10, len("no newline at end")}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("line lengths %v, want %v", got, want)
	}
}

func BenchmarkRingAppend(b *testing.B) {
	r := NewRing(32 << 10)
	l := Line{Text: "netd: link eth0 up, 100 Mbit/s full duplex"}
	b.ReportAllocs()
	for b.Loop() {
		r.Append(l)
	}
}
