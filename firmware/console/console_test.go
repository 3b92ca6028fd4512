package console

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/firmware/supervisor"
)

// The getty tests run the real getty in a child process (this test binary
// re-executed) on a pseudo-terminal, and drive it from the master side as a
// person at a serial terminal would.
const childEnv = "FLASHGATE_CONSOLE_TEST_ARGS"

// fullRunEnv names a directory the child mounts a tiny tmpfs on (in its own
// mount namespace) and fills, to simulate a full /run.
const fullRunEnv = "FLASHGATE_CONSOLE_TEST_FULL_RUN"

// utsEnv (set to 1) starts the getty in a UTS namespace of its own, so a
// test can change its host name without touching the host's.
const utsEnv = "FLASHGATE_CONSOLE_TEST_UTS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childEnv); ok {
		if dir := os.Getenv(fullRunEnv); dir != "" {
			if err := fillTmpfs(dir); err != nil {
				fmt.Fprintf(os.Stderr, "full /run setup: %v\n", err)
				os.Exit(99)
			}
		}
		os.Exit(Main(strings.Split(args, "\n")))
	}
	os.Exit(m.Run())
}

// fillTmpfs mounts a 64 KiB tmpfs on dir, private to this process's mount
// namespace, and fills it.
func fillTmpfs(dir string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		return fmt.Errorf("mount tmpfs: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		return err
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for i := 0; i < 1000; i++ {
		if _, err := f.Write(chunk); err != nil {
			return nil // full, as wanted
		}
	}
	return fmt.Errorf("64 KiB tmpfs took 4 MB without filling up")
}

// openPTY returns a pseudo-terminal master and the path of its slave.
func openPTY(t *testing.T) (*os.File, string) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	return m, fmt.Sprintf("/dev/pts/%d", n)
}

// terminal is the person's side: everything the getty wrote, and a cursor.
type terminal struct {
	t      *testing.T
	master *os.File
	mu     sync.Mutex
	out    bytes.Buffer
	seen   int
	closed chan struct{}
}

