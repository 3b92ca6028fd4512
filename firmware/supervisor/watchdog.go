package supervisor

import (
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Watchdog is an open Linux watchdog device (/dev/watchdog). Once opened the
// board resets unless Pet is called within the timeout; Close disarms it
// with the magic 'V' so an orderly shutdown is not cut short by a reset.
type Watchdog struct {
	mu      sync.Mutex
	f       *os.File
	Timeout time.Duration // as the driver reports it; 0 if unknown
}

// OpenWatchdog opens the device and asks for timeout. A driver that does not
// support setting the timeout keeps its own; Timeout says which applies.
func OpenWatchdog(path string, timeout time.Duration) (*Watchdog, []string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open watchdog %s: %w", path, err)
	}
	w := &Watchdog{f: f}
	var notes []string
	fd := int(f.Fd())
	if secs := int(timeout / time.Second); secs > 0 {
		if err := unix.IoctlSetPointerInt(fd, unix.WDIOC_SETTIMEOUT, secs); err != nil {
			notes = append(notes, fmt.Sprintf("watchdog %s: cannot set timeout %ds: %v; keeping the driver's", path, secs, err))
		}
	}
	if secs, err := unix.IoctlGetInt(fd, unix.WDIOC_GETTIMEOUT); err == nil {
		w.Timeout = time.Duration(secs) * time.Second
	}
	return w, notes, nil
}

// Pet tells the watchdog the system is alive. A write works on every
// driver (WDIOC_KEEPALIVE is optional).
func (w *Watchdog) Pet() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return os.ErrClosed
	}
	if _, err := w.f.Write([]byte{0}); err != nil {
		return fmt.Errorf("pet watchdog: %w", err)
	}
	return nil
}

// Close disarms the watchdog with the magic character and closes it. A
// driver built with nowayout ignores the magic and resets the board after
// the timeout anyway; that is the driver's policy, not an error here.
func (w *Watchdog) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	_, werr := w.f.Write([]byte("V"))
	cerr := w.f.Close()
	w.f = nil
	if werr != nil {
		return fmt.Errorf("disarm watchdog: %w", werr)
	}
	return cerr
}
