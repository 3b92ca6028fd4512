package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SocketPath is where PID 1 serves the supervisor API.
const SocketPath = "/run/flashgate/supervisor.sock"

// System is the supervisor's view of itself, served on /v1/system.
type System struct {
	PID           int           `json:"pid"`
	RSSKiB        int           `json:"rss_kib"`          // VmRSS of this process (PID 1 + supervisor)
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

// LogsReply is the body of a logs request.
type LogsReply struct {
	Name    string `json:"name"`
	Lines   []Line `json:"lines"`
	Dropped uint64 `json:"dropped"` // lines pushed out of the ring so far
}

// SystemStatus returns the /v1/system document.
func (s *Supervisor) SystemStatus() System {
	rss, _ := ReadRSSKiB("/proc/self/status")
	s.mu.Lock()
	defer s.mu.Unlock()
	sys := System{PID: os.Getpid(), RSSKiB: rss, OrphansReaped: s.orphansReaped, Goroutines: numGoroutine()}
	if m, err := ReadMemory("/proc/self/smaps_rollup"); err == nil {
		sys.Memory = &m
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

// Handler returns the API:
//
//	GET  /v1/services                 all services, table order
//	GET  /v1/services/{name}          one service
//	GET  /v1/logs/{name}?lines=N      a log ring (a service, "kernel" or "supervisor")
//	POST /v1/services/{name}/restart  restart now (counts as a restart)
//	POST /v1/services/{name}/stop     stop and keep stopped
//	GET  /v1/system                   PID 1 itself: RSS, watchdog, syslog
//	PUT  /v1/syslog                   set remote syslog (JSON SyslogConfig; empty addr stops it)
//	PUT  /v1/console                  restart the console getty at {"baud":N}
//	POST /v1/reboot, /v1/poweroff     end the running system (202, then it happens)
//	POST /v1/watchdog/stop-petting    test hook: let the watchdog reset the board
//
// Routing is done here rather than with http.ServeMux patterns: the u-root
// busybox build compiles this code under a generated main module whose Go
// version turns method patterns off (GODEBUG httpmuxgo121), and the API
// must not depend on how the binary was linked.
func (s *Supervisor) Handler() http.Handler {
	return http.HandlerFunc(s.route)
}

func (s *Supervisor) route(w http.ResponseWriter, r *http.Request) {
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(p) < 2 || p[0] != "v1" {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such route: " + r.URL.Path})
		return
	}
	method := func(want string) bool {
		if r.Method != want {
			w.Header().Set("Allow", want)
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": r.Method + " " + r.URL.Path + ": use " + want})
			return false
		}
		return true
	}
	switch {
	case len(p) == 2 && p[1] == "services":
		if method(http.MethodGet) {
			writeJSON(w, http.StatusOK, s.Status())
		}
	case len(p) == 3 && p[1] == "services":
		if method(http.MethodGet) {
			st, err := s.ServiceStatus(p[2])
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, st)
		}
	case len(p) == 4 && p[1] == "services" && (p[3] == "restart" || p[3] == "stop"):
		if method(http.MethodPost) {
			if p[3] == "restart" {
				writeResult(w, s.Restart(p[2]))
			} else {
				writeResult(w, s.Stop(p[2]))
			}
		}
	case len(p) == 3 && p[1] == "logs":
		if method(http.MethodGet) {
			s.serveLogs(w, r, p[2])
		}
	case len(p) == 2 && p[1] == "system":
		if method(http.MethodGet) {
			writeJSON(w, http.StatusOK, s.SystemStatus())
		}
	case len(p) == 2 && p[1] == "syslog":
		if method(http.MethodPut) {
			s.serveSyslog(w, r)
		}
	case len(p) == 2 && p[1] == "console":
		if method(http.MethodPut) {
			s.serveConsole(w, r)
		}
	case len(p) == 2 && (p[1] == string(Reboot) || p[1] == string(PowerOff)):
		if method(http.MethodPost) {
			s.servePower(w, PowerAction(p[1]))
		}
	case len(p) == 3 && p[1] == "watchdog" && p[2] == "stop-petting":
		if method(http.MethodPost) {
			if err := s.StopPetting(); err != nil {
				writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
				return
			}
			writeJSON(w, http.StatusAccepted, map[string]string{"result": "watchdog petting stopped"})
		}
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such route: " + r.URL.Path})
	}
}

func (s *Supervisor) serveLogs(w http.ResponseWriter, r *http.Request, name string) {
	n := 0
	if v := r.URL.Query().Get("lines"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("lines=%q: want a non-negative integer", v)})
			return
		}
	}
	lines, dropped, err := s.Logs(name, n)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, LogsReply{Name: name, Lines: lines, Dropped: dropped})
}

func (s *Supervisor) serveSyslog(w http.ResponseWriter, r *http.Request) {
	var cfg SyslogConfig
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&cfg); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "syslog config: " + err.Error()})
		return
	}
	var err error
	if cfg.Addr == "" {
		err = s.SetRemoteSyslog(nil)
	} else {
		err = s.SetRemoteSyslog(&cfg)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": "ok"})
}

func (s *Supervisor) serveConsole(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Baud int `json:"baud"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "console request: " + err.Error()})
		return
	}
	if err := s.SetConsoleBaud(req.Baud); err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, ErrNoConsole) {
			code = http.StatusNotImplemented
		}
		writeJSON(w, code, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": "ok"})
}

func (s *Supervisor) servePower(w http.ResponseWriter, action PowerAction) {
	if s.cfg.Power == nil {
		writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "not running as PID 1: cannot " + string(action)})
		return
	}
	if err := s.cfg.Power(action); err != nil {
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"result": string(action) + " started"})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeResult(w http.ResponseWriter, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"result": "ok"})
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusConflict
	if errors.Is(err, ErrUnknownService) {
		code = http.StatusNotFound
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

// Serve serves the API on a unix socket at path until ctx is done. The
// socket is root-only: it can reboot the box.
func (s *Supervisor) Serve(ctx context.Context, path string) error {
	ln, err := Listen(path)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go s.guard("api", func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logf("api: %v", err)
		}
	})
	return nil
}

// Listen creates the directory of a unix socket, replaces a stale socket
// left by an earlier run and listens, with mode 0600.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("api socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("api socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("api socket mode: %w", err)
	}
	return ln, nil
}
