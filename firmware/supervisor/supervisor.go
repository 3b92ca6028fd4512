// Package supervisor runs the appliance's services: it starts them from a
// declared table in dependency order, restarts them with exponential backoff,
// keeps their output and the kernel log in bounded RAM rings (optionally
// forwarded to a remote syslog), pets the hardware watchdog from its
// supervision loop, stops them in reverse order on shutdown, and serves all
// of this on a local API: one JSON request line and one JSON answer line per
// connection on a unix socket (protocol.go), so that PID 1 links no
// net/http.
//
// The supervisor runs inside PID 1 (see firmware/pid1): one reaper,
// wait4(-1), collects every child and every orphan, and hands the exit
// statuses of services to the supervisor by pid. For that reason the package
// starts processes with syscall.ForkExec and never waits for them itself, and
// nothing else in the process may use os/exec.
package supervisor

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// State is where a service is in its life.
type State string

const (
	StateWaiting  State = "waiting"  // for a dependency to be ready or a condition
	StateRunning  State = "running"  // a process exists
	StateBackoff  State = "backoff"  // exited or failed to start; restart scheduled
	StateStopping State = "stopping" // SIGTERM sent, waiting for the exit
	StateStopped  State = "stopped"  // stopped on request, or exited under its restart policy
)

// Config is what a Supervisor needs. Only Services is required.
type Config struct {
	Services []Service
	Backoff  Backoff // zero means DefaultBackoff

	// Conditions are the names services may list in Needs. Each is
	// pending until Provide is called with it.
	Conditions []string

	// LogBytes bounds each service's log ring; zero means 32 KiB.
	LogBytes int

	// Logf receives the supervisor's own messages (the console, in PID 1).
	Logf func(format string, args ...any)

	// Watchdog, if set, is petted every PetInterval from the supervision
	// loop while the supervisor's state lock can be taken, so a wedged
	// supervisor resets the board.
	Watchdog    *Watchdog
	PetInterval time.Duration // zero means 5 s

	// Syslog, if set, forwards every log ring to a remote syslog server
	// from the start; SetRemoteSyslog changes it later (configd does,
	// when the config changes).
	Syslog *SyslogConfig

	// Power is called by the API's reboot and poweroff ops. It must
	// return quickly (PID 1 hands the request to its main loop).
	Power func(PowerAction) error

	// ConsoleBaud restarts the console getty at this speed; nil: the box
	// runs no console getty. The API checks the speed before calling it.
	ConsoleBaud func(baud int) error
}

// PowerAction is a request to end the running system.
type PowerAction string

const (
	Reboot   PowerAction = "reboot"
	PowerOff PowerAction = "poweroff"
)

// Supervisor owns the running services. Its methods are safe for concurrent
// use by the reaper, the API and timers.
type Supervisor struct {
	cfg    Config
	self   *Ring // the supervisor's own messages
	kernel *Ring // /dev/kmsg
	syslog *syslogForwarder

	apiTimeout time.Duration // for each API connection's read, then write; tests shorten it

	mu            sync.Mutex
	procs         []*proc
	pending       map[string]bool // conditions not provided yet
	byName        map[string]*proc
	byPid         map[int]*proc
	shuttingDown  bool
	stopPetting   bool
	petErr        error
	pets          uint64
	orphansReaped uint64
}

// proc is the supervisor's record of one service.
type proc struct {
	spec Service
	ring *Ring

	state    State
	pid      int
	ready    bool      // this run is ready (NotifiesReady: it said so)
	started  time.Time // of the current or last run
	starts   int
	delay    time.Duration // last backoff delay
	nextTry  time.Time
	timer    *time.Timer // pending restart or SIGKILL
	exited   chan struct{}
	lastExit string // "exit status 1", "signal: killed", or a start error
	lastCode int    // exit code, or -1 for a signal or a start error

	stopRequested    bool
	restartRequested bool

	// waitSince is when the service began to wait for its After;
	// waitTimer starts it without them when AfterWait has passed.
	waitSince time.Time
	waitTimer *time.Timer
}

