package hostd

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/supervisor"
)

// TestApplyTimezoneAndConsoleBaud follows a series of commits and checks
// that only changes of the zone or the speed are applied, that 0 means
// the board's speed, and that failures are retried.
func TestApplyTimezoneAndConsoleBaud(t *testing.T) {
	var events []string
	failBaud := false
	h := &host{
		setTimezone: func(name, rule string) error { events = append(events, "zone "+name+" "+rule); return nil },
		setConsoleBaud: func(baud int) error {
			if failBaud {
				return fmt.Errorf("supervisor: unknown service %q", "console")
			}
			events = append(events, fmt.Sprintf("baud %d", baud))
			return nil
		},
		boardBaud: 38400,
		logf: func(format string, args ...any) {
			if msg := fmt.Sprintf(format, args...); strings.Contains(msg, "console speed") || strings.Contains(msg, "knows") {
				events = append(events, "log: "+msg)
			}
		},
		applied: applied{timezone: "UTC", consoleBaud: 38400},
	}
	var retries []bool
	for _, sys := range []config.System{
		{Timezone: "UTC"}, // as at boot: nothing
		{Timezone: "Asia/Kolkata", ConsoleBaud: 115200},
		{Timezone: "Asia/Kolkata", ConsoleBaud: 115200}, // another setting changed: nothing
		{Timezone: "Mars/Olympus_Mons"},                 // not known: kept; 0 is the board's speed
		{Timezone: "Mars/Olympus_Mons"},                 // said once
		{Timezone: "Europe/Berlin", ConsoleBaud: 9600},
		{Timezone: "Europe/Berlin", ConsoleBaud: 9600}, // still failing: said once
	} {
		if sys.ConsoleBaud == 9600 {
			failBaud = true
		}
		retries = append(retries, h.apply(sys))
	}
	failBaud = false
	retries = append(retries, h.apply(config.System{Timezone: "Europe/Berlin", ConsoleBaud: 9600})) // retried
	want := []string{
		"zone Asia/Kolkata IST-5:30", "baud 115200",
		`log: time zone "Mars/Olympus_Mons": not a zone this firmware knows; keeping Asia/Kolkata`, "baud 38400",
		"zone Europe/Berlin CET-1CEST,M3.5.0,M10.5.0/3", `log: console speed 9600: supervisor: unknown service "console"`,
		"baud 9600",
	}
	if !slices.Equal(events, want) {
		t.Errorf("applied:\n  %s\nwant:\n  %s", strings.Join(events, "\n  "), strings.Join(want, "\n  "))
	}
	// An unknown zone is not retried (no later attempt knows it better);
	// a refused speed is.
	if wantRetries := []bool{false, false, false, false, false, true, true, false}; !slices.Equal(retries, wantRetries) {
		t.Errorf("apply asked for retries %v, want %v", retries, wantRetries)
	}
	if h.applied.timezone != "Europe/Berlin" || h.applied.consoleBaud != 9600 {
		t.Errorf("applied %+v, want Europe/Berlin at 9600", h.applied)
	}

	// Not managed (no -supervisor or -console-baud): the speed is not
	// touched.
	h.setConsoleBaud = nil
	if h.apply(config.System{Timezone: "Europe/Berlin", ConsoleBaud: 19200}); h.applied.consoleBaud != 9600 {
		t.Errorf("without a managed console the speed became %d", h.applied.consoleBaud)
	}
}

// serveSupervisor runs a real supervisor's API on a socket of the test's
// own.
func serveSupervisor(t *testing.T, cfg supervisor.Config) (*supervisor.Supervisor, string) {
	t.Helper()
	sup, err := supervisor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "supervisor.sock")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := sup.Serve(ctx, sock); err != nil {
		t.Fatal(err)
	}
	return sup, sock
}

