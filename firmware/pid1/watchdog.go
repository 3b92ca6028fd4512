package pid1

import (
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/flashgate/flashgate/firmware/supervisor"
)

// watchdogTimeout is what the hardware watchdog is set to: long enough
// that a busy 500 MHz Geode never misses a pet (every petInterval), short
// enough that a hung box is back within a minute.
const (
	watchdogTimeout = 20 * time.Second
	petInterval     = 4 * time.Second
)

// openWatchdog opens /dev/watchdog once the board's driver (loaded with the
// other modules) has registered it. Missing hardware is one log line.
func openWatchdog(dev, driver string, logf func(string, ...any)) *supervisor.Watchdog {
	if dev == "" {
		logf("watchdog: disabled")
		return nil
	}
	var err error
	for try := 0; try < 20; try++ {
		if _, err = os.Stat(dev); err == nil {
			break
		}
		if driver == "" {
			break // nothing to wait for
		}
		time.Sleep(100 * time.Millisecond)
	}
	if errors.Is(err, fs.ErrNotExist) {
		if driver == "" {
			logf("watchdog: this board has no hardware watchdog; running without one")
		} else {
			logf("watchdog: %s did not appear (driver %q); running without a watchdog", dev, driver)
		}
		return nil
	}
	wd, notes, err := supervisor.OpenWatchdog(dev, watchdogTimeout)
	for _, n := range notes {
		logf("%s", n)
	}
	if err != nil {
		logf("watchdog: %v; running without one", err)
		return nil
	}
	logf("watchdog: %s armed, timeout %s", dev, wd.Timeout)
	return wd
}
