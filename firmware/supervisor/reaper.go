package supervisor

import (
	"context"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/unix"
)

// Reap collects every terminated child of this process until ctx is done:
// services, and in PID 1 (or a child subreaper) every orphan reparented to
// it, so no zombie outlives a SIGCHLD. Each exit is passed to onExit.
//
// Reap must be the only waiter in the process: a concurrent Wait (os/exec)
// would race it for exit statuses.
func Reap(ctx context.Context, onExit func(pid int, ws unix.WaitStatus)) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGCHLD)
	defer signal.Stop(sigs)
	// SIGCHLDs coalesce, so each wake-up drains all exits; the slow tick
	// is a backstop that costs nothing when there is nothing to reap.
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		reapAll(onExit)
		select {
		case <-ctx.Done():
			return
		case <-sigs:
		case <-tick.C:
		}
	}
}

func reapAll(onExit func(pid int, ws unix.WaitStatus)) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 { // ECHILD: no children; 0: none exited
			return
		}
		onExit(pid, ws)
	}
}
