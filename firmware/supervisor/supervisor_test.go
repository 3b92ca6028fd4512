package supervisor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/waitfor"

	"golang.org/x/sys/unix"
)

// The tests drive the supervisor with real child processes (/bin/sh), and
// this test binary is a child subreaper so that orphans come back to it as
// they come to PID 1 on the appliance.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		runHelper()
		return
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "PR_SET_CHILD_SUBREAPER: %v\n", err)
		os.Exit(1)
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		fmt.Fprintf(os.Stderr, "supervisor tests need /bin/sh: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func sh(name, script string, after ...string) Service {
	return Service{Name: name, Path: "/bin/sh", Args: []string{"-c", script}, After: after, StopTimeout: 2 * time.Second}
}

// start runs a supervisor over table until the test ends, then shuts it
// down so no child outlives the test.
func start(t *testing.T, cfg Config) *Supervisor {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() {
		s.Shutdown(2 * time.Second)
		cancel()
		<-done
	})
	return s
}

func state(s *Supervisor, name string) ServiceStatus {
	st, err := s.ServiceStatus(name)
	if err != nil {
		panic(err)
	}
	return st
}

func running(s *Supervisor, names ...string) func() bool {
	return func() bool {
		for _, n := range names {
			if state(s, n).State != StateRunning {
				return false
			}
		}
		return true
	}
}

// supervisorLog returns the supervisor's own messages.
func supervisorLog(s *Supervisor) []string {
	lines, _, _ := s.Logs("supervisor", 0)
	var out []string
	for _, l := range lines {
		out = append(out, l.Text)
	}
	return out
}

// indexOf returns the index of the first message with the prefix, or -1.
func indexOf(msgs []string, prefix string) int {
	return slices.IndexFunc(msgs, func(m string) bool { return strings.HasPrefix(m, prefix) })
}

