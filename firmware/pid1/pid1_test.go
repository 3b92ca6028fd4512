package pid1

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/firmware/supervisor"
)

// The boot tests run the real PID 1 — this test binary re-executed — as
// PID 1 of new PID, mount, UTS and network namespaces. Its mounts, hostname
// and loopback stay inside them; it is told not to touch the host's
// console, modules or watchdog; and reboot(2) from a PID namespace's init
// ends the namespace instead of the machine (SIGHUP for a restart, SIGINT
// for a power-off), which is what the tests observe.
const pid1Env = "FLASHGATE_PID1_TEST_ARGS"

func TestMain(m *testing.M) {
	// PID 1 under test starts its services from -exe, which the tests
	// point at a missing file; should this binary still be started as a
	// service ("pid1.test configd"), it must not run the tests again.
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		fmt.Fprintf(os.Stderr, "pid1.test started as %q: refusing\n", os.Args[1:])
		os.Exit(2)
	}
	if args, ok := os.LookupEnv(pid1Env); ok {
		// Keep every mount PID 1 makes out of the host's namespace.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			fmt.Printf("make mounts private: %v\n", err)
			os.Exit(99)
		}
		os.Exit(Main(strings.Fields(args)))
	}
	os.Exit(m.Run())
}

type bootedInit struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	seen  int
	done  chan struct{}
	err   error
}

func bootInit(t *testing.T) *bootedInit {
	t.Helper()
	args := "-console none -watchdog= -config-wait 0s -exe /nonexistent/flashgate -modules " + t.TempDir()
	keepConsoleLogLevel(t)
	checkHostUntouched(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), pid1Env+"="+args)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS | syscall.CLONE_NEWNET,
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start PID 1 in new namespaces: %v", err)
	}
	b := &bootedInit{cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			b.mu.Lock()
			b.lines = append(b.lines, sc.Text())
			b.mu.Unlock()
		}
		b.err = cmd.Wait()
		close(b.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-b.done
	})
	return b
}

// printkPath holds the kernel's console log levels. Sysctls outside net.*
// are not namespaced: when the host's kernel command line chooses no log
// level (no loglevel=, quiet or debug), the PID 1 under test sets the
// host's console log level (quietConsole), and PID 1 has no flag to leave
// it alone.
const printkPath = "/proc/sys/kernel/printk"

// keepConsoleLogLevel puts the host's console log levels back as they
// were when the test ends (cleanups run last first: after PID 1 is
// killed), and checks that they are.
func keepConsoleLogLevel(t *testing.T) {
	t.Helper()
	before, err := os.ReadFile(printkPath)
	if err != nil {
		t.Fatalf("read %s: %v", printkPath, err)
	}
	want := strings.Fields(string(before))
	t.Cleanup(func() {
		now, err := os.ReadFile(printkPath)
		if err == nil && slices.Equal(strings.Fields(string(now)), want) {
			return
		}
		t.Logf("PID 1 changed the host's %s from %q to %q: restoring it", printkPath, want, strings.Fields(string(now)))
		if err := os.WriteFile(printkPath, []byte(strings.Join(want, " ")), 0o644); err != nil {
			t.Errorf("restore %s: %v", printkPath, err)
		}
		if now, _ := os.ReadFile(printkPath); !slices.Equal(strings.Fields(string(now)), want) {
			t.Errorf("the host's %s is %q after the test, want %q as before it", printkPath, strings.Fields(string(now)), want)
		}
	})
}

// checkHostUntouched checks, when the test ends, what PID 1 would change
// on the host were it not in namespaces of its own: the host name (UTS
// namespace), the time zone (PID 1's table has hostd write
// /etc/localtime when configd says so: the services' binary is missing
// here, and the configd hostd would ask is behind its own /run's socket,
// a tmpfs in its mount namespace) and the supervisor's socket under /run.
func checkHostUntouched(t *testing.T) {
	t.Helper()
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	zone, zoneErr := os.ReadFile(localtimePath)
	_, sockErr := os.Lstat(supervisor.SocketPath)
	t.Cleanup(func() {
		if now, err := os.Hostname(); err != nil || now != hostname {
			t.Errorf("the host's name is %q (%v) after the test, want %q as before it", now, err, hostname)
		}
		if now, err := os.ReadFile(localtimePath); (err == nil) != (zoneErr == nil) || !bytes.Equal(now, zone) {
			t.Errorf("the host's %s changed under the test (%v, before: %v)", localtimePath, err, zoneErr)
		}
		if _, err := os.Lstat(supervisor.SocketPath); sockErr != nil && err == nil {
			t.Errorf("the test left %s on the host", supervisor.SocketPath)
		}
	})
}

