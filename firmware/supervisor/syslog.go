package supervisor

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"
)

// SyslogConfig says where log lines are forwarded. configd sets it (through
// SetRemoteSyslog) once the config store has a syslog server.
type SyslogConfig struct {
	Addr     string `json:"addr"`     // host:port, UDP
	Format   string `json:"format"`   // "rfc5424" (default) or "rfc3164"
	Hostname string `json:"hostname"` // our name in the messages
}

// Syslog facilities used (RFC 5424 section 6.2.1).
const (
	facilityKern   = 0
	facilityDaemon = 3
	severityInfo   = 6
)

// syslogForwarder sends lines over UDP from one goroutine. Appending to a
// ring never blocks on the network: when the queue is full lines are
// dropped and counted.
type syslogForwarder struct {
	cfg     SyslogConfig
	conn    net.Conn
	queue   chan syslogMsg // never closed: a ring may still hold the old tap
	stop    chan struct{}
	dropped atomic.Uint64
	sent    atomic.Uint64
}

type syslogMsg struct {
	app  string
	line Line
}

func newSyslogForwarder(cfg SyslogConfig) (*syslogForwarder, error) {
	switch cfg.Format {
	case "":
		cfg.Format = "rfc5424"
	case "rfc5424", "rfc3164":
	default:
		return nil, fmt.Errorf("syslog format %q: want rfc5424 or rfc3164", cfg.Format)
	}
	if cfg.Hostname == "" {
		cfg.Hostname = "-"
	}
	conn, err := net.Dial("udp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("syslog %s: %w", cfg.Addr, err)
	}
	f := &syslogForwarder{cfg: cfg, conn: conn, queue: make(chan syslogMsg, 256), stop: make(chan struct{})}
	go f.send()
	return f, nil
}

func (f *syslogForwarder) enqueue(app string, l Line) {
	select {
	case f.queue <- syslogMsg{app, l}:
	default:
		f.dropped.Add(1)
	}
}

func (f *syslogForwarder) send() {
	for {
		select {
		case <-f.stop:
			f.conn.Close()
			return
		case m := <-f.queue:
			// A refused datagram (no listener yet) is worth no more
			// than the count: syslog over UDP is best effort.
			if _, err := f.conn.Write(formatSyslog(f.cfg, m.app, m.line)); err != nil {
				f.dropped.Add(1)
				continue
			}
			f.sent.Add(1)
		}
	}
}

func (f *syslogForwarder) close() { close(f.stop) }

// formatSyslog renders one line as an RFC 5424 or RFC 3164 message.
func formatSyslog(cfg SyslogConfig, app string, l Line) []byte {
	facility, severity := facilityDaemon, severityInfo
	if l.Stream == "kernel" {
		facility, severity = facilityKern, l.Level
	}
	pri := facility*8 + severity
	text := strings.Map(func(r rune) rune {
		if r < ' ' {
			return ' '
		}
		return r
	}, l.Text)
	if cfg.Format == "rfc3164" {
		return fmt.Appendf(nil, "<%d>%s %s %s: %s", pri, l.Time.Format(time.Stamp), cfg.Hostname, app, text)
	}
	// HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA; MSGID carries the
	// stream so stdout and stderr stay distinguishable.
	return fmt.Appendf(nil, "<%d>1 %s %s %s - %s - %s", pri, l.Time.UTC().Format("2006-01-02T15:04:05.000000Z07:00"),
		cfg.Hostname, app, l.Stream, text)
}

// tapFor binds app in its own scope: the busybox build may compile this
// package with pre-Go 1.22 loop variable semantics.
func tapFor(f *syslogForwarder, app string) func(Line) {
	return func(l Line) { f.enqueue(app, l) }
}

// SetRemoteSyslog forwards every log ring (services, kernel, supervisor) to
// a remote syslog server; nil stops forwarding.
func (s *Supervisor) SetRemoteSyslog(cfg *SyslogConfig) error {
	var f *syslogForwarder
	if cfg != nil {
		var err error
		if f, err = newSyslogForwarder(*cfg); err != nil {
			return err
		}
	}
	s.mu.Lock()
	old := s.syslog
	s.syslog = f
	rings := map[string]*Ring{"kernel": s.kernel, "flashgate": s.self}
	for _, p := range s.procs {
		rings[p.spec.Name] = p.ring
	}
	s.mu.Unlock()
	for app, r := range rings {
		if f == nil {
			r.setTap(nil)
			continue
		}
		r.setTap(tapFor(f, app))
	}
	if old != nil {
		old.close()
	}
	if cfg != nil {
		s.logf("syslog: forwarding to %s (%s)", f.cfg.Addr, f.cfg.Format)
	} else if old != nil {
		s.logf("syslog: forwarding stopped")
	}
	return nil
}
