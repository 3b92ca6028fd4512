package webui

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFileZoneFollowsTheFile rewrites the zone file as PID 1 does on a
// commit and checks that the next lookup shows the new zone, without a
// restart.
func TestFileZoneFollowsTheFile(t *testing.T) {
	dir := t.TempDir()
	z := &fileZone{path: filepath.Join(dir, "localtime")}
	at := time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)
	offset := func() int { _, off := at.In(z.Location()).Zone(); return off }
	if got := offset(); got != 0 {
		t.Errorf("without a zone file the offset is %d s, want 0 (UTC)", got)
	}
	for _, tc := range []struct {
		zone string
		want int
	}{{"Europe/Berlin", 3600}, {"Asia/Tokyo", 9 * 3600}} {
		data, err := os.ReadFile(filepath.Join("/usr/share/zoneinfo", tc.zone))
		if err != nil {
			t.Fatalf("the test needs the host's zone data (apt install tzdata): %v", err)
		}
		// Rename over the old file, as an atomic writer does; a new
		// modification time is not guaranteed within one clock tick, so
		// set one.
		tmp := z.path + ".tmp"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(tmp, time.Now(), time.Now().Add(time.Duration(tc.want)*time.Second))
		if err := os.Rename(tmp, z.path); err != nil {
			t.Fatal(err)
		}
		if got := offset(); got != tc.want {
			t.Errorf("after writing %s the offset is %d s, want %d", tc.zone, got, tc.want)
		}
	}
	if err := os.WriteFile(z.path, []byte("not a zone"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := offset(); got != 0 {
		t.Errorf("with a damaged zone file the offset is %d s, want 0 (UTC)", got)
	}
}