// TestSyslogOverTCPThroughTheSupervisor applies a configuration's TCP
// syslog server through a real supervisor's API: the supervisor's own
// line about it reaches a listener on loopback as an octet-counted RFC
// 5424 frame.
func TestSyslogOverTCPThroughTheSupervisor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	sup, sock := serveSupervisor(t, supervisor.Config{})
	defer sup.SetRemoteSyslog(nil)
	var log lockedLog
	h := newHost(options{configd: "unused", supervisor: sock}, log.logf)
	rs := config.RemoteSyslog{Host: "127.0.0.1", Port: port, Protocol: "tcp"}
	if retry := h.apply(config.System{Hostname: "gw1", RemoteSyslog: rs}); retry {
		t.Fatalf("apply asks for a retry; log:\n%s", log.String())
	}
	if want := fmt.Sprintf("remote syslog 127.0.0.1:%d over tcp as gw1", port); log.count(want) != 1 {
		t.Fatalf("log:\n%s\nwant a line %q", log.String(), want)
	}

	ln.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("the supervisor did not connect to the TCP syslog server: %v", err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	// The supervisor says both that it forwards and that it connected,
	// in either order: look for the first among the first frames.
	want := fmt.Sprintf(" gw1 flashgate - supervisor - syslog: forwarding to 127.0.0.1:%d over tcp (rfc5424)", port)
	var frames []string
	for range 4 {
		head, err := r.ReadString(' ')
		if err != nil {
			t.Fatalf("reading the frame length after %q: %v", frames, err)
		}
		n, err := strconv.Atoi(strings.TrimSuffix(head, " "))
		if err != nil || n <= 0 {
			t.Fatalf("frame header %q is not an octet count", head)
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(r, msg); err != nil {
			t.Fatalf("reading a %d-octet frame: %v", n, err)
		}
		if strings.HasSuffix(string(msg), want) {
			return
		}
		frames = append(frames, string(msg))
	}
	t.Errorf("frames %q; want one ending in %q", frames, want)
}

// consoleHook records the speeds a supervisor's ConsoleBaud hook is
// asked for.
type consoleHook struct {
	mu    sync.Mutex
	bauds []int
}

func (c *consoleHook) set(baud int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bauds = append(c.bauds, baud)
	return nil
}

func (c *consoleHook) got() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.bauds)
}

// TestConsoleBaudThroughTheSupervisor: console_baud reaches the
// supervisor's ConsoleBaud hook (PID 1's restarts the getty), only when
// the speed changes, and an unset speed is the board's.
func TestConsoleBaudThroughTheSupervisor(t *testing.T) {
	var hook consoleHook
	_, sock := serveSupervisor(t, supervisor.Config{ConsoleBaud: hook.set})
	h := newHost(options{configd: "unused", supervisor: sock, consoleBaud: 38400}, t.Logf)
	for _, baud := range []int{0, 115200, 115200, 0, 9600} {
		if retry := h.apply(config.System{ConsoleBaud: baud}); retry {
			t.Fatalf("console_baud %d: apply asks for a retry", baud)
		}
	}
	if got, want := hook.got(), []int{115200, 38400, 9600}; !slices.Equal(got, want) {
		t.Errorf("the supervisor restarted the getty at %v, want %v (the getty starts at the board's 38400)", got, want)
	}
}

// inUTSNamespace runs f on a thread of its own in a new UTS namespace,
// so that the host names it sets and reads are not the host's; the
// thread ends with f (it stays locked), so no other goroutine runs in
// that namespace.
func inUTSNamespace(t *testing.T, f func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWUTS); err != nil {
			errc <- fmt.Errorf("unshare the UTS namespace (needs root): %w", err)
			return
		}
		errc <- f()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// keepHostUntouched checks, when the test ends, that the host's name and
// its /etc/localtime are what they were: hostd under test is given a UTS
// namespace and a time zone file of the test's own, never the host's.
func keepHostUntouched(t *testing.T) {
	t.Helper()
	before, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	zone, zoneErr := os.ReadFile(applianceLocaltime)
	t.Cleanup(func() {
		if now, err := os.Hostname(); err != nil || now != before {
			t.Errorf("the host's name is %q (%v) after the test, want %q as before it", now, err, before)
		}
		if now, err := os.ReadFile(applianceLocaltime); (err == nil) != (zoneErr == nil) || !bytes.Equal(now, zone) {
			t.Errorf("the host's %s changed under the test (%v, before: %v)", applianceLocaltime, err, zoneErr)
		}
	})
}

