package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/waitfor"
)

// A regular file stands in for /dev/watchdog: the protocol is what is
// written to it (a byte per pet, 'V' to disarm). The timeout ioctls fail on
// a regular file, which exercises the driver-keeps-its-timeout path.
func TestWatchdogProtocol(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watchdog")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wd, notes, err := OpenWatchdog(path, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "cannot set timeout 30s") {
		t.Errorf("notes %q, want one saying the timeout could not be set", notes)
	}
	for range 3 {
		if err := wd.Pet(); err != nil {
			t.Fatal(err)
		}
	}
	if err := wd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := wd.Pet(); err == nil {
		t.Error("Pet after Close succeeded")
	}
	got, _ := os.ReadFile(path)
	if string(got) != "\x00\x00\x00V" {
		t.Errorf("device saw %q, want three pets then the magic V", got)
	}
}

func TestSupervisionLoopPetsUntilStopped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "watchdog")
	os.WriteFile(path, nil, 0o600)
	wd, _, err := OpenWatchdog(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer wd.Close()
	s := start(t, Config{Watchdog: wd, PetInterval: 2 * time.Millisecond})
	waitfor.Cond(t, 10*time.Second, "3 pets", func() bool { return s.SystemStatus().Watchdog.Pets >= 3 })
	if err := s.StopPetting(); err != nil {
		t.Fatal(err)
	}
	// After StopPetting returns no further pet can happen: petting
	// happens under the same lock.
	n := s.SystemStatus().Watchdog.Pets
	size := fileSize(t, path)
	time.Sleep(20 * time.Millisecond) // ten pet intervals
	if got := s.SystemStatus(); got.Watchdog.Pets != n || got.Watchdog.Petting {
		t.Errorf("pets went from %d to %d (petting %v) after StopPetting", n, got.Watchdog.Pets, got.Watchdog.Petting)
	}
	if fileSize(t, path) != size {
		t.Error("the device was written after StopPetting")
	}
}

func fileSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