// New validates the table and returns a supervisor that has started nothing.
func New(cfg Config) (*Supervisor, error) {
	if err := validateTable(cfg.Services, cfg.Conditions); err != nil {
		return nil, err
	}
	if cfg.Backoff == (Backoff{}) {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.LogBytes == 0 {
		cfg.LogBytes = 32 << 10
	}
	if cfg.PetInterval == 0 {
		cfg.PetInterval = 5 * time.Second
	}
	s := &Supervisor{
		cfg:        cfg,
		self:       NewRing(cfg.LogBytes),
		kernel:     NewRing(64 << 10),
		apiTimeout: defaultAPITimeout,
		byName:     map[string]*proc{},
		byPid:      map[int]*proc{},
		pending:    map[string]bool{},
	}
	for _, c := range cfg.Conditions {
		s.pending[c] = true
	}
	for _, spec := range cfg.Services {
		p := &proc{spec: spec, ring: NewRing(cfg.LogBytes), state: StateWaiting, waitSince: time.Now()}
		s.procs = append(s.procs, p)
		s.byName[spec.Name] = p
	}
	if cfg.Syslog != nil {
		if err := s.SetRemoteSyslog(cfg.Syslog); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Supervisor) logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.self.Append(Line{Time: time.Now(), Stream: "supervisor", Text: msg})
	if s.cfg.Logf != nil {
		s.cfg.Logf("%s", msg)
	}
}

// Start starts every service whose dependencies are ready. Services
// waiting for a dependency start as soon as it is ready, or when their
// AfterWait has passed.
func (s *Supervisor) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, p := range s.procs {
		if p.state == StateWaiting && !p.stopRequested {
			s.beginWaitLocked(p, now)
		}
	}
	s.startReadyLocked()
}

// beginWaitLocked starts p's bounded wait for its After: when AfterWait
// has passed, the timer starts it whether they are ready or not.
func (s *Supervisor) beginWaitLocked(p *proc, now time.Time) {
	p.waitSince = now
	s.stopWaitTimerLocked(p)
	if len(p.spec.After) == 0 {
		return
	}
	p.waitTimer = time.AfterFunc(p.spec.afterWait(), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.startReadyLocked()
	})
}

func (s *Supervisor) stopWaitTimerLocked(p *proc) {
	if p.waitTimer != nil {
		p.waitTimer.Stop()
		p.waitTimer = nil
	}
}

// startReadyLocked starts, in table order, the waiting services whose
// conditions hold and whose dependencies are all ready, or have been
// waited for long enough. Table order is a topological order, so one pass
// suffices.
func (s *Supervisor) startReadyLocked() {
	if s.shuttingDown {
		return
	}
	now := time.Now()
	for _, p := range s.procs {
		if p.state != StateWaiting || p.stopRequested {
			continue
		}
		ok, late := s.depsReadyLocked(p, now)
		if !ok {
			continue
		}
		if len(late) > 0 {
			s.logf("%s: starting anyway after waiting %s for %s",
				p.spec.Name, p.spec.afterWait(), s.describeDepsLocked(late))
		}
		s.startLocked(p)
	}
}

// Provide marks a condition as holding and starts the services that were
// waiting only for it. Providing it again does nothing.
func (s *Supervisor) Provide(condition string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pending, declared := s.pending[condition]
	if !declared {
		return fmt.Errorf("provide %q: no such condition", condition)
	}
	if pending {
		s.pending[condition] = false
		s.Note(fmt.Sprintf("condition %s holds", condition))
		s.startReadyLocked()
	}
	return nil
}

// depsReadyLocked reports whether p may start: its conditions hold, and
// its After are ready or its AfterWait has passed since it began to wait.
// late lists the dependencies it then starts without.
func (s *Supervisor) depsReadyLocked(p *proc, now time.Time) (ok bool, late []string) {
	for _, c := range p.spec.Needs {
		if s.pending[c] {
			return false, nil
		}
	}
	for _, dep := range p.spec.After {
		if !s.byName[dep].isReady() {
			late = append(late, dep)
		}
	}
	if len(late) > 0 && now.Sub(p.waitSince) < p.spec.afterWait() {
		return false, nil
	}
	return true, late
}