func newTerminal(t *testing.T, master *os.File) *terminal {
	term := &terminal{t: t, master: master, closed: make(chan struct{})}
	go func() {
		defer close(term.closed)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return term
}

// expect waits until want appears after what was already matched.
func (term *terminal) expect(want string) {
	term.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		term.mu.Lock()
		rest := term.out.String()[term.seen:]
		if i := strings.Index(rest, want); i >= 0 {
			term.seen += i + len(want)
			term.mu.Unlock()
			return
		}
		term.mu.Unlock()
		if time.Now().After(deadline) {
			term.t.Fatalf("the console never showed %q; after the last match it showed:\n%s", want, rest)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (term *terminal) send(s string) {
	term.t.Helper()
	if _, err := term.master.Write([]byte(s)); err != nil {
		term.t.Fatalf("type %q: %v", s, err)
	}
}

func (term *terminal) all() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

type getty struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan error
}

// startGetty runs the getty on the pty slave. accounts is the accounts
// directory; the shell is a script that says who logged in.
func startGetty(t *testing.T, slave, accounts string, extra ...string) *getty {
	t.Helper()
	return startGettyWithFiles(t, slave, accounts, nil, extra...)
}

// startGettyWithFiles is startGetty with files handed to the getty as
// descriptors 3, 4, ...
func startGettyWithFiles(t *testing.T, slave, accounts string, files []*os.File, extra ...string) *getty {
	t.Helper()
	shell := filepath.Join(t.TempDir(), "shell")
	os.WriteFile(shell, []byte("#!/bin/sh\necho SHELL-STARTED as $USER\n"), 0o755)
	args := []string{"-device", slave, "-baud", "38400", "-board", "qemu", "-version", "1.2.3",
		"-accounts", accounts, "-shell", "/nonexistent/gosh," + shell, "-fail-delay", "10ms", "-bcrypt-cost", "4"}
	// extra holds flags ("-name", "value") and environment ("NAME=value").
	var extraEnv []string
	for i := 0; i < len(extra); i++ {
		if strings.HasPrefix(extra[i], "-") && i+1 < len(extra) {
			args = append(args, extra[i], extra[i+1])
			i++
			continue
		}
		extraEnv = append(extraEnv, extra[i])
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(extraEnv, childEnv+"="+strings.Join(args, "\n"))...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	for _, e := range extraEnv {
		if strings.HasPrefix(e, fullRunEnv+"=") {
			cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS
		}
		if e == utsEnv+"=1" {
			cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUTS
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &getty{cmd: cmd, stderr: &stderr, done: make(chan error, 1)}
	go func() { g.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-g.done
	})
	return g
}

// wait waits for the getty to exit and returns its exit code.
func (g *getty) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-g.done:
		g.done <- err // for the cleanup
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(10 * time.Second):
		t.Fatalf("the getty did not exit; its log:\n%s", g.stderr)
		return -1
	}
}

func TestFirstBootSetsPasswordThenLogin(t *testing.T) {
	master, slave := openPTY(t)
	term := newTerminal(t, master)
	accounts := t.TempDir()
	g := startGetty(t, slave, accounts)

	term.expect("No admin password is set.")
	term.expect("New admin password: ")
	term.send("shrt123\n")
	term.expect("That password is too short: at least 8 characters.")
	term.expect("New admin password: ")
	term.send("correct horse\n")
	term.expect("Repeat password: ")
	term.send("correct h0rse\n")
	term.expect("The passwords do not match.")
	term.expect("New admin password: ")
	term.send("correct horse\n")
	term.expect("Repeat password: ")
	term.send("correct horse\n")
	term.expect("Admin password set. It is kept in RAM only")
	term.expect("flashgate 1.2.3 on qemu")
	term.expect("login: ")

	// The line is what the board needs: 38400 baud, cooked, echo on at
	// the login prompt.
	tio, err := unix.IoctlGetTermios(int(master.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if tio.Cflag&unix.CBAUD != unix.B38400 || tio.Lflag&(unix.ICANON|unix.ECHO) != unix.ICANON|unix.ECHO {
		t.Errorf("termios cflag %#o lflag %#o: want B38400, ICANON and ECHO", tio.Cflag, tio.Lflag)
	}

	term.send("admin\n")
	term.expect("Password: ")
	term.send("wrong password\n")
	term.expect("Login incorrect")
	term.expect("login: ")
	term.send("root\n") // no such user: the same message
	term.expect("Password: ")
	term.send("correct horse\n")
	term.expect("Login incorrect")
	term.expect("login: ")
	term.send("admin\n")
	term.expect("Password: ")
	term.send("correct horse\n")
	term.expect("SHELL-STARTED as admin")
	term.expect("login: ") // back to the prompt after the shell exits

	out := term.all()
	for _, secret := range []string{"correct horse", "correct h0rse", "wrong password", "shrt123"} {
		if strings.Contains(out, secret) {
			t.Errorf("the password %q was echoed on the console", secret)
		}
	}
	if !strings.Contains(out, "admin\r\n") {
		t.Error("the user name was not echoed")
	}
	hash, err := os.ReadFile(filepath.Join(accounts, "admin.bcrypt"))
	if err != nil || !bytes.HasPrefix(hash, []byte("$2a$04$")) {
		t.Errorf("stored hash %q, %v; want a bcrypt hash of cost 4", hash, err)
	}
	term.send("\x04") // ^D at the prompt ends the getty; the supervisor starts a new one
	if code := g.wait(t); code != 0 {
		t.Errorf("getty exit code %d after ^D, want 0", code)
	}
	if log := g.stderr.String(); !strings.Contains(log, "lost at reboot") || strings.Contains(log, "correct horse") {
		t.Errorf("getty log should say the password is RAM-only and never contain it:\n%s", log)
	}
}

func TestExistingPasswordThreeFailuresEndTheGetty(t *testing.T) {
	accounts := t.TempDir()
	if err := NewRAMAccounts(accounts, 4).SetPassword(AdminUser, []byte("s3cret-pass")); err != nil {
		t.Fatal(err)
	}
	master, slave := openPTY(t)
	term := newTerminal(t, master)
	g := startGetty(t, slave, accounts)
	for i := 0; i < maxFailures; i++ {
		term.expect("login: ")
		term.send("admin\n")
		term.expect("Password: ")
		term.send("guess\n")
		term.expect("Login incorrect")
	}
	if code := g.wait(t); code != 1 {
		t.Errorf("getty exit code %d after %d failures, want 1", code, maxFailures)
	}
	if strings.Contains(term.all(), "No admin password is set.") {
		t.Error("asked for a new password although one is set")
	}
	if !strings.Contains(g.stderr.String(), "3 failed logins") {
		t.Errorf("getty log does not say why it ended:\n%s", g.stderr)
	}
}

// A password typed at the user prompt must not reach the log: a failed
// login names the user only when it is an account.
func TestFailedLoginDoesNotLogAnUnknownUserName(t *testing.T) {
	accounts := t.TempDir()
	if err := NewRAMAccounts(accounts, 4).SetPassword(AdminUser, []byte("s3cret-pass")); err != nil {
		t.Fatal(err)
	}
	master, slave := openPTY(t)
	term := newTerminal(t, master)
	g := startGetty(t, slave, accounts)
	for _, user := range []string{"s3cret-pass-typed-early", "admin"} {
		term.expect("login: ")
		term.send(user + "\n")
		term.expect("Password: ")
		term.send("guess\n")
		term.expect("Login incorrect")
	}
	term.expect("login: ")
	term.send("\x04") // ^D at the prompt ends the getty
	g.wait(t)
	log := g.stderr.String()
	if strings.Contains(log, "typed-early") {
		t.Errorf("the log holds what was typed at the user prompt:\n%s", log)
	}
	for _, want := range []string{"failed login for an unknown user (1 of 3)", `failed login for "admin" (2 of 3)`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}

func TestLoginPromptShowsTheBannerAgainWhenItChanges(t *testing.T) {
	// At boot the prompt comes before the web UI serves: its certificate
	// fingerprint, needed to trust the first HTTPS connection, must still
	// reach the console without anyone pressing a key.
	accounts := t.TempDir()
	if err := NewRAMAccounts(accounts, 4).SetPassword(AdminUser, []byte("s3cret-pass")); err != nil {
		t.Fatal(err)
	}
	fp := filepath.Join(t.TempDir(), "webui.fingerprint")
	master, slave := openPTY(t)
	term := newTerminal(t, master)
	startGetty(t, slave, accounts, "-fingerprint", fp)
	term.expect("login: ")
	if strings.Contains(term.all(), "certificate SHA-256") {
		t.Fatalf("the banner shows a fingerprint before the web UI wrote one:\n%s", term.all())
	}
	if err := os.WriteFile(fp, []byte("AB:CD:EF\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	term.expect("certificate SHA-256 AB:CD:EF")
	term.expect("login: ")
	time.Sleep(1500 * time.Millisecond) // a second look finds nothing new
	if n := strings.Count(term.all(), "certificate SHA-256"); n != 1 {
		t.Errorf("the banner was shown with the fingerprint %d times, want once (it changed once)", n)
	}
	// The refreshed prompt still logs in.
	term.send("admin\n")
	term.expect("Password: ")
	term.send("s3cret-pass\n")
	term.expect("SHELL-STARTED as admin")
}

// TestLoginPromptFollowsTheHostName: hostd sets the configured host name
// while the box boots, often after the first prompt is on the console. The
// prompt must then show the new name without anyone pressing a key.
func TestLoginPromptFollowsTheHostName(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a UTS namespace of the getty's own")
	}
	hostBefore, _ := os.Hostname()
	accounts := t.TempDir()
	if err := NewRAMAccounts(accounts, 4).SetPassword(AdminUser, []byte("s3cret-pass")); err != nil {
		t.Fatal(err)
	}
	master, slave := openPTY(t)
	term := newTerminal(t, master)
	g := startGetty(t, slave, accounts, utsEnv+"=1")
	term.expect("login: ")
	const name = "gw-console-test"
	if strings.Contains(term.all(), name) {
		t.Fatalf("the prompt shows %s before it was set:\n%s", name, term.all())
	}
	setHostnameOf(t, g.cmd.Process.Pid, name)
	term.expect(name + " login: ")
	if h, _ := os.Hostname(); h != hostBefore {
		t.Errorf("the host's name changed to %q (was %q): the test must stay in the getty's namespace", h, hostBefore)
	}
	term.send("admin\n")
	term.expect("Password: ")
	term.send("s3cret-pass\n")
	term.expect("SHELL-STARTED as admin")
}

// setHostnameOf sets the host name in the UTS namespace of process pid,
// from a thread that enters it and is never returned to the Go scheduler
// (it ends with its goroutine, locked), so no other goroutine runs there.
func setHostnameOf(t *testing.T, pid int, name string) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread exits with this goroutine
		fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/uts", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWUTS); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		errc <- unix.Sethostname([]byte(name))
	}()
	if err := <-errc; err != nil {
		t.Fatalf("set the host name in pid %d's namespace: %v", pid, err)
	}
}

func TestFullRunStillReachesLogin(t *testing.T) {
	run := t.TempDir()
	master, slave := openPTY(t)
	term := newTerminal(t, master)
	startGetty(t, slave, filepath.Join(run, "flashgate", "accounts"), fullRunEnv+"="+run)
	term.expect("No admin password is set.")
	term.expect("New admin password: ")
	term.send("correct horse\n")
	term.expect("Repeat password: ")
	term.send("correct horse\n")
	term.expect("Could not store the password: ")
	term.expect("no space left on device")
	term.expect("login: ")
}

// Started by the supervisor with a readiness pipe, the getty says it is
// ready once, when its first prompt waits for input (a first boot's
// password prompt here), and closes the pipe so that nothing it starts
// later (the shell) holds it.
func TestGettyNotifiesReadyAtItsFirstPrompt(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	master, slave := openPTY(t)
	term := newTerminal(t, master)
	startGettyWithFiles(t, slave, t.TempDir(), []*os.File{w}, supervisor.ReadyFDEnv+"=3")
	w.Close() // the getty's copy is the only one left
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r) // until the getty closes it
		got <- string(b)
	}()
	term.expect("New admin password: ")
	select {
	case b := <-got:
		if b != "\n" {
			t.Errorf("the readiness pipe got %q, want one newline", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the getty showed its prompt but did not notify and close its readiness descriptor")
	}
	term.send("correct horse\n")
	term.expect("Repeat password: ")
	term.send("correct horse\n")
	term.expect("login: ")
}

func TestRAMAccounts(t *testing.T) {
	a := NewRAMAccounts(filepath.Join(t.TempDir(), "accounts"), 4)
	if a.HasAdmin() {
		t.Fatal("HasAdmin on an empty store")
	}
	if a.Verify(AdminUser, []byte("anything-at-all")) {
		t.Error("Verify succeeded with no password set")
	}
	for _, tc := range []struct {
		user, pass, wantErr string
	}{
		{"admin", "1234567", "too short"},
		{"admin", strings.Repeat("x", 73), "too long"},
		{"root", "long enough", `no account "root"`},
		{"admin", "long enough", ""},
	} {
		err := a.SetPassword(tc.user, []byte(tc.pass))
		if (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("SetPassword(%q, %d bytes) = %v, want error containing %q", tc.user, len(tc.pass), err, tc.wantErr)
		}
	}
	fi, err := os.Stat(a.Dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("accounts directory mode %v, %v; want 0700", fi.Mode(), err)
	}
	for _, tc := range []struct {
		user, pass string
		want       bool
	}{
		{"admin", "long enough", true},
		{"admin", "long enougH", false},
		{"Admin", "long enough", false},
		{"root", "long enough", false},
		{"", "", false},
	} {
		if got := a.Verify(tc.user, []byte(tc.pass)); got != tc.want {
			t.Errorf("Verify(%q, %q) = %v, want %v", tc.user, tc.pass, got, tc.want)
		}
	}
}

func TestConfigureTTYRejectsUnknownBaud(t *testing.T) {
	master, slave := openPTY(t)
	_ = master
	f, err := os.OpenFile(slave, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := configureTTY(int(f.Fd()), 12345); err == nil || !strings.Contains(err.Error(), "baud 12345") {
		t.Errorf("configureTTY(12345) = %v, want an error naming the baud", err)
	}
	for baud, speed := range speeds {
		if err := configureTTY(int(f.Fd()), baud); err != nil {
			t.Fatalf("configureTTY(%d): %v", baud, err)
		}
		tio, _ := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		if tio.Cflag&unix.CBAUD != speed || tio.Cflag&unix.CSIZE != unix.CS8 {
			t.Errorf("after configureTTY(%d): cflag %#o, want speed %#o and CS8", baud, tio.Cflag, speed)
		}
	}
}

func TestBanner(t *testing.T) {
	_, lan, _ := net.ParseCIDR("192.168.1.1/24")
	lan.IP = net.ParseIP("192.168.1.1")
	_, v6, _ := net.ParseCIDR("2001:db8::1/64")
	v6.IP = net.ParseIP("2001:db8::1")
	addrs := []iface{{"eth1", lan}, {"eth1", v6}}
	fp := filepath.Join(t.TempDir(), "webui.fingerprint")

	got := banner("alix2d13", "0.3.0", addrs, fp)
	want := "flashgate 0.3.0 on alix2d13\n  eth1   192.168.1.1/24\n  eth1   2001:db8::1/64\n"
	if got != want {
		t.Errorf("banner before the web UI serves:\n%s\nwant:\n%s", got, want)
	}
	os.WriteFile(fp, []byte("AB:CD:EF\n"), 0o644)
	got = banner("alix2d13", "0.3.0", addrs, fp)
	want += "Web UI: https://192.168.1.1/\n  certificate SHA-256 AB:CD:EF\n"
	if got != want {
		t.Errorf("banner once the web UI serves:\n%s\nwant:\n%s", got, want)
	}
	if got := banner("", "", nil, fp+".none"); got != "flashgate (unknown version) on unknown board\n  no network addresses yet\n" {
		t.Errorf("banner without facts: %q", got)
	}
}