// expect waits for a console line containing want, after the last match.
func (b *bootedInit) expect(t *testing.T, want string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b.mu.Lock()
		for i := b.seen; i < len(b.lines); i++ {
			if strings.Contains(b.lines[i], want) {
				b.seen = i + 1
				b.mu.Unlock()
				return b.lines[i]
			}
		}
		console := strings.Join(b.lines, "\n")
		b.mu.Unlock()
		select {
		case <-b.done:
			t.Fatalf("PID 1 ended (%v) without printing %q; console:\n%s", b.err, want, console)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("PID 1 never printed %q; console:\n%s", want, console)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// endedBy waits for PID 1 to end and returns the signal that ended it.
func (b *bootedInit) endedBy(t *testing.T) syscall.Signal {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		t.Fatal("PID 1 did not end")
	}
	ws, ok := b.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		t.Fatalf("PID 1 ended with %v, want the signal reboot(2) sends in a PID namespace", b.cmd.ProcessState)
	}
	return ws.Signal()
}

// client reaches the API socket inside PID 1's mount namespace.
func (b *bootedInit) client(t *testing.T) *supervisor.Client {
	t.Helper()
	sock := filepath.Join(fmt.Sprintf("/proc/%d/root", b.cmd.Process.Pid), supervisor.SocketPath)
	c := supervisor.NewClient(sock)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := c.System(context.Background())
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("supervisor API at %s: %v", sock, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBootAndPowerOff(t *testing.T) {
	b := bootInit(t)
	b.expect(t, "flashgate init: pid 1, version ")
	b.expect(t, "flashgate init: board ")
	b.expect(t, "flashgate init: watchdog: disabled") // armed before the card is touched
	b.expect(t, "running from RAM defaults, nothing will be saved")
	c := b.client(t)
	sys, err := c.System(context.Background())
	if err != nil || sys.PID != 1 || sys.RSSKiB <= 0 {
		t.Fatalf("system %+v, %v; want PID 1 with its RSS", sys, err)
	}
	t.Logf("PID 1 + supervisor RSS after boot: %d KiB", sys.RSSKiB)
	// Every service's binary is missing here (-exe): each is reported,
	// none stops the boot. The API answers before the supervision loop's
	// first pass, so a service may still be waiting for nothing at first.
	var bad []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		services, err := c.Services(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		bad = bad[:0]
		for _, st := range services {
			switch {
			case st.State == supervisor.StateBackoff && strings.Contains(st.LastExit, "exec /nonexistent/flashgate: no such file or directory"):
			case st.State == supervisor.StateWaiting && len(st.WaitingFor) > 0:
			default:
				bad = append(bad, fmt.Sprintf("service %s: %s, last exit %q", st.Name, st.State, st.LastExit))
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, msg := range bad {
		t.Errorf("%s; want backoff after the missing binary, or waiting for one", msg)
	}
	if err := c.Power(context.Background(), supervisor.PowerOff); err != nil {
		t.Fatal(err)
	}
	b.expect(t, "flashgate init: poweroff: stopping services")
	b.expect(t, "flashgate init: powering off")
	if sig := b.endedBy(t); sig != syscall.SIGINT {
		t.Errorf("PID 1 ended by %v, want SIGINT (power-off in a PID namespace)", sig)
	}
}

func TestCtrlAltDelReboots(t *testing.T) {
	b := bootInit(t)
	b.client(t) // booted
	// With ctrl-alt-del handling off the kernel sends PID 1 SIGINT.
	if err := b.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	b.expect(t, "flashgate init: interrupt: reboot")
	b.expect(t, "flashgate init: rebooting")
	if sig := b.endedBy(t); sig != syscall.SIGHUP {
		t.Errorf("PID 1 ended by %v, want SIGHUP (restart in a PID namespace)", sig)
	}
}

// A ctrl-alt-del while the box is still booting is kept for the main
// loop, not Go's default action (which would end PID 1 and panic the
// kernel).
func TestCtrlAltDelWhileBooting(t *testing.T) {
	b := bootInit(t)
	b.expect(t, "flashgate init: pid 1, version ")
	if err := b.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	b.expect(t, "flashgate init: interrupt: reboot")
	b.expect(t, "flashgate init: rebooting")
	if sig := b.endedBy(t); sig != syscall.SIGHUP {
		t.Errorf("PID 1 ended by %v, want SIGHUP (restart in a PID namespace)", sig)
	}
}

func TestNotPID1Refuses(t *testing.T) {
	if code := Main(nil); code != 1 {
		t.Errorf("Main outside PID 1 returned %d, want 1", code)
	}
}