func TestValidateTable(t *testing.T) {
	needs := func(svc Service, conds ...string) Service { svc.Needs = conds; return svc }
	for _, tc := range []struct {
		name       string
		table      []Service
		conditions []string
		want       string // substring of the error, "" for none
	}{
		{"ok", []Service{sh("a", "true"), sh("b", "true", "a")}, nil, ""},
		{"condition", []Service{needs(sh("a", "true"), "modules")}, []string{"modules"}, ""},
		{"undeclared condition", []Service{needs(sh("a", "true"), "modules")}, nil, `"a" needs condition "modules", which is not declared`},
		{"condition declared twice", nil, []string{"modules", "modules"}, `"modules" is empty or declared twice`},
		{"dependency declared later", []Service{sh("b", "true", "a"), sh("a", "true")}, nil, `"b" depends on "a", which is not declared before it`},
		{"unknown dependency", []Service{sh("a", "true", "zz")}, nil, `depends on "zz"`},
		{"self dependency", []Service{sh("a", "true", "a")}, nil, `"a" depends on "a"`},
		{"duplicate", []Service{sh("a", "true"), sh("a", "true")}, nil, `"a" declared twice`},
		{"relative path", []Service{{Name: "a", Path: "bin/a"}}, nil, "not absolute"},
		{"no name", []Service{{Path: "/bin/true"}}, nil, "empty name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validateTable(tc.table, tc.conditions)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("validateTable: %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("validateTable: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestBackoffNext(t *testing.T) {
	b := Backoff{Base: time.Second, Max: time.Minute, Healthy: time.Minute}
	for _, tc := range []struct {
		prev, ran, want time.Duration
	}{
		{0, 0, time.Second},                               // first failure
		{time.Second, 0, 2 * time.Second},                 // doubling
		{2 * time.Second, time.Second, 4 * time.Second},   // short run
		{32 * time.Second, 0, time.Minute},                // capped: 64 s > 60 s
		{time.Minute, 0, time.Minute},                     // stays at the cap
		{time.Minute, 59 * time.Second, time.Minute},      // not yet healthy
		{time.Minute, time.Minute, time.Second},           // a healthy minute resets
		{16 * time.Second, 2 * time.Hour, time.Second},    // long healthy run
		{1 << 62, 0, time.Minute},                         // no overflow past the cap
		{30 * time.Second, 10 * time.Second, time.Minute}, // 60 s exactly
	} {
		if got := b.Next(tc.prev, tc.ran); got != tc.want {
			t.Errorf("Next(prev %v, ran %v) = %v, want %v", tc.prev, tc.ran, got, tc.want)
		}
	}
}

func TestStartOrderAndDependencies(t *testing.T) {
	// db's binary appears only after the first try (as on a box whose
	// binary is late), so web, which depends on it, must wait for db's
	// second start; cache depends on nothing and must not wait for db.
	db := filepath.Join(t.TempDir(), "db")
	s := start(t, Config{
		Backoff: Backoff{Base: 50 * time.Millisecond, Max: 50 * time.Millisecond, Healthy: time.Minute},
		Services: []Service{
			{Name: "db", Path: db, Args: []string{"-c", "exec sleep 1000"}},
			sh("web", "exec sleep 1000", "db"),
			sh("cache", "exec sleep 1000"),
			sh("app", "exec sleep 1000", "web", "cache"),
		},
	})
	waitfor.Cond(t, 10*time.Second, "cache running", running(s, "cache"))
	for _, n := range []string{"web", "app"} {
		if st := state(s, n); st.State != StateWaiting {
			t.Errorf("%s is %s before db could start; want waiting", n, st.State)
		}
	}
	if err := os.Symlink("/bin/sh", db); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 10*time.Second, "all services running", running(s, "db", "web", "cache", "app"))
	msgs := supervisorLog(s)
	dbFail := indexOf(msgs, "db: cannot start")
	cache := indexOf(msgs, "cache: started")
	dbStart := indexOf(msgs, "db: started")
	web := indexOf(msgs, "web: started")
	app := indexOf(msgs, "app: started")
	if !(dbFail >= 0 && dbFail < cache && cache < dbStart && dbStart < web && web < app) {
		t.Errorf("want db failing, cache started, db started, then web, then app:\n%s", strings.Join(msgs, "\n"))
	}
	if got := state(s, "db"); got.Restarts != 0 || !strings.Contains(got.LastExit, "no such file") {
		t.Errorf("db: restarts %d, last exit %q; want 0 (a failed start is not a run) and the start error", got.Restarts, got.LastExit)
	}
}

func TestWaitingForBrokenDependency(t *testing.T) {
	s := start(t, Config{
		Backoff: Backoff{Base: time.Hour, Max: time.Hour, Healthy: time.Hour},
		Services: []Service{
			{Name: "configd", Path: "/nonexistent/configd"},
			sh("netd", "exec sleep 1000", "configd"),
			sh("console", "exec sleep 1000"),
		},
	})
	waitfor.Cond(t, 10*time.Second, "console running", running(s, "console"))
	cd := state(s, "configd")
	if cd.State != StateBackoff || !strings.Contains(cd.LastExit, "no such file or directory") || cd.LastExitCode != -1 {
		t.Errorf("configd: state %s, last exit %q (%d); want backoff after a missing binary", cd.State, cd.LastExit, cd.LastExitCode)
	}
	nd := state(s, "netd")
	if nd.State != StateWaiting || !slices.Equal(nd.WaitingFor, []string{"configd"}) {
		t.Errorf("netd: state %s waiting for %v; want waiting for [configd]", nd.State, nd.WaitingFor)
	}
}

func TestConditionHoldsBackServicesUntilProvided(t *testing.T) {
	// As on the appliance: netd needs the NIC and netfilter modules PID 1
	// loads while configd and the console already run; webui needs only
	// configd.
	netd := sh("netd", "exec sleep 1000", "configd")
	netd.Needs = []string{"modules"}
	s := start(t, Config{
		Conditions: []string{"modules"},
		Services: []Service{
			sh("configd", "exec sleep 1000"),
			netd,
			sh("webui", "exec sleep 1000", "configd"),
		},
	})
	waitfor.Cond(t, 10*time.Second, "configd and webui running", running(s, "configd", "webui"))
	if st := state(s, "netd"); st.State != StateWaiting || !slices.Equal(st.WaitingFor, []string{"modules"}) {
		t.Fatalf("netd before the modules: %s waiting for %v; want waiting for [modules]", st.State, st.WaitingFor)
	}
	if err := s.Provide("modules"); err != nil {
		t.Fatalf("Provide(modules): %v", err)
	}
	waitfor.Cond(t, 10*time.Second, "netd running once the modules are provided", running(s, "netd"))
	if err := s.Provide("modules"); err != nil {
		t.Errorf("Provide(modules) a second time: %v, want nil", err)
	}
	if err := s.Provide("firmware"); err == nil || !strings.Contains(err.Error(), "no such condition") {
		t.Errorf("Provide(firmware): %v, want no such condition", err)
	}
}

func TestCrashLoopBacksOffExponentially(t *testing.T) {
	s := start(t, Config{
		Backoff:  Backoff{Base: 10 * time.Millisecond, Max: 40 * time.Millisecond, Healthy: time.Hour},
		Services: []Service{sh("crash", "exit 1")},
	})
	waitfor.Cond(t, 10*time.Second, "5 restarts", func() bool { return state(s, "crash").Restarts >= 5 })
	var delays []string
	for _, m := range supervisorLog(s) {
		if _, after, ok := strings.Cut(m, "; restarting in "); ok && strings.HasPrefix(m, "crash: exit status 1") {
			delays = append(delays, after)
		}
	}
	want := []string{"10ms", "20ms", "40ms", "40ms", "40ms"}
	if len(delays) < len(want) || !slices.Equal(delays[:len(want)], want) {
		t.Errorf("restart delays %v, want them to start %v", delays, want)
	}
}

func TestCrashLoopDoesNotStarveOthers(t *testing.T) {
	// A service that dies at once, restarted with no delay, must not keep
	// the others from starting or the API from answering.
	s := start(t, Config{
		Backoff: Backoff{Base: time.Microsecond, Max: time.Microsecond, Healthy: time.Hour},
		Services: []Service{
			sh("crash", "exit 1"),
			sh("steady", "exec sleep 1000"),
			{Name: "missing", Path: "/nonexistent"},
			sh("late", "exec sleep 1000", "steady"),
		},
	})
	waitfor.Cond(t, 10*time.Second, "steady and late running", running(s, "steady", "late"))
	waitfor.Cond(t, 10*time.Second, "crash restarted 20 times", func() bool { return state(s, "crash").Restarts >= 20 })
	for _, n := range []string{"steady", "late"} {
		if st := state(s, n); st.Restarts != 0 || st.State != StateRunning {
			t.Errorf("%s: %s with %d restarts; want running, never restarted", n, st.State, st.Restarts)
		}
	}
	start := time.Now()
	s.Status()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Status took %v during a crash loop", d)
	}
}

func TestMissingBinaryIsReportedNotFatal(t *testing.T) {
	s := start(t, Config{
		Backoff:  Backoff{Base: 5 * time.Millisecond, Max: 5 * time.Millisecond, Healthy: time.Hour},
		Services: []Service{{Name: "ghost", Path: "/nonexistent/ghost"}, sh("ok", "exec sleep 1000")},
	})
	waitfor.Cond(t, 10*time.Second, "ok running", running(s, "ok"))
	waitfor.Cond(t, 10*time.Second, "ghost tried twice", func() bool {
		n := 0
		for _, m := range supervisorLog(s) {
			if strings.HasPrefix(m, "ghost: cannot start: exec /nonexistent/ghost: no such file or directory") {
				n++
			}
		}
		return n >= 2
	})
	lines, _, _ := s.Logs("ghost", 0)
	if len(lines) == 0 || !strings.Contains(lines[0].Text, "cannot start") {
		t.Errorf("ghost's own log should say it cannot start; got %v", lines)
	}
}

func TestReapsOrphans(t *testing.T) {
	// The service forks a child that forks a grandchild and exits at once,
	// so the grandchild is reparented to us (as to PID 1) and must be
	// reaped when it exits.
	s := start(t, Config{Services: []Service{
		sh("forker", "sh -c 'sleep 0.05 & exit 0'; exec sleep 1000"),
	}})
	waitfor.Cond(t, 10*time.Second, "forker running", running(s, "forker"))
	waitfor.Cond(t, 10*time.Second, "the orphan reaped", func() bool { return s.SystemStatus().OrphansReaped >= 1 })
	waitfor.Cond(t, 10*time.Second, "no zombie children", func() bool { return len(zombieChildren(t)) == 0 })
}

// zombieChildren lists our children in state Z.
func zombieChildren(t *testing.T) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var zombies []int
	me := os.Getpid()
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...; comm may contain spaces and parens.
		rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
		var st string
		var pid, ppid int
		fmt.Sscanf(string(b), "%d", &pid)
		fmt.Sscanf(rest, "%s %d", &st, &ppid)
		if ppid == me && st == "Z" {
			zombies = append(zombies, pid)
		}
	}
	return zombies
}

