package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"time"

	"github.com/flashgate/flashgate/internal/localsock"
	"github.com/flashgate/flashgate/internal/paths"
)

// SocketPath is where PID 1 serves the supervisor API.
const SocketPath = paths.SupervisorSocket

// System is the supervisor's view of itself, the answer to the system op.
type System struct {
	PID           int           `json:"pid"`
	RSSKiB        int           `json:"rss_kib"`          // RSS of this process (PID 1 + supervisor): smaps_rollup's, else VmRSS
	Memory        *Memory       `json:"memory,omitempty"` // its PSS and private share, where the kernel says
	Goroutines    int           `json:"goroutines"`
	OrphansReaped uint64        `json:"orphans_reaped"`
	Watchdog      WatchdogState `json:"watchdog"`
	Syslog        *SyslogState  `json:"syslog,omitempty"`
}

// WatchdogState reports the hardware watchdog.
type WatchdogState struct {
	Open      bool     `json:"open"`
	Timeout   Duration `json:"timeout,omitempty"`
	Petting   bool     `json:"petting"`
	Pets      uint64   `json:"pets"`
	LastError string   `json:"last_error,omitempty"`
}

// SyslogState reports remote syslog forwarding.
type SyslogState struct {
	SyslogConfig
	Sent    uint64 `json:"sent"`
	Dropped uint64 `json:"dropped"`
}

// LogsReply is the answer to the logs op.
type LogsReply struct {
	Name    string `json:"name"`
	Lines   []Line `json:"lines"`
	Dropped uint64 `json:"dropped"` // lines pushed out of the ring so far
}

// SystemStatus returns the answer to the system op.
func (s *Supervisor) SystemStatus() System {
	rss, _ := ReadRSSKiB("/proc/self/status")
	s.mu.Lock()
	defer s.mu.Unlock()
	sys := System{PID: os.Getpid(), RSSKiB: rss, OrphansReaped: s.orphansReaped, Goroutines: numGoroutine()}
	if m, err := ReadMemory("/proc/self/smaps_rollup"); err == nil {
		sys.Memory = &m
		// smaps_rollup walks the page tables; VmRSS comes from counters
		// each thread batches, which lag by up to 64 pages per thread.
		sys.RSSKiB = m.RSS
	}
	if wd := s.cfg.Watchdog; wd != nil {
		sys.Watchdog = WatchdogState{Open: true, Timeout: seconds(wd.Timeout), Petting: !s.stopPetting, Pets: s.pets}
		if s.petErr != nil {
			sys.Watchdog.LastError = s.petErr.Error()
		}
	}
	if f := s.syslog; f != nil {
		sys.Syslog = &SyslogState{SyslogConfig: f.cfg, Sent: f.sent.Load(), Dropped: f.dropped.Load()}
	}
	return sys
}

// API server limits. PID 1 serves the API, so no client, however slow or
// broken, may hold its memory or goroutines for long.
const (
	// defaultAPITimeout bounds reading a request and, separately, writing
	// its answer: a silent client is dropped after it.
	defaultAPITimeout = 5 * time.Second
	// maxAPIConns bounds the connections served at once; one more waits
	// up to busyWait for a slot, then is answered "busy" and closed.
	maxAPIConns = 8
	busyWait    = time.Second
)

// Serve serves the API on a unix socket at path until ctx is done. The
// socket is root-only: it can reboot the box.
func (s *Supervisor) Serve(ctx context.Context, path string) error {
	ln, err := localsock.Listen(path, localsock.RootOnly)
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, func() { ln.Close() })
	go s.guard("api", func() { s.serveAPI(ln, nil) })
	return nil
}

// WebSocketPath is the supervisor API's socket for the web UI, which runs
// as its own user: it answers only WebOps.
const WebSocketPath = paths.SupervisorWebSocket

// webOps are the ops of the web UI's socket: the Logs page (the service
// list and their logs) and the System page's reboot. Not stop, restart,
// syslog, console speed or the watchdog hook: a web UI taken over could
// otherwise stop the firewall's services or silence the remote log.
var webOps = map[op]bool{opServices: true, opService: true, opLogs: true, opReboot: true}

// ServeWeb serves the web UI's part of the API (services, service, logs,
// reboot) on a unix socket at path, mode 0660 and group gid, until ctx is
// done: the web UI's user reaches it, no other user but root does.
func (s *Supervisor) ServeWeb(ctx context.Context, path string, gid int) error {
	ln, err := localsock.Listen(path, localsock.Group(gid))
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, func() { ln.Close() })
	go s.guard("web api", func() { s.serveAPI(ln, webOps) })
	return nil
}