// isReady reports whether the service runs and, if it notifies, has said
// it is ready in this run.
func (p *proc) isReady() bool {
	return p.state == StateRunning && p.ready
}

// describeDepsLocked names services and what they are doing, for the log
// line of a dependant that stops waiting for them: "configd (backoff, last
// exit: exit status 1)", "configd (running, has not said it is ready),
// console (waiting)".
func (s *Supervisor) describeDepsLocked(names []string) string {
	var parts []string
	for _, n := range names {
		d := s.byName[n]
		what := string(d.state)
		switch {
		case d.state == StateRunning:
			what += ", has not said it is ready"
		case d.lastExit != "":
			what += ", last exit: " + d.lastExit
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", n, what))
	}
	return strings.Join(parts, ", ")
}

// startLocked forks the service. A start failure (missing binary, no memory
// for a pipe) is treated like an immediate exit: reported and retried with
// backoff, never fatal to the supervisor or to the other services.
func (s *Supervisor) startLocked(p *proc) {
	now := time.Now()
	p.timer = nil
	s.stopWaitTimerLocked(p)
	pid, readyPipe, err := s.forkLocked(p)
	p.started = now
	if err != nil {
		p.lastExit = err.Error()
		p.lastCode = -1
		s.logf("%s: cannot start: %v", p.spec.Name, err)
		p.ring.Append(Line{Time: now, Stream: "supervisor", Text: "cannot start: " + err.Error()})
		s.scheduleRestartLocked(p, 0)
		return
	}
	if p.starts > 0 {
		s.logf("%s: restarted (pid %d, restart %d)", p.spec.Name, pid, p.starts)
	} else {
		// Routine: kept in the log, not printed where it would land in
		// the middle of the console's login prompt.
		s.Note(fmt.Sprintf("%s: started (pid %d)", p.spec.Name, pid))
	}
	p.starts++
	p.pid = pid
	p.state = StateRunning
	p.ready = !p.spec.NotifiesReady
	p.exited = make(chan struct{})
	s.byPid[pid] = p
	if readyPipe != nil {
		go s.watchReady(p, pid, readyPipe)
	}
	s.startReadyLocked()
}

// forkLocked starts a run of p. For a service that notifies its
// readiness it also returns the read end of the run's readiness pipe.
func (s *Supervisor) forkLocked(p *proc) (int, *os.File, error) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer devnull.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return 0, nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return 0, nil, fmt.Errorf("stderr pipe: %w", err)
	}
	env := p.spec.Env
	if env == nil {
		env = []string{"PATH=/bbin:/bin:/sbin:/usr/bin:/usr/sbin"}
	}
	argv := append([]string{p.spec.Path}, p.spec.Args...)
	files := []uintptr{devnull.Fd(), outW.Fd(), errW.Fd()}
	for _, f := range p.spec.ExtraFiles {
		files = append(files, f.Fd())
	}
	var readyR, readyW *os.File
	if p.spec.NotifiesReady {
		if readyR, readyW, err = os.Pipe(); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return 0, nil, fmt.Errorf("readiness pipe: %w", err)
		}
		// The descriptor after the extra files; a copy of the
		// environment, never the table's own slice.
		env = append(slices.Clip(env), fmt.Sprintf("%s=%d", ReadyFDEnv, len(files)))
		files = append(files, readyW.Fd())
	}
	// Its own session: the service gets its own process group (so stop
	// signals reach its children too) and may take a controlling
	// terminal (the console getty does).
	sys := &syscall.SysProcAttr{Setsid: true}
	if u := p.spec.User; u != nil {
		// setgroups, setgid, setuid in the child before exec: a non-zero
		// uid leaves every capability behind but the ambient ones named
		// (Go keeps them across setuid and raises them before exec).
		groups := append([]uint32{}, u.Groups...)
		sys.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: groups}
		sys.AmbientCaps = u.Caps
	}
	pid, err := forkExecNoNewPrivs(p.spec.Path, argv, &syscall.ProcAttr{
		Dir:   "/",
		Env:   env,
		Files: files,
		Sys:   sys,
	}, p.spec.Syscalls)
	outW.Close()
	errW.Close()
	if readyW != nil {
		readyW.Close()
	}
	if err != nil {
		outR.Close()
		errR.Close()
		if readyR != nil {
			readyR.Close()
		}
		return 0, nil, fmt.Errorf("exec %s: %w", p.spec.Path, err)
	}
	for _, pipe := range []struct {
		r      *os.File
		stream string
	}{{outR, "stdout"}, {errR, "stderr"}} {
		go func(r io.ReadCloser, stream string) {
			defer r.Close()
			p.ring.copyLines(r, stream, time.Now)
		}(pipe.r, pipe.stream)
	}
	return pid, readyR, nil
}