func TestShutdownReverseOrderKillsStubbornService(t *testing.T) {
	s := start(t, Config{Services: []Service{
		sh("first", "exec sleep 1000"),
		sh("second", "exec sleep 1000", "first"),
		// Ignored signals stay ignored across exec, so sleep ignores
		// SIGTERM too.
		{Name: "stubborn", Path: "/bin/sh", Args: []string{"-c", "trap '' TERM; echo ready; exec sleep 1000"},
			After: []string{"second"}, StopTimeout: 100 * time.Millisecond},
	}})
	waitfor.Cond(t, 10*time.Second, "all running", running(s, "first", "second", "stubborn"))
	waitfor.Cond(t, 10*time.Second, "stubborn has set its trap", func() bool {
		l, _, _ := s.Logs("stubborn", 0)
		return len(l) > 0 && l[0].Text == "ready"
	})
	pids := map[string]int{}
	for _, st := range s.Status() {
		pids[st.Name] = st.PID
	}
	s.Shutdown(2 * time.Second)

	msgs := supervisorLog(s)
	kill := indexOf(msgs, "stubborn: did not stop within 100ms of SIGTERM; sending SIGKILL")
	st, nd, fi := indexOf(msgs, "stubborn: stopped"), indexOf(msgs, "second: stopped"), indexOf(msgs, "first: stopped")
	if kill < 0 || st < 0 || nd < 0 || fi < 0 || !(kill < st && st < nd && nd < fi) {
		t.Errorf("want stubborn SIGKILLed, then stopped, then second, then first:\n%s", strings.Join(msgs, "\n"))
	}
	want := map[string]string{"stubborn": "signal: killed", "second": "signal: terminated", "first": "signal: terminated"}
	for name, exit := range want {
		if got := state(s, name); got.State != StateStopped || got.LastExit != exit {
			t.Errorf("%s: %s, last exit %q; want stopped, %q", name, got.State, got.LastExit, exit)
		}
		if err := unix.Kill(pids[name], 0); err != unix.ESRCH {
			t.Errorf("%s (pid %d) still exists after Shutdown: kill 0 = %v", name, pids[name], err)
		}
	}
	// Nothing restarts after shutdown.
	if err := s.Restart("first"); err == nil {
		t.Error("Restart after Shutdown succeeded")
	}
}