// serveAPI accepts connections until ln is closed and serves each in its
// own goroutine, at most maxAPIConns at once. allowed, if not nil, is the
// only ops answered.
func (s *Supervisor) serveAPI(ln net.Listener, allowed map[op]bool) {
	slots := make(chan struct{}, maxAPIConns)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors, most likely: wait for some
			// to be closed rather than spin.
			s.logf("api: accept: %v", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		// A burst of callers waits a moment for a slot; callers
		// that find every slot held by stalled clients are told so.
		wait := time.NewTimer(busyWait)
		select {
		case slots <- struct{}{}:
			wait.Stop()
			go s.guard("api connection", func() {
				defer func() { <-slots }()
				s.serveConn(conn, allowed)
			})
		case <-wait.C:
			// A fresh connection's send buffer is empty: this write
			// does not block, and the deadline makes sure of it.
			conn.SetWriteDeadline(time.Now().Add(time.Second))
			writeResponse(conn, response{Error: fmt.Sprintf("supervisor API busy (%d requests in progress); try again", maxAPIConns)})
			conn.Close()
		}
	}
}

// serveConn reads one request from conn, answers it and closes conn.
func (s *Supervisor) serveConn(conn net.Conn, allowed map[op]bool) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(s.apiTimeout))
	line, err := readRequest(conn)
	if err != nil {
		conn.SetDeadline(time.Now().Add(s.apiTimeout))
		writeResponse(conn, response{Error: err.Error()})
		// Closing a unix socket with unread input resets the
		// connection, and the client would lose the answer: read
		// on a little (bounded in bytes and by the deadline) first.
		if uc, ok := conn.(*net.UnixConn); ok && errors.Is(err, errRequestTooLong) {
			uc.CloseWrite()
			io.Copy(io.Discard, io.LimitReader(conn, maxRequestBytes))
		}
		return
	}
	resp := s.answer(line, allowed)
	conn.SetDeadline(time.Now().Add(s.apiTimeout))
	writeResponse(conn, resp) // an error here means the client left: nobody to tell
}

var errRequestTooLong = fmt.Errorf("request longer than %d bytes", maxRequestBytes)

// readRequest reads up to the first newline, at most maxRequestBytes
// before it. A request may also end at the end of the stream.
func readRequest(r io.Reader) ([]byte, error) {
	r = io.LimitReader(r, maxRequestBytes+1)
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		if i := bytes.IndexByte(buf[len(buf):len(buf)+n], '\n'); i >= 0 {
			return buf[:len(buf)+i], nil
		}
		buf = buf[:len(buf)+n]
		switch {
		case len(buf) > maxRequestBytes:
			return nil, errRequestTooLong
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return nil, fmt.Errorf("read request: %w", err)
		}
	}
}

func writeResponse(w io.Writer, resp response) error {
	b, err := json.Marshal(resp)
	if err != nil {
		b, _ = json.Marshal(response{Error: "encode answer: " + err.Error()})
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// answer decodes and carries out one request. It never panics: a panic
// below it (a hook, a bug) becomes an error answer and a log line, since
// in PID 1 it would panic the kernel.
func (s *Supervisor) answer(line []byte, allowed map[op]bool) (resp response) {
	defer func() {
		if r := recover(); r != nil {
			s.logf("api: panic answering %.200q: %v\n%s", line, r, debug.Stack())
			resp = response{Error: fmt.Sprintf("internal error: %v", r)}
		}
	}()
	req, err := decodeRequest(line)
	if err != nil {
		return response{Error: err.Error()}
	}
	if allowed != nil && !allowed[req.Op] {
		return response{Error: fmt.Sprintf("op %s is not available on this socket (the web UI's)", req.Op)}
	}
	result, err := s.call(req)
	if err != nil {
		return errorResponse(err)
	}
	raw, err := json.Marshal(result)
	if err != nil {
		return response{Error: fmt.Sprintf("encode %s answer: %v", req.Op, err)}
	}
	return response{Result: raw}
}

// call carries out a decoded request.
func (s *Supervisor) call(req request) (any, error) {
	switch req.Op {
	case opServices:
		return s.Status(), nil
	case opService:
		return s.ServiceStatus(req.Name)
	case opLogs:
		lines, dropped, err := s.Logs(req.Name, req.Lines)
		if err != nil {
			return nil, err
		}
		return LogsReply{Name: req.Name, Lines: lines, Dropped: dropped}, nil
	case opRestart:
		return "restart requested", s.Restart(req.Name)
	case opStop:
		return "stop requested", s.Stop(req.Name)
	case opSystem:
		return s.SystemStatus(), nil
	case opSyslog:
		if req.Syslog.Addr == "" {
			return "remote syslog off", s.SetRemoteSyslog(nil)
		}
		return "remote syslog set", s.SetRemoteSyslog(req.Syslog)
	case opConsoleBaud:
		return "console getty restarted", s.SetConsoleBaud(req.Baud)
	case opReboot, opPowerOff:
		a := PowerAction(req.Op)
		if s.cfg.Power == nil {
			return nil, fmt.Errorf("not running as PID 1: cannot %s", a)
		}
		return string(a) + " started", s.cfg.Power(a)
	case opStopPetting:
		return "watchdog petting stopped", s.StopPetting()
	}
	// decodeRequest lets only the ops above through.
	return nil, fmt.Errorf("unknown op %.40q", req.Op)
}
