package pid1

import (
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/firmware/supervisor"
)

// How long processes get to go at shutdown.
const (
	killWait     = 3 * time.Second // after a service's SIGKILL
	strayTimeout = 2 * time.Second // processes outside the service table
)

// shutdown ends the running system: services stopped in reverse order,
// then every other process, the config partition unmounted, the watchdog
// disarmed, and reboot(2). It does not return; if reboot(2) fails PID 1
// stays alive, reaping, and says so.
func (in *initProc) shutdown(action supervisor.PowerAction) {
	in.logf("%s: stopping services", action)
	if in.sup != nil {
		in.sup.Shutdown(killWait)
	}
	// Processes not in the table (a shell from the console, helpers
	// whose parent died) could hold /cfg open.
	unix.Kill(-1, unix.SIGTERM)
	deadline := time.Now().Add(strayTimeout)
	for time.Now().Before(deadline) && othersAlive() {
		time.Sleep(50 * time.Millisecond)
	}
	unix.Kill(-1, unix.SIGKILL)
	unix.Sync()
	if in.cfgDev != "" {
		unmountConfig(in.logf)
	}
	unix.Sync()
	if in.watchdog != nil {
		if err := in.watchdog.Close(); err != nil {
			in.logf("%v", err)
		}
	}
	cmd, word := unix.LINUX_REBOOT_CMD_RESTART, "rebooting"
	if action == supervisor.PowerOff {
		cmd, word = unix.LINUX_REBOOT_CMD_POWER_OFF, "powering off"
	}
	in.logf("%s", word)
	err := unix.Reboot(cmd)
	in.logf("reboot(2) failed: %v; staying up (power-cycle the box)", err)
	select {}
}

// othersAlive reports whether any user process besides PID 1 is left.
// kill(-1, 0) cannot tell: it succeeds on kernel threads too. Kernel
// threads (and zombies, which the reaper is collecting) have an empty
// /proc/<pid>/cmdline.
func othersAlive() bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && len(b) > 0 {
			return true
		}
	}
	return false
}