// scheduleRestartLocked puts p in backoff after a run of length ran.
func (s *Supervisor) scheduleRestartLocked(p *proc, ran time.Duration) {
	p.delay = s.cfg.Backoff.Next(p.delay, ran)
	p.state = StateBackoff
	p.nextTry = time.Now().Add(p.delay)
	p.timer = time.AfterFunc(p.delay, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if p.state == StateBackoff && !s.shuttingDown && !p.stopRequested {
			s.startLocked(p)
		}
	})
}

// Exited records the exit of a child reaped by the reaper. It reports
// whether pid was a service; orphans reparented to PID 1 are not.
func (s *Supervisor) Exited(pid int, ws unix.WaitStatus) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.byPid[pid]
	if !ok {
		return false
	}
	delete(s.byPid, pid)
	now := time.Now()
	ran := now.Sub(p.started)
	p.pid = 0
	p.ready = false
	p.lastExit, p.lastCode = describeExit(ws)
	if p.timer != nil { // a pending SIGKILL
		p.timer.Stop()
		p.timer = nil
	}
	// Leftovers in its process group (children it forked) die with it, so
	// a restart never runs next to the old instance's helpers.
	unix.Kill(-pid, unix.SIGKILL)
	// Waiters (Shutdown) wake once the exit is recorded and logged below;
	// a restart below makes a new channel for the next run.
	defer close(p.exited)
	p.ring.Append(Line{Time: now, Stream: "supervisor", Text: "exited: " + p.lastExit})

	switch {
	case s.shuttingDown || p.stopRequested:
		p.state = StateStopped
		s.logf("%s: stopped (%s)", p.spec.Name, p.lastExit)
	case p.restartRequested:
		p.restartRequested = false
		p.delay = 0
		s.startLocked(p)
	case p.spec.Restart == RestartNever,
		p.spec.Restart == RestartOnFailure && ws.Exited() && ws.ExitStatus() == 0:
		p.state = StateStopped
		s.logf("%s: %s, not restarted (policy %s)", p.spec.Name, p.lastExit, p.spec.Restart)
	default:
		s.scheduleRestartLocked(p, ran)
		s.logf("%s: %s after %s; restarting in %s", p.spec.Name, p.lastExit, ran.Round(time.Millisecond), p.delay)
	}
	return true
}

func describeExit(ws unix.WaitStatus) (string, int) {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exit status %d", ws.ExitStatus()), ws.ExitStatus()
	case ws.Signaled():
		if ws.CoreDump() {
			return fmt.Sprintf("signal: %v (core dumped)", ws.Signal()), -1
		}
		return fmt.Sprintf("signal: %v", ws.Signal()), -1
	}
	return fmt.Sprintf("wait status %#x", uint32(ws)), -1
}

// ErrUnknownService is returned for a name not in the table.
var ErrUnknownService = errors.New("unknown service")

