package supervisor

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/waitfor"

	"golang.org/x/sys/unix"
)

// helperEnv makes this test binary, started as a service, act as a Go
// service that notifies its readiness with NotifyReady (runHelper).
const helperEnv = "SUPERVISOR_TEST_HELPER"

// runHelper is the test binary run as a service (see TestMain): it says it
// is ready the way configd and the console do, reports on stdout whether
// the readiness variable and descriptor are gone afterwards, and runs
// until it is stopped.
func runHelper() {
	fd := os.Getenv(ReadyFDEnv)
	if err := NotifyReady(); err != nil {
		os.Stdout.WriteString("notify: " + err.Error() + "\n")
		os.Exit(1)
	}
	n, _ := strconv.Atoi(fd)
	_, env := os.LookupEnv(ReadyFDEnv)
	_, err := unix.FcntlInt(uintptr(n), unix.F_GETFD, 0)
	os.Stdout.WriteString("notified on fd " + fd + "; variable still set: " + strconv.FormatBool(env) +
		"; descriptor closed: " + strconv.FormatBool(errors.Is(err, unix.EBADF)) + "\n")
	time.Sleep(time.Hour)
}

// notifier is a service that says it is ready once the file go exists
// (the test decides when), then runs until stopped.
func notifier(name, goFile string) Service {
	return Service{Name: name, Path: "/bin/sh", NotifiesReady: true, StopTimeout: 2 * time.Second,
		Env:  []string{"PATH=/usr/bin:/bin", "GO=" + goFile},
		Args: []string{"-c", `while [ ! -e "$GO" ]; do sleep 0.02; done; echo >&"$` + ReadyFDEnv + `"; exec sleep 1000`}}
}

// A service After one that notifies its readiness starts when the
// notification comes, not when the process exists; one with no such
// dependency does not wait.
func TestAfterWaitsForReadiness(t *testing.T) {
	goFile := filepath.Join(t.TempDir(), "go")
	web := sh("web", "exec sleep 1000", "db")
	web.AfterWait = time.Hour // only the notification may start it
	s := start(t, Config{Services: []Service{
		notifier("db", goFile),
		web,
		sh("cache", "exec sleep 1000"),
		sh("app", "exec sleep 1000", "web"),
	}})
	waitfor.Cond(t, 10*time.Second, "db and cache running", running(s, "db", "cache"))
	// Give db's script time to be well into its loop: web must still wait.
	time.Sleep(200 * time.Millisecond)
	if st := state(s, "db"); !st.NotReady {
		t.Errorf("db before it notified: %+v; want running, not ready", st)
	}
	for _, n := range []string{"web", "app"} {
		if st := state(s, n); st.State != StateWaiting {
			t.Errorf("%s is %s while db is not ready; want waiting", n, st.State)
		}
	}
	if st := state(s, "web"); !slices.Equal(st.WaitingFor, []string{"db"}) {
		t.Errorf("web waits for %v; want [db]", st.WaitingFor)
	}
	var b strings.Builder
	WriteStatus(&b, s.Status(), System{})
	if !strings.Contains(b.String(), "running (not ready)") || !strings.Contains(b.String(), "waiting (for db)") {
		t.Errorf("status table:\n%s\nwant db running (not ready) and web waiting (for db)", b.String())
	}

	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 10*time.Second, "web and app running once db is ready", running(s, "web", "app"))
	if st := state(s, "db"); st.NotReady {
		t.Errorf("db after it notified: %+v; want ready", st)
	}
	msgs := supervisorLog(s)
	ready, webStart := indexOf(msgs, "db: ready "), indexOf(msgs, "web: started")
	if ready < 0 || webStart < ready {
		t.Errorf("want db ready, then web started:\n%s", strings.Join(msgs, "\n"))
	}
	if i := indexOf(msgs, "web: starting anyway"); i >= 0 {
		t.Errorf("web started without db: %s", msgs[i])
	}
}

// Readiness belongs to one run: a restarted service is not ready until it
// says so again, and a dependant started again meanwhile waits for it.
func TestReadinessIsPerRun(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "first-run-done")
	// Only the first run notifies.
	db := Service{Name: "db", Path: "/bin/sh", NotifiesReady: true, StopTimeout: 2 * time.Second,
		Env:  []string{"PATH=/usr/bin:/bin", "MARK=" + first},
		Args: []string{"-c", `if [ ! -e "$MARK" ]; then : > "$MARK"; echo >&"$` + ReadyFDEnv + `"; fi; exec sleep 1000`}}
	web := sh("web", "exec sleep 1000", "db")
	web.AfterWait = time.Hour
	s := start(t, Config{Services: []Service{db, web}})
	waitfor.Cond(t, 10*time.Second, "web running after db's first run is ready", running(s, "db", "web"))

	oldPID := state(s, "db").PID
	if err := s.Stop("web"); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart("db"); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 10*time.Second, "db's second run", func() bool {
		st := state(s, "db")
		return st.State == StateRunning && st.PID != oldPID
	})
	waitfor.Cond(t, 10*time.Second, "web stopped", func() bool { return state(s, "web").State == StateStopped })
	if err := s.Restart("web"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if st := state(s, "db"); !st.NotReady {
		t.Errorf("db's second run, which never notifies: %+v; want not ready", st)
	}
	if st := state(s, "web"); st.State != StateWaiting || !slices.Equal(st.WaitingFor, []string{"db"}) {
		t.Errorf("web started again while db's new run is not ready: %s waiting for %v; want waiting for [db]", st.State, st.WaitingFor)
	}
}