func TestRestartAndStop(t *testing.T) {
	s := start(t, Config{
		Backoff:  Backoff{Base: time.Millisecond, Max: time.Millisecond, Healthy: time.Hour},
		Services: []Service{sh("svc", "exec sleep 1000")},
	})
	waitfor.Cond(t, 10*time.Second, "svc running", running(s, "svc"))
	oldPID := state(s, "svc").PID
	if err := s.Restart("svc"); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 10*time.Second, "svc restarted", func() bool { st := state(s, "svc"); return st.State == StateRunning && st.PID != oldPID })
	if st := state(s, "svc"); st.Restarts != 1 || st.LastExit != "signal: terminated" {
		t.Errorf("after Restart: restarts %d, last exit %q; want 1, signal: terminated", st.Restarts, st.LastExit)
	}
	if err := s.Stop("svc"); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 10*time.Second, "svc stopped", func() bool { return state(s, "svc").State == StateStopped })
	time.Sleep(50 * time.Millisecond) // a wrongly scheduled restart (1 ms backoff) would have happened by now
	if st := state(s, "svc"); st.State != StateStopped || st.PID != 0 {
		t.Errorf("after Stop: %s pid %d; want stopped", st.State, st.PID)
	}
	if err := s.Stop("nosuch"); err == nil || !strings.Contains(err.Error(), `unknown service "nosuch"`) {
		t.Errorf("Stop(nosuch) = %v, want unknown service", err)
	}
}

