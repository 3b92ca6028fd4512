package config

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// procIO returns write_bytes (bytes this process caused to be sent to the
// storage layer, counted by page as it is dirtied) and wchar (bytes passed
// to write system calls) from /proc/self/io.
func procIO(tb testing.TB) (writeBytes, wchar int64) {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		tb.Fatalf("per-process I/O accounting is needed to measure bytes written: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "write_bytes":
			writeBytes = n
		case "wchar":
			wchar = n
		}
	}
	return writeBytes, wchar
}

// BenchmarkCommitSmallChange50Tunnels is the commit the design targets: one
// field of one tunnel changed in a 50-tunnel config, committed to a file on
// a disk-backed file system with fsync. Reported per commit: latency (ns/op,
// target <= 50 ms), written_bytes/op from /proc/self/io write_bytes (target
// <= 64 KiB), and syscall_bytes/op (what bbolt handed to pwrite).
//
//	go test ./config -run '^$' -bench CommitSmallChange -benchtime 200x
func BenchmarkCommitSmallChange50Tunnels(b *testing.B) {
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
	if _, err := s.ReplaceCandidate("", sampleConfig(50)); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Commit("bench", "50 tunnels"); err != nil {
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
	w0, c0 := procIO(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		commit(i + 61)
	}
	b.StopTimer()
	w1, c1 := procIO(b)
	b.ReportMetric(float64(w1-w0)/float64(b.N), "written_bytes/op")
	b.ReportMetric(float64(c1-c0)/float64(b.N), "syscall_bytes/op")
	st, _ := os.Stat(s.Path())
	b.ReportMetric(float64(st.Size()), "file_bytes")
}

// BenchmarkValidate50Tunnels is the cost of validating a 50-tunnel config,
// paid on every commit.
func BenchmarkValidate50Tunnels(b *testing.B) {
	c := sampleConfig(50)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}