// The wait is bounded: a dependant of a dependency that crash-loops, or
// runs and never says it is ready (or writes something else), starts
// after its AfterWait, and the supervisor says why. So a broken configd
// leaves the box its console and web UI.
func TestAfterWaitBoundsTheWait(t *testing.T) {
	const bound = 300 * time.Millisecond
	console := sh("console", "exec sleep 1000", "configd")
	console.AfterWait = bound
	webui := sh("webui", "exec sleep 1000", "hung")
	webui.AfterWait = bound
	hung := Service{Name: "hung", Path: "/bin/sh", NotifiesReady: true, StopTimeout: 2 * time.Second,
		Args: []string{"-c", `printf starting >&"$` + ReadyFDEnv + `"; exec sleep 1000`}}
	t0 := time.Now()
	s := start(t, Config{
		Backoff: Backoff{Base: time.Hour, Max: time.Hour, Healthy: time.Hour},
		Services: []Service{
			{Name: "configd", Path: "/nonexistent/configd", NotifiesReady: true},
			hung,
			console,
			webui,
		},
	})
	waitfor.Cond(t, 10*time.Second, "console and webui running after their bound", running(s, "console", "webui"))
	lines, _, _ := s.Logs("supervisor", 0)
	var consoleLate, webuiLate string
	started := map[string]time.Time{}
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l.Text, "console: starting anyway"):
			consoleLate = l.Text
		case strings.HasPrefix(l.Text, "webui: starting anyway"):
			webuiLate = l.Text
		}
		if name, _, ok := strings.Cut(l.Text, ": started (pid"); ok {
			started[name] = l.Time
		}
	}
	if want := "console: starting anyway after waiting 300ms for configd (backoff, last exit: exec /nonexistent/configd: no such file or directory)"; consoleLate != want {
		t.Errorf("console's line: %q, want %q", consoleLate, want)
	}
	if want := "webui: starting anyway after waiting 300ms for hung (running, has not said it is ready)"; webuiLate != want {
		t.Errorf("webui's line: %q, want %q", webuiLate, want)
	}
	for _, n := range []string{"console", "webui"} {
		if at, ok := started[n]; !ok || at.Sub(t0) < bound {
			t.Errorf("%s started %v after the supervisor was made (found: %v); want no sooner than its bound, %v", n, at.Sub(t0), ok, bound)
		}
	}
	if st := state(s, "hung"); !st.NotReady {
		t.Errorf("hung wrote no newline: %+v; want running, not ready", st)
	}
}

// A Go service notifies with NotifyReady through a real fork: the
// dependant starts, and the service's environment and descriptors no
// longer carry the readiness pipe for its own children.
func TestNotifyReadyFromAGoService(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "extra"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	helper := Service{Name: "helper", Path: exe, NotifiesReady: true, StopTimeout: 2 * time.Second,
		Env: []string{helperEnv + "=1"}, ExtraFiles: []*os.File{out}} // the readiness fd comes after fd 3
	web := sh("web", "exec sleep 1000", "helper")
	web.AfterWait = time.Hour
	s := start(t, Config{Services: []Service{helper, web}})
	waitfor.Cond(t, 30*time.Second, "web running once the helper notified", running(s, "helper", "web"))
	waitfor.Cond(t, 10*time.Second, "the helper's report", func() bool { l, _, _ := s.Logs("helper", 0); return len(l) > 0 })
	lines, _, _ := s.Logs("helper", 0)
	if want := "notified on fd 4; variable still set: false; descriptor closed: true"; lines[0].Text != want {
		t.Errorf("the helper says %q; want %q", lines[0].Text, want)
	}
}

func TestNotifyReadyOutsideTheSupervisor(t *testing.T) {
	t.Setenv(ReadyFDEnv, "") // restored after the test
	os.Unsetenv(ReadyFDEnv)
	if err := NotifyReady(); err != nil {
		t.Errorf("NotifyReady without %s: %v, want nothing done", ReadyFDEnv, err)
	}
	for _, bad := range []string{"x", "1", "-4"} {
		t.Setenv(ReadyFDEnv, bad)
		if err := NotifyReady(); err == nil {
			t.Errorf("NotifyReady with %s=%q: no error", ReadyFDEnv, bad)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fd, err := unix.Dup(int(w.Fd()))
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(ReadyFDEnv, strconv.Itoa(fd))
	if err := NotifyReady(); err != nil {
		t.Fatalf("NotifyReady: %v", err)
	}
	got := make([]byte, 8)
	n, _ := r.Read(got)
	if string(got[:n]) != "\n" {
		t.Errorf("the pipe got %q, want a newline", got[:n])
	}
	if _, set := os.LookupEnv(ReadyFDEnv); set {
		t.Errorf("%s still set after NotifyReady", ReadyFDEnv)
	}
	// The write end was the only one: closed, the reader sees the end.
	if n, err := r.Read(got); n != 0 || err == nil {
		t.Errorf("after NotifyReady the pipe reads %d bytes, %v; want its end (descriptor closed)", n, err)
	}
}