// TestHostnameAndLocaltime runs hostd's real setters — sethostname in a
// UTS namespace of the test's own, the TZif file in a temp dir — through
// a commit, a commit of other settings, and a restarted hostd, which
// must find both already as configured and write nothing.
func TestHostnameAndLocaltime(t *testing.T) {
	keepHostUntouched(t)
	localtime := filepath.Join(t.TempDir(), "localtime")
	inUTSNamespace(t, func() error {
		if err := unix.Sethostname([]byte(DefaultHostname)); err != nil { // as PID 1 at boot
			return err
		}
		var log lockedLog
		o := options{configd: "unused", hostname: true, localtime: localtime}
		h := newHost(o, log.logf)
		if h.applied.hostname != DefaultHostname || h.applied.timezone != "UTC" {
			return fmt.Errorf("a fresh hostd found %+v in force, want %s and UTC (no %s)", h.applied, DefaultHostname, localtime)
		}
		h.apply(config.System{})
		if _, err := os.Stat(localtime); err == nil {
			return fmt.Errorf("the default zone wrote %s; a box without one already shows UTC", localtime)
		}
		h.apply(config.System{Hostname: "gw1", Timezone: "Asia/Kolkata"})
		if name, err := os.Hostname(); err != nil || name != "gw1" {
			return fmt.Errorf("host name %q (%v) after the commit, want gw1", name, err)
		}
		if err := checkZone(localtime, "IST", 19800); err != nil {
			return err
		}
		fi, _ := os.Stat(localtime)

		// Another setting changed; then hostd restarts.
		h.apply(config.System{Hostname: "gw1", Timezone: "Asia/Kolkata", NTPServers: []string{"192.0.2.123"}})
		restarted := newHost(o, log.logf)
		if restarted.applied.hostname != "gw1" {
			return fmt.Errorf("a restarted hostd found host name %q in force, want gw1", restarted.applied.hostname)
		}
		if retry := restarted.apply(config.System{Hostname: "gw1", Timezone: "Asia/Kolkata"}); retry {
			return fmt.Errorf("the restarted hostd asks for a retry; log:\n%s", log.String())
		}
		if now, _ := os.Stat(localtime); !os.SameFile(fi, now) || !now.ModTime().Equal(fi.ModTime()) {
			return fmt.Errorf("%s was rewritten with the zone it held: the web UI rereads it for nothing", localtime)
		}
		if n := log.count("hostname gw1"); n != 1 {
			return fmt.Errorf("%d log lines about the host name, want 1; log:\n%s", n, log.String())
		}
		if n := log.count("time zone Asia/Kolkata"); n != 1 {
			return fmt.Errorf("%d log lines about the time zone, want 1; log:\n%s", n, log.String())
		}
		return nil
	})
}

// checkZone reads a TZif file as Go does and checks the zone it gives in
// July 2026.
func checkZone(path, name string, offset int) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	loc, err := time.LoadLocationFromTZData("localtime", data)
	if err != nil {
		return fmt.Errorf("reading back %s: %w", path, err)
	}
	if n, off := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC).In(loc).Zone(); n != name || off != offset {
		return fmt.Errorf("%s holds %s %+d, want %s %+d", path, n, off, name, offset)
	}
	return nil
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args    string
		wantErr string
	}{
		{"-configd c.sock -hostname", ""},
		{"-configd c.sock -localtime /tmp/x", ""},
		{"-configd c.sock -supervisor s.sock -console-baud 38400", ""},
		{"", "-configd names no socket"},
		{"-hostname", "-configd names no socket"},
		{"-configd c.sock", "nothing to apply"},
		{"-configd c.sock -hostname -console-baud 38400", "-console-baud needs -supervisor"},
		{"-configd c.sock -supervisor s.sock -console-baud -1", "want a speed"},
		{"-configd c.sock -hostname extra", "unexpected arguments"},
		{"-configd c.sock -resolv-conf /etc/resolv.conf", "flag provided but not defined"},
	} {
		_, err := parseFlags(strings.Fields(tc.args), io.Discard)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v, want accepted", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.wantErr)
		}
	}
}
