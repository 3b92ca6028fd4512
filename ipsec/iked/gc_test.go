package iked

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMemTotal(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		text string
		want int64 // 0: an error
	}{
		// The line's parsing is internal/procfile's (tested there); here,
		// bytes and a zero total refused.
		{"MemFree:          101236 kB\nMemTotal:   131072 kB\n", 128 << 20},
		{"MemFree:          101236 kB\n", 0},
		{"MemTotal:         0 kB\n", 0},
	} {
		file := filepath.Join(dir, "meminfo")
		if err := os.WriteFile(file, []byte(tc.text), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := memTotal(file)
		if tc.want == 0 {
			if err == nil {
				t.Errorf("%q: %d, want an error", tc.text, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %d, %v; want %d", tc.text, got, err, tc.want)
		}
	}
	if _, err := memTotal(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing file gave no error")
	}
}
