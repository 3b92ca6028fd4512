package supervisor

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The readiness contract between the supervisor and a service declared
// with NotifiesReady: the supervisor starts the service with the write end
// of a pipe as one of its descriptors and names that descriptor in the
// environment variable ReadyFDEnv; the service writes a newline to it when
// it serves (configd: its sockets are bound and its database is open; the
// console: its first prompt is on the line) and closes it. The services
// that wait for it (Service.After) start then, not when its process merely
// exists. It is s6's notification-fd, with the descriptor named in the
// environment rather than in a file.

// ReadyFDEnv is the environment variable naming the readiness descriptor.
const ReadyFDEnv = "FLASHGATE_READY_FD"

// NotifyReady tells the supervisor that started this process that it is
// ready: it writes a newline to the descriptor ReadyFDEnv names, closes it
// and removes the variable, so that the service's children (the console's
// shell) inherit neither. A process started some other way (by hand, by a
// test) has no such variable, and NotifyReady does nothing. Call it once.
func NotifyReady() error {
	v, ok := os.LookupEnv(ReadyFDEnv)
	if !ok {
		return nil
	}
	os.Unsetenv(ReadyFDEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return fmt.Errorf("readiness: %s=%q is not a descriptor above stderr", ReadyFDEnv, v)
	}
	// The descriptor is the supervisor's pipe; a short write of one
	// byte cannot happen, and a reader that is gone (the supervisor
	// stopped listening) gives EPIPE, not a signal: Go ignores SIGPIPE
	// on descriptors other than stdout and stderr.
	_, err = unix.Write(fd, []byte("\n"))
	unix.Close(fd)
	if err != nil {
		return fmt.Errorf("readiness: write to descriptor %d: %w", fd, err)
	}
	return nil
}

// readyLineMax bounds what the supervisor reads from a readiness pipe
// before the newline: a service that writes something else is not ready.
const readyLineMax = 64

// watchReady reads one run's readiness pipe until the newline (ready) or
// the end (the run ended or closed it without a word), then closes it.
func (s *Supervisor) watchReady(p *proc, pid int, r *os.File) {
	defer r.Close()
	br := bufio.NewReaderSize(r, readyLineMax)
	for n := 0; n < readyLineMax; n++ {
		b, err := br.ReadByte()
		if err != nil {
			return
		}
		if b == '\n' {
			s.markReady(p, pid)
			return
		}
	}
}

// markReady records that the run pid of p is ready and starts the services
// that waited for it. A notification from a run that has ended (or is
// being stopped) counts for nothing.
func (s *Supervisor) markReady(p *proc, pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.pid != pid || p.state != StateRunning || p.ready {
		return
	}
	p.ready = true
	s.Note(fmt.Sprintf("%s: ready %s after its start", p.spec.Name, time.Since(p.started).Round(time.Millisecond)))
	s.startReadyLocked()
}