func TestRestartPolicies(t *testing.T) {
	s := start(t, Config{
		Backoff: Backoff{Base: time.Millisecond, Max: time.Millisecond, Healthy: time.Hour},
		Services: []Service{
			{Name: "oneshot", Path: "/bin/sh", Args: []string{"-c", "exit 4"}, Restart: RestartNever},
			{Name: "clean", Path: "/bin/sh", Args: []string{"-c", "exit 0"}, Restart: RestartOnFailure},
			{Name: "dirty", Path: "/bin/sh", Args: []string{"-c", "exit 2"}, Restart: RestartOnFailure},
		},
	})
	waitfor.Cond(t, 10*time.Second, "dirty restarted", func() bool { return state(s, "dirty").Restarts >= 2 })
	waitfor.Cond(t, 10*time.Second, "oneshot and clean stopped", func() bool {
		return state(s, "oneshot").State == StateStopped && state(s, "clean").State == StateStopped
	})
	for _, n := range []string{"oneshot", "clean"} {
		if st := state(s, n); st.Restarts != 0 {
			t.Errorf("%s restarted %d times, want 0", n, st.Restarts)
		}
	}
}

func TestServiceOutputGoesToItsRing(t *testing.T) {
	s := start(t, Config{Services: []Service{sh("talker", "echo to-out; echo to-err >&2; exec sleep 1000")}})
	waitfor.Cond(t, 10*time.Second, "two lines", func() bool { l, _, _ := s.Logs("talker", 0); return len(l) >= 2 })
	lines, _, _ := s.Logs("talker", 0)
	got := map[string]string{}
	for _, l := range lines {
		got[l.Stream] = l.Text
	}
	if got["stdout"] != "to-out" || got["stderr"] != "to-err" {
		t.Errorf("ring holds %v; want stdout to-out and stderr to-err", lines)
	}
}

// A service with a User runs as that uid and gid with no supplementary
// groups and no capabilities, and finds its ExtraFiles at fds 3, 4, ...
// on every run (the web UI's listeners, which PID 1 opens).
func TestServiceUserAndExtraFiles(t *testing.T) {
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "status"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	in, err := os.Create(filepath.Join(dir, "greeting"))
	if err != nil {
		t.Fatal(err)
	}
	in.WriteString("hello from fd 4\n")
	in.Seek(0, 0)
	defer in.Close()
	// Both files are 0600 root's in a 0700 directory: only the inherited
	// descriptors let the service reach them.
	svc := sh("unprivileged", `grep -E '^(Uid|Gid|Groups|CapEff|CapPrm):' /proc/self/status >&3; cat <&4 >&3; echo started >&3`)
	svc.User = &User{UID: 64043, GID: 64044}
	svc.ExtraFiles = []*os.File{out, in}
	svc.Restart = RestartAlways
	s := start(t, Config{Services: []Service{svc}, Backoff: Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond, Healthy: time.Minute}})
	// The restarted run gets the same files.
	read := func() string { b, _ := os.ReadFile(out.Name()); return string(b) }
	waitfor.Cond(t, 10*time.Second, "a second run", func() bool { return strings.Count(read(), "started") >= 2 })
	s.Stop("unprivileged")
	got := read()
	for _, want := range []string{"Uid:\t64043\t64043\t64043\t64043", "Gid:\t64044\t64044\t64044\t64044",
		"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "hello from fd 4", "started"} {
		if !strings.Contains(got, want) {
			t.Errorf("the service wrote %q; want %q in it", got, want)
		}
	}
	if i := strings.Index(got, "Groups:"); i < 0 || strings.TrimSpace(strings.SplitN(got[i+len("Groups:"):], "\n", 2)[0]) != "" {
		t.Errorf("the service wrote %q; want no supplementary groups", got)
	}
}