func (s *Supervisor) lookupLocked(name string) (*proc, error) {
	p, ok := s.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownService, name)
	}
	return p, nil
}

// Stop stops a service and keeps it stopped until StartService or Restart.
// It returns once the stop signal is sent.
func (s *Supervisor) Stop(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.lookupLocked(name)
	if err != nil {
		return err
	}
	p.stopRequested = true
	p.restartRequested = false
	switch p.state {
	case StateRunning:
		s.terminateLocked(p)
	case StateBackoff, StateWaiting:
		if p.timer != nil {
			p.timer.Stop()
			p.timer = nil
		}
		s.stopWaitTimerLocked(p)
		p.state = StateStopped
	}
	s.logf("%s: stop requested", name)
	return nil
}

// Restart stops a running service and starts it again at once, or starts a
// stopped or backing-off one now. The restart counts in its restarts.
func (s *Supervisor) Restart(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shuttingDown {
		return errors.New("shutting down")
	}
	p, err := s.lookupLocked(name)
	if err != nil {
		return err
	}
	p.stopRequested = false
	switch p.state {
	case StateRunning:
		p.restartRequested = true
		s.terminateLocked(p)
	case StateStopping:
		p.restartRequested = true
	case StateBackoff, StateStopped:
		if p.timer != nil {
			p.timer.Stop()
			p.timer = nil
		}
		p.delay = 0
		p.state = StateWaiting
		s.beginWaitLocked(p, time.Now())
		s.startReadyLocked()
	}
	s.logf("%s: restart requested", name)
	return nil
}

// terminateLocked sends SIGTERM to the service's process group and arms a
// SIGKILL for when its stop timeout expires.
func (s *Supervisor) terminateLocked(p *proc) {
	p.state = StateStopping
	pid := p.pid
	unix.Kill(-pid, unix.SIGTERM)
	timeout := p.spec.StopTimeout
	if timeout == 0 {
		timeout = DefaultStopTimeout
	}
	p.timer = time.AfterFunc(timeout, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if p.pid == pid && p.state == StateStopping {
			s.logf("%s: did not stop within %s of SIGTERM; sending SIGKILL", p.spec.Name, timeout)
			unix.Kill(-pid, unix.SIGKILL)
		}
	})
}

// Shutdown stops every service in reverse table order, each with SIGTERM
// and, after its stop timeout, SIGKILL, and waits for each exit before
// stopping the next, so that a service never loses one it depends on while
// it is still running. A process that survives SIGKILL (stuck in the
// kernel) is waited for at most killWait before Shutdown moves on.
// After Shutdown nothing is restarted.
func (s *Supervisor) Shutdown(killWait time.Duration) {
	s.mu.Lock()
	s.shuttingDown = true
	for _, p := range s.procs {
		if p.state != StateRunning && p.state != StateStopping && p.timer != nil {
			p.timer.Stop()
			p.timer = nil
		}
		s.stopWaitTimerLocked(p)
	}
	procs := append([]*proc(nil), s.procs...)
	s.mu.Unlock()

	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		s.mu.Lock()
		if p.state != StateRunning && p.state != StateStopping {
			if p.state != StateStopped {
				p.state = StateStopped
			}
			s.mu.Unlock()
			continue
		}
		if p.state == StateRunning {
			s.terminateLocked(p)
		}
		exited := p.exited
		timeout := p.spec.StopTimeout
		if timeout == 0 {
			timeout = DefaultStopTimeout
		}
		s.mu.Unlock()
		select {
		case <-exited:
		case <-time.After(timeout + killWait):
			s.logf("%s: still not gone %s after SIGKILL; leaving it", p.spec.Name, killWait)
		}
	}
}

// Note adds a line to the supervisor's own log without printing it: PID 1
// replays what it printed during boot, before the supervisor existed.
func (s *Supervisor) Note(text string) {
	s.self.Append(Line{Time: time.Now(), Stream: "supervisor", Text: text})
}
