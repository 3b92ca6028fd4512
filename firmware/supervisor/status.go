package supervisor

import (
	"time"
)

// ServiceStatus is one service as the API reports it.
type ServiceStatus struct {
	Name     string   `json:"name"`
	State    State    `json:"state"`
	PID      int      `json:"pid,omitempty"`
	Restarts int      `json:"restarts"` // starts after the first
	Uptime   Duration `json:"uptime"`   // of the current run, zero unless running
	LastExit string   `json:"last_exit,omitempty"`
	// LastExitCode is the last exit code, -1 for a signal or a start
	// failure; meaningful only when LastExit is set.
	LastExitCode int      `json:"last_exit_code"`
	NextStartIn  Duration `json:"next_start_in,omitempty"` // in backoff
	WaitingFor   []string `json:"waiting_for,omitempty"`   // dependencies not ready, conditions not provided
	// NotReady: running, but it has not said it is ready yet
	// (Service.NotifiesReady); the services After it still wait.
	NotReady bool     `json:"not_ready,omitempty"`
	Restart  string   `json:"restart_policy"`
	Command  []string `json:"command"`
}

// Duration marshals as seconds in JSON, which scripts and the web UI can
// use without parsing Go duration strings.
type Duration float64

// Seconds converts d.
func (d Duration) Seconds() float64 { return float64(d) }

// Std converts d to a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(float64(d) * float64(time.Second)) }

func seconds(d time.Duration) Duration { return Duration(d.Round(time.Millisecond).Seconds()) }

// Status returns every service in table order.
func (s *Supervisor) Status() []ServiceStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	out := make([]ServiceStatus, 0, len(s.procs))
	for _, p := range s.procs {
		out = append(out, s.statusLocked(p, now))
	}
	return out
}

// ServiceStatus returns one service.
func (s *Supervisor) ServiceStatus(name string) (ServiceStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.lookupLocked(name)
	if err != nil {
		return ServiceStatus{}, err
	}
	return s.statusLocked(p, time.Now()), nil
}

func (s *Supervisor) statusLocked(p *proc, now time.Time) ServiceStatus {
	st := ServiceStatus{
		Name:         p.spec.Name,
		State:        p.state,
		PID:          p.pid,
		LastExit:     p.lastExit,
		LastExitCode: p.lastCode,
		Restart:      p.spec.Restart.String(),
		Command:      append([]string{p.spec.Path}, p.spec.Args...),
	}
	if p.starts > 1 {
		st.Restarts = p.starts - 1
	}
	if p.state == StateRunning || p.state == StateStopping {
		st.Uptime = seconds(now.Sub(p.started))
	}
	st.NotReady = p.state == StateRunning && !p.ready
	if p.state == StateBackoff {
		st.NextStartIn = seconds(max(p.nextTry.Sub(now), 0))
	}
	if p.state == StateWaiting {
		for _, c := range p.spec.Needs {
			if s.pending[c] {
				st.WaitingFor = append(st.WaitingFor, c)
			}
		}
		for _, dep := range p.spec.After {
			if !s.byName[dep].isReady() {
				st.WaitingFor = append(st.WaitingFor, dep)
			}
		}
	}
	return st
}

// Logs returns the last n lines of a service's log ring ("kernel" is the
// kernel log, "supervisor" the supervisor's own messages), and the number of
// lines dropped from it so far.
func (s *Supervisor) Logs(name string, n int) ([]Line, uint64, error) {
	switch name {
	case "kernel":
		l, d := s.kernel.Lines(n)
		return l, d, nil
	case "supervisor":
		l, d := s.self.Lines(n)
		return l, d, nil
	}
	s.mu.Lock()
	p, err := s.lookupLocked(name)
	s.mu.Unlock()
	if err != nil {
		return nil, 0, err
	}
	l, d := p.ring.Lines(n)
	return l, d, nil
}
