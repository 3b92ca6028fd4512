package supervisor

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SyslogConfig says where log lines are forwarded. configd sets it (through
// SetRemoteSyslog) once the config store has a syslog server.
type SyslogConfig struct {
	Addr     string `json:"addr"`              // host:port
	Network  string `json:"network,omitempty"` // "udp" (default) or "tcp"
	Format   string `json:"format"`            // "rfc5424" (default) or "rfc3164"
	Hostname string `json:"hostname"`          // our name in the messages
}

// Syslog facilities used (RFC 5424 section 6.2.1).
const (
	facilityKern   = 0
	facilityDaemon = 3
	severityInfo   = 6
)

// Forwarding limits. The queue bounds what a server that is away costs in
// memory (at most syslogQueueLines lines of MaxLineBytes); a TCP write
// carries up to syslogBatchLines frames at once.
const (
	syslogQueueLines  = 256
	syslogBatchLines  = 64
	syslogDialTimeout = 10 * time.Second
	// A server that accepts but does not read for this long is treated as
	// gone: the connection is dropped and dialled again.
	syslogWriteTimeout = 30 * time.Second
)

// syslogBackoff paces reconnection to a server that is away: a second, then
// doubling to 30 s; a connection that lasted a minute starts again at a second.
var syslogBackoff = Backoff{Base: time.Second, Max: 30 * time.Second, Healthy: time.Minute}

// syslogForwarder sends lines to a syslog server from one goroutine.
// Appending a line only queues it: the network never blocks a ring's
// writer. When the queue is full the oldest line is dropped and counted, so
// after an outage the server gets the most recent lines.
//
// Over UDP each line is one datagram and a refused datagram is dropped and
// counted (UDP is best effort). Over TCP lines are framed by octet counting
// (RFC 6587 section 3.4.1) and the connection is re-dialled with backoff
// whenever it fails or the server closes it; lines queue meanwhile. Lines
// the kernel had accepted on a connection the server then dropped are lost
// (syslog over TCP has no acknowledgements).
type syslogForwarder struct {
	cfg     SyslogConfig
	backoff Backoff
	logf    func(format string, args ...any) // the supervisor's own log; may be nil

	ctx    context.Context // ends when forwarding stops
	cancel context.CancelFunc
	done   chan struct{} // closed when the sending goroutine has returned

	mu    sync.Mutex
	queue []syslogMsg // ring of capacity len(queue)
	head  int         // index of the oldest queued line
	n     int         // lines queued
	wake  chan struct{}

	dropped   atomic.Uint64
	sent      atomic.Uint64
	connected atomic.Bool
}

type syslogMsg struct {
	app  string
	line Line
}

// checkSyslogConfig validates cfg and fills in the defaults.
func checkSyslogConfig(cfg SyslogConfig) (SyslogConfig, error) {
	switch cfg.Format {
	case "":
		cfg.Format = "rfc5424"
	case "rfc5424", "rfc3164":
	default:
		return cfg, fmt.Errorf("syslog format %q: want rfc5424 or rfc3164", cfg.Format)
	}
	switch cfg.Network {
	case "":
		cfg.Network = "udp"
	case "udp", "tcp":
	default:
		return cfg, fmt.Errorf("syslog network %q: want udp or tcp", cfg.Network)
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return cfg, fmt.Errorf("syslog address %q: %w", cfg.Addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || host == "" {
		return cfg, fmt.Errorf("syslog address %q: want host:port with a port from 1 to 65535", cfg.Addr)
	}
	if cfg.Hostname == "" {
		cfg.Hostname = "-"
	}
	return cfg, nil
}

// newSyslogForwarder starts forwarding to cfg's server. It does not wait
// for the network: a server that cannot be reached yet (the WAN comes up
// after PID 1, a name does not resolve yet) is dialled again with backoff
// while lines queue.
func newSyslogForwarder(cfg SyslogConfig, queueLines int, backoff Backoff, logf func(string, ...any)) (*syslogForwarder, error) {
	cfg, err := checkSyslogConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &syslogForwarder{
		cfg: cfg, backoff: backoff, logf: logf,
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
		queue: make([]syslogMsg, queueLines),
		wake:  make(chan struct{}, 1),
	}
	go f.run()
	return f, nil
}

// enqueue queues one line, dropping the oldest queued line if the queue is
// full. It never waits for the network.
func (f *syslogForwarder) enqueue(app string, l Line) {
	f.mu.Lock()
	if f.n == len(f.queue) {
		f.queue[f.head] = syslogMsg{}
		f.head = (f.head + 1) % len(f.queue)
		f.n--
		f.dropped.Add(1)
	}
	f.queue[(f.head+f.n)%len(f.queue)] = syslogMsg{app, l}
	f.n++
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default: // the sender is already due to look at the queue
	}
}

// take moves up to max of the oldest queued lines into batch.
func (f *syslogForwarder) take(batch []syslogMsg, max int) []syslogMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.n > 0 && len(batch) < max {
		batch = append(batch, f.queue[f.head])
		f.queue[f.head] = syslogMsg{}
		f.head = (f.head + 1) % len(f.queue)
		f.n--
	}
	if f.n > 0 {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
	return batch
}

func (f *syslogForwarder) log(format string, args ...any) {
	if f.logf != nil {
		f.logf(format, args...)
	}
}

// close stops forwarding; queued lines are discarded.
func (f *syslogForwarder) close() { f.cancel() }

// run is the sending goroutine: dial, send what is queued, and on failure
// dial again after a backoff delay. A batch whose write failed is kept and
// sent first on the next connection.
func (f *syslogForwarder) run() {
	defer close(f.done)
	var (
		conn      net.Conn
		closed    <-chan struct{} // closed when the server closes a TCP connection
		upSince   time.Time
		delay     time.Duration
		failing   bool // an outage has been logged and not yet ended
		batch     []syslogMsg
		wire      []byte
		unwritten bool // batch holds lines a failed TCP write did not deliver
	)
	drop := func(why error) {
		conn.Close()
		conn, closed = nil, nil
		f.connected.Store(false)
		f.log("syslog: connection to %s lost (%v); reconnecting", f.cfg.Addr, why)
		delay = f.backoff.Next(delay, time.Since(upSince))
	}
	for {
		if conn == nil {
			if delay > 0 && !f.sleep(delay) {
				return
			}
			c, err := (&net.Dialer{Timeout: syslogDialTimeout}).DialContext(f.ctx, f.cfg.Network, f.cfg.Addr)
			if err != nil {
				if f.ctx.Err() != nil {
					return
				}
				if !failing {
					f.log("syslog: cannot reach %s over %s (%v); retrying, lines queue meanwhile", f.cfg.Addr, f.cfg.Network, err)
					failing = true
				}
				delay = f.backoff.Next(delay, 0)
				continue
			}
			conn, upSince, failing = c, time.Now(), false
			f.connected.Store(true)
			if f.cfg.Network == "tcp" {
				closed = watchClose(c)
				f.log("syslog: connected to %s over tcp", f.cfg.Addr)
			}
		}
		if !unwritten {
			select {
			case <-f.ctx.Done():
				conn.Close()
				return
			case <-closed:
				drop(fmt.Errorf("closed by the server"))
				continue
			case <-f.wake:
			}
			batch = f.take(batch[:0], syslogBatchLines)
			if len(batch) == 0 {
				continue
			}
		}
		if f.cfg.Network == "udp" {
			for _, m := range batch {
				// A refused datagram (no listener yet) is worth no more
				// than the count: syslog over UDP is best effort.
				if _, err := conn.Write(formatSyslog(f.cfg, m.app, m.line)); err != nil {
					f.dropped.Add(1)
					continue
				}
				f.sent.Add(1)
			}
			continue
		}
		wire = wire[:0]
		for _, m := range batch {
			wire = appendOctetCounted(wire, formatSyslog(f.cfg, m.app, m.line))
		}
		conn.SetWriteDeadline(time.Now().Add(syslogWriteTimeout))
		if _, err := conn.Write(wire); err != nil {
			unwritten = true
			drop(err)
			continue
		}
		unwritten = false
		f.sent.Add(uint64(len(batch)))
		clear(batch) // the lines' text is garbage now
	}
}

// sleep waits d, or returns false when forwarding stops first.
func (f *syslogForwarder) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.ctx.Done():
		return false
	}
}

