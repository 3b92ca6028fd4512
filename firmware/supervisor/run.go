package supervisor

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"golang.org/x/sys/unix"
)

// Run starts the services and the reaper and runs the supervision loop
// until ctx is done. The loop pets the watchdog only after taking the
// supervisor's state lock, so a deadlocked supervisor stops petting and the
// board resets.
func (s *Supervisor) Run(ctx context.Context) {
	go s.guard("reaper", func() {
		Reap(ctx, func(pid int, ws unix.WaitStatus) {
			if !s.Exited(pid, ws) {
				s.mu.Lock()
				s.orphansReaped++
				s.mu.Unlock()
			}
		})
	})
	s.Start()
	tick := time.NewTicker(s.cfg.PetInterval)
	defer tick.Stop()
	s.supervise()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.supervise()
		}
	}
}

// supervise is one turn of the supervision loop.
func (s *Supervisor) supervise() {
	s.mu.Lock()
	defer s.mu.Unlock()
	wd := s.cfg.Watchdog
	if wd == nil || s.stopPetting {
		return
	}
	err := wd.Pet()
	if err != nil && s.petErr == nil {
		s.logf("%v", err) // once, not every turn
	}
	s.petErr = err
	s.pets++
}

// StopPetting stops petting the watchdog for good. It is the test hook for
// the watchdog reset (the VM test calls it through the API and expects the
// board to reset within the watchdog timeout); it has no other use.
func (s *Supervisor) StopPetting() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Watchdog == nil {
		return fmt.Errorf("no watchdog is open")
	}
	s.stopPetting = true
	s.logf("watchdog: petting stopped on request; the board resets when the watchdog expires (timeout %s; qemu's i6300esb takes two)", s.cfg.Watchdog.Timeout)
	return nil
}

// guard runs f and turns a panic into a log line: in PID 1 an unrecovered
// panic in any goroutine kills the process and panics the kernel.
func (s *Supervisor) guard(what string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			s.logf("%s: panic: %v\n%s", what, r, debug.Stack())
		}
	}()
	f()
}
