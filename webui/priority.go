package webui

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// lowerPriority sets every thread of this process to nice value n. On a
// single-core board the web UI competes with the daemons that negotiate
// tunnels and move packets, and a login alone (argon2id) takes most of a
// second of a 500 MHz CPU: an admin logging in or watching the dashboard
// must not hold up an IKE exchange. Linux keeps the nice value per thread
// and a new thread inherits its creator's, so once every thread is lowered
// every later one is too; the thread list is walked three times because
// the runtime may start threads meanwhile from one not lowered yet.
func lowerPriority(n int) error {
	for range 3 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("list threads: %w", err)
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			// A thread may have exited since the listing: ESRCH is fine.
			if err := unix.Setpriority(unix.PRIO_PROCESS, tid, n); err != nil && err != unix.ESRCH {
				return fmt.Errorf("set nice %d on thread %d: %w", n, tid, err)
			}
		}
	}
	return nil
}