// A service may keep named capabilities and supplementary groups across
// the change of user (iked: CAP_NET_ADMIN and CAP_NET_BIND_SERVICE, and
// the group that may use configd's socket), and no others.
func TestServiceUserKeepsOnlyNamedCapabilities(t *testing.T) {
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "status"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	svc := sh("netadmin", `grep -E '^(Uid|Groups|CapEff|CapPrm|CapAmb|NoNewPrivs):' /proc/self/status >&3; echo started >&3; sleep 60`)
	svc.User = &User{UID: 64043, GID: 64044, Groups: []uint32{64045}, Caps: []uintptr{unix.CAP_NET_ADMIN, unix.CAP_NET_BIND_SERVICE}}
	svc.ExtraFiles = []*os.File{out}
	start(t, Config{Services: []Service{svc}})
	read := func() string { b, _ := os.ReadFile(out.Name()); return string(b) }
	waitfor.Cond(t, 10*time.Second, "the service's report", func() bool { return strings.Contains(read(), "started") })
	got := read()
	// CAP_NET_BIND_SERVICE is bit 10, CAP_NET_ADMIN bit 12: 0x1400.
	for _, want := range []string{"Uid:\t64043\t64043\t64043\t64043", "Groups:\t64045",
		"CapEff:\t0000000000001400", "CapPrm:\t0000000000001400", "CapAmb:\t0000000000001400", "NoNewPrivs:\t1"} {
		if !strings.Contains(got, want) {
			t.Errorf("the service wrote %q; want %q in it", got, want)
		}
	}
}

// Every service runs with no_new_privs, root's too: a set-user-ID root
// binary that a service as its own user finds (or an attacker in it
// plants) runs with the service's user, not root's. The same binary run
// outside the supervisor does make its caller root, so the test would
// see the difference.
func TestServicesRunWithNoNewPrivs(t *testing.T) {
	dir := t.TempDir()
	// The service's user must reach the binary: the test's directories
	// are 0700.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	setuidID := filepath.Join(dir, "id")
	b, err := os.ReadFile("/usr/bin/id")
	if err != nil {
		t.Skipf("no /usr/bin/id to make a set-user-ID copy of: %v", err)
	}
	if err := os.WriteFile(setuidID, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(setuidID, 0o4755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	// Without the supervisor, the copy does raise a user to root (the
	// file system honours set-user-ID): what the flag has to stop.
	probe := exec.Command(setuidID, "-u")
	probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 64043, Gid: 64044, Groups: []uint32{}}}
	if out, err := probe.Output(); err != nil || strings.TrimSpace(string(out)) != "0" {
		t.Skipf("a set-user-ID root binary in %s does not make uid 64043 root here (%q, %v): nothing to check", dir, out, err)
	}

	out, err := os.Create(filepath.Join(dir, "report"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	user := sh("user", `grep '^NoNewPrivs:' /proc/self/status >&3; echo "euid $(`+setuidID+` -u)" >&3; echo user-done >&3; sleep 60`)
	user.User = &User{UID: 64043, GID: 64044}
	user.ExtraFiles = []*os.File{out}
	root := sh("root", `grep '^NoNewPrivs:' /proc/self/status >&3; echo root-done >&3; sleep 60`, "user")
	root.ExtraFiles = []*os.File{out}
	start(t, Config{Services: []Service{user, root}})
	read := func() string { b, _ := os.ReadFile(out.Name()); return string(b) }
	waitfor.Cond(t, 10*time.Second, "both services' reports", func() bool {
		return strings.Contains(read(), "user-done") && strings.Contains(read(), "root-done")
	})
	got := read()
	if n := strings.Count(got, "NoNewPrivs:\t1"); n != 2 {
		t.Errorf("the services wrote %q; want NoNewPrivs 1 from both", got)
	}
	if !strings.Contains(got, "euid 64043") {
		t.Errorf("the services wrote %q; want the set-user-ID root binary to run as 64043 (euid 64043)", got)
	}
}

func TestValidateTableRefusesRootUserAndNilFiles(t *testing.T) {
	for _, svc := range []Service{
		{Name: "a", Path: "/bin/sh", User: &User{UID: 0, GID: 10}},
		{Name: "a", Path: "/bin/sh", ExtraFiles: []*os.File{nil}},
		{Name: "a", Path: "/bin/sh", User: &User{UID: 10, GID: 10, Caps: []uintptr{unix.CAP_LAST_CAP + 1}}},
	} {
		if err := validateTable([]Service{svc}, nil); err == nil {
			t.Errorf("validateTable accepted %+v", svc)
		}
	}
}
