package hostd

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/services/configd/configdtest"
)

// mainEnv makes the test binary run hostd's Main with these arguments:
// the process test runs it so, in a UTS namespace of its own.
const mainEnv = "HOSTD_TEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(mainEnv); ok {
		os.Exit(Main(strings.Fields(args)))
	}
	os.Exit(m.Run())
}

// syncBuffer is a child's output, read while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// commit changes the system section of cd's store as edit says and
// commits it.
func commit(t *testing.T, cd *configdtest.Server, edit func(*config.System)) {
	t.Helper()
	cand, etag := cd.Store.Candidate()
	edit(&cand.System)
	if _, err := cd.Store.ReplaceCandidate(etag, cand); err != nil {
		t.Fatal(err)
	}
	if _, err := cd.Store.Commit("test", "hostd test"); err != nil {
		t.Fatal(err)
	}
}

// hostnameOf reads the host name in the UTS namespace of process pid,
// from a thread that joins it and then ends.
func hostnameOf(pid int) (string, error) {
	type result struct {
		name string
		err  error
	}
	rc := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends in pid's namespace
		fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/uts", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			rc <- result{err: err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWUTS); err != nil {
			rc <- result{err: fmt.Errorf("setns: %w", err)}
			return
		}
		var uts unix.Utsname
		if err := unix.Uname(&uts); err != nil {
			rc <- result{err: err}
			return
		}
		rc <- result{name: unix.ByteSliceToString(uts.Nodename[:])}
	}()
	r := <-rc
	return r.name, r.err
}

// TestMainFollowsConfigd runs hostd as the appliance does — its Main in
// a process of its own, after the flags PID 1's table passes — with a
// UTS namespace, a time zone file and a supervisor of the test's own, and
// a real configd that comes up after it, takes commits and restarts.
func TestMainFollowsConfigd(t *testing.T) {
	keepHostUntouched(t)
	dir := t.TempDir()
	localtime := filepath.Join(dir, "localtime")
	var hook consoleHook
	_, supSock := serveSupervisor(t, supervisor.Config{ConsoleBaud: hook.set})
	sock := filepath.Join(dir, "configd.sock")

	args := fmt.Sprintf("-configd %s -supervisor %s -localtime %s -hostname -console-baud 38400", sock, supSock, localtime)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainEnv+"="+args)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUTS}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start hostd in a UTS namespace: %v", err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill() // by its pid; a no-op once it has been waited for
		<-exited
	})
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; hostd's log:\n%s", what, out.String())
			}
		}
	}
	logged := func(s string) int { return strings.Count(out.String(), s) }
	hostname := func() string {
		name, err := hostnameOf(cmd.Process.Pid)
		if err != nil {
			t.Fatalf("host name of hostd's namespace: %v", err)
		}
		return name
	}

	// hostd starts before configd, as it may at boot.
	time.Sleep(300 * time.Millisecond)
	cd := configdtest.Start(t, configdtest.Options{Dir: dir, Storage: "test"})
	until("hostd to reach configd", func() bool { return logged("hostd: following configd at "+sock+", revision 1") == 1 })

	commit(t, cd, func(s *config.System) { s.Hostname, s.Timezone, s.ConsoleBaud = "gw1", "Europe/Berlin", 115200 })
	until("the host name", func() bool { return hostname() == "gw1" })
	until("the time zone", func() bool { return checkZone(localtime, "CEST", 7200) == nil })
	until("the console speed", func() bool { return slices.Equal(hook.got(), []int{115200}) })
	zone, err := os.Stat(localtime)
	if err != nil {
		t.Fatal(err)
	}

	// configd restarts: hostd follows it again and re-applies nothing.
	cd.Restart()
	until("hostd to follow the restarted configd", func() bool { return logged("hostd: following configd at "+sock+", revision 2") == 1 })
	// A commit of other system settings applies nothing either; a
	// time zone commit after it is applied, so it has been seen.
	commit(t, cd, func(s *config.System) { s.NTPServers = []string{"192.0.2.123"} })
	if now, err := os.Stat(localtime); err != nil || !os.SameFile(zone, now) {
		t.Errorf("%s was rewritten by the restart or an NTP commit (%v)", localtime, err)
	}
	commit(t, cd, func(s *config.System) { s.Timezone = "Asia/Kolkata" })
	until("the new time zone", func() bool { return checkZone(localtime, "IST", 19800) == nil })
	// hostd writes the zone, then logs it: the file can be seen first.
	until("hostd to log the new time zone", func() bool { return logged("hostd: time zone Asia/Kolkata") > 0 })

	if got := hook.got(); !slices.Equal(got, []int{115200}) {
		t.Errorf("the getty was restarted at %v, want once at 115200", got)
	}
	for _, line := range []string{"hostd: hostname gw1\n", "hostd: time zone Europe/Berlin", "hostd: console getty at 115200 baud\n", "hostd: time zone Asia/Kolkata"} {
		if n := logged(line); n != 1 {
			t.Errorf("%d log lines %q, want 1; log:\n%s", n, line, out.String())
		}
	}
	if hostname() != "gw1" {
		t.Errorf("host name in hostd's namespace changed again")
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if exitErr != nil {
			t.Errorf("hostd ended with %v after SIGTERM, want status 0; log:\n%s", exitErr, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Errorf("hostd did not end after SIGTERM")
	}
}