// watchClose reads from a TCP connection to a syslog server, which never
// sends anything: the read ends when the server closes the connection (or
// when we do), and the returned channel is closed then. Without it a
// server's close would go unnoticed until a write failed, and the lines of
// that first write would be lost.
func watchClose(c net.Conn) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		var b [256]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				return
			}
		}
	}()
	return ch
}

// appendOctetCounted frames msg as RFC 6587 section 3.4.1 does:
// MSG-LEN SP SYSLOG-MSG, the length in decimal octets, no trailer.
func appendOctetCounted(dst, msg []byte) []byte {
	dst = strconv.AppendInt(dst, int64(len(msg)), 10)
	dst = append(dst, ' ')
	return append(dst, msg...)
}

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
// a remote syslog server; nil stops forwarding. It checks cfg but does not
// wait for the server: an unreachable one is retried in the background and
// reported in the supervisor's log.
func (s *Supervisor) SetRemoteSyslog(cfg *SyslogConfig) error {
	var f *syslogForwarder
	if cfg != nil {
		var err error
		if f, err = newSyslogForwarder(*cfg, syslogQueueLines, syslogBackoff, s.logf); err != nil {
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
		s.logf("syslog: forwarding to %s over %s (%s)", f.cfg.Addr, f.cfg.Network, f.cfg.Format)
	} else if old != nil {
		s.logf("syslog: forwarding stopped")
	}
	return nil
}
