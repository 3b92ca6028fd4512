package procfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestKiB(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		content string
		want    int64
		ok      bool
	}{
		{"MemTotal:        254664 kB\nMemFree: 1 kB\n", 254664, true},
		{"Name:\tx\nVmRSS:\t   12345 kB\n", 12345, true},
		{"MemTotal: 12 MB\n", 0, false},
		{"MemTotal: lots kB\n", 0, false},
		{"MemTotal: -1 kB\n", 0, false},
		{"VmRSS: 1 kB\n", 0, false}, // asked for MemTotal below
	} {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		name := "MemTotal"
		if tc.want == 12345 {
			name = "VmRSS"
		}
		got, err := KiB(p, name)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("KiB(%q, %s) = %d, %v; want %d, ok %v", tc.content, name, got, err, tc.want, tc.ok)
		}
	}
	if _, err := KiB(filepath.Join(dir, "none"), "MemTotal"); err == nil {
		t.Error("a missing file gave no error")
	}
}
