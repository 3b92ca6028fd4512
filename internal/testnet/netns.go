package testnet

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// NS is one network namespace made by this package.
type NS struct {
	Name string
}

// NewNS creates a namespace named prefix+suffix with loopback up, and
// registers its deletion (and the killing of everything still running in it)
// with t.Cleanup.
func NewNS(t testing.TB, name string) *NS {
	t.Helper()
	RequireRoot(t)
	if err := run("ip", "netns", "add", name); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	ns := &NS{Name: name}
	t.Cleanup(func() { ns.Delete() })
	if err := ns.Run("ip", "link", "set", "lo", "up"); err != nil {
		t.Fatalf("namespace %s: loopback up: %v", name, err)
	}
	return ns
}

// Delete kills the processes left in the namespace (by PID, as listed by
// `ip netns pids`) and deletes it. The calling process is spared: a thread
// of it that entered the namespace (Do) makes it appear in the list.
func (n *NS) Delete() {
	out, _ := exec.Command("ip", "netns", "pids", n.Name).Output()
	for _, f := range strings.Fields(string(out)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 && pid != os.Getpid() {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
	run("ip", "netns", "del", n.Name)
}

// Run runs a command inside the namespace and returns an error carrying its
// output when it fails.
func (n *NS) Run(args ...string) error {
	_, err := n.Output(args...)
	return err
}

// Cmd is one set-up command and the namespace it runs in.
type Cmd struct {
	NS   *NS
	Args []string
}

// In is the command args run in ns, for RunAll.
func In(ns *NS, args ...string) Cmd { return Cmd{NS: ns, Args: args} }

// RunAll runs a test's set-up commands in order and stops the test at the
// first that fails, naming it.
func RunAll(t testing.TB, cmds []Cmd) {
	t.Helper()
	for _, c := range cmds {
		if err := c.NS.Run(c.Args...); err != nil {
			t.Fatalf("%s: %v: %v", c.NS.Name, c.Args, err)
		}
	}
}

// Output runs a command inside the namespace and returns its standard output.
func (n *NS) Output(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s in %s: %w: %s", strings.Join(args, " "), n.Name, err, strings.TrimSpace(stderr.String()+" "+stdout.String()))
	}
	return stdout.String(), nil
}

// Command returns an unstarted command that runs inside the namespace.
func (n *NS) Command(args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name}, args...)...)
}

// Do runs f on an OS thread that has entered the namespace, so Go code (a
// socket, a TUN device) can be created inside it. Sockets and file
// descriptors created in f keep their namespace after f returns.
func (n *NS) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		// The thread is never returned to the scheduler's pool after
		// setns: it exits with the goroutine (no UnlockOSThread).
		runtime.LockOSThread()
		fd, err := unix.Open("/run/netns/"+n.Name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open namespace %s: %w", n.Name, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter namespace %s: %w", n.Name, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// Prefix returns a short prefix unique to this process and call, for
// namespace and interface names (interface names are limited to 15 bytes).
func Prefix() string {
	var b [3]byte
	rand.Read(b[:])
	return "fg" + hex.EncodeToString(b[:])
}

// RequireRoot fails the test with a clear sentence when not run as root:
// namespace tests are part of `make test`, which CI runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test creates network namespaces and needs root: run `make test` as root")
	}
}

// RequireTool fails the test when a command is missing, naming the Debian
// package that provides it (scripts/setup.sh installs them all).
func RequireTool(t testing.TB, cmd, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(cmd); err != nil {
		t.Fatalf("%s is not installed: apt-get install %s (or run `make setup` as root)", cmd, pkg)
	}
}

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
