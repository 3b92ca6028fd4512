package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkCommitSmallChange50Tunnels is the commit the design targets: one
// field of one tunnel changed in a 50-tunnel config, committed to a file on
// a disk-backed file system with fsync. Reported per commit: latency (ns/op,
// target <= 50 ms), written_bytes/op from /proc/self/io write_bytes (target
// <= 64 KiB), and syscall_bytes/op (what bbolt handed to pwrite).
//
//	go test ./config -run '^$' -bench CommitSmallChange -benchtime 200x
func BenchmarkCommitSmallChange50Tunnels(b *testing.B) { benchCommit(b, 50) }

// BenchmarkCommitSmallChangeTunnels is the same commit in configurations of
// 10, 100 and 1000 tunnels (a head office), and the time to open the store
// and read the running configuration back (open_ms: configd's start).
func BenchmarkCommitSmallChangeTunnels(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchCommit(b, n) })
	}
}

func benchCommit(b *testing.B, n int) {
	dir, err := os.MkdirTemp("/var/tmp", "flashgate-bench-") // not tmpfs: tmpfs does not count write_bytes
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := Open(filepath.Join(dir, "config.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ReplaceCandidate("", SyntheticConfig(n)); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Commit("bench", fmt.Sprintf("%d tunnels", n)); err != nil {
		b.Fatal(err)
	}
	// Fill the history to its limit first, so that every measured commit
	// also trims the oldest revision, as on a box in service.
	commit := func(i int) {
		if _, err := s.SetPath("", "tunnels.site07.remote_address", fmt.Sprintf("198.51.100.%d", i%250+1)); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Commit("bench", "move site07"); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 60 {
		commit(i)
	}
	w0, c0, err := ProcessIO()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		commit(i + 61)
	}
	b.StopTimer()
	w1, c1, _ := ProcessIO()
	b.ReportMetric(float64(w1-w0)/float64(b.N), "written_bytes/op")
	b.ReportMetric(float64(c1-c0)/float64(b.N), "syscall_bytes/op")
	st, _ := os.Stat(s.Path())
	b.ReportMetric(float64(st.Size()), "file_bytes")
	s.Close()
	// configd's start: open the store and read the running configuration
	// back, the median of 7 (one open is at the mercy of a busy machine).
	var opens []time.Duration
	for range 7 {
		start := time.Now()
		s2, err := Open(filepath.Join(dir, "config.db"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		c, _ := s2.Running()
		opens = append(opens, time.Since(start))
		s2.Close()
		if c == nil || len(c.Tunnels) != n {
			b.Fatalf("reopened store: not the %d tunnels", n)
		}
	}
	slices.Sort(opens)
	b.ReportMetric(float64(opens[len(opens)/2].Microseconds())/1000, "open_ms")
}

// BenchmarkValidate50Tunnels is the cost of validating a 50-tunnel config,
// paid on every commit.
func BenchmarkValidate50Tunnels(b *testing.B) {
	c := SyntheticConfig(50)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

func TestMeasureCommits(t *testing.T) {
	f, err := MeasureCommits(t.TempDir(), 5)
	if err != nil {
		t.Fatal(err)
	}
	// Only sanity: the figures themselves are the benchmark's business.
	if f.Commits != 5 || f.MedianMs <= 0 || f.SyscallBytes < 4096 || f.DatabaseBytes == 0 {
		t.Errorf("implausible figures %+v", f)
	}
}
