package configd

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The socket is root-only from its creation (the umask, not a chmod
// after), and configd's umask is as it was afterwards.
func TestSocketIsCreatedRootOnly(t *testing.T) {
	prev := unix.Umask(0o022)
	defer unix.Umask(prev)
	path := filepath.Join(t.TempDir(), "configd.sock")
	ln, err := listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode & 0o777; perm != 0o600 {
		t.Errorf("socket mode %o, want 600", perm)
	}
	if now := unix.Umask(0o022); now != 0o022 {
		t.Errorf("umask left at %o after listen, want 022", now)
	}
}

// dialAs connects to the unix socket at path from a process running as
// uid and gid (this test binary, run again as TestDialHelper), and
// reports the error of the connect, nil if it connected.
func dialAs(t *testing.T, path string, uid, gid uint32) error {
	t.Helper()
	// go test keeps the binary in a 0700 directory: run a copy.
	exe := filepath.Join(filepath.Dir(path), "dialhelper.test")
	if _, err := os.Stat(exe); err != nil {
		b, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exe, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(exe, "-test.run=^TestDialHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FG_DIAL_SOCKET="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// TestDialHelper is the child of dialAs.
func TestDialHelper(t *testing.T) {
	path := os.Getenv("FG_DIAL_SOCKET")
	if path == "" {
		t.Skip("only as dialAs's child")
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// The restricted API's socket is its group's: the web UI's user connects,
// another user does not, and neither reaches the full API's socket.
func TestWebSocketIsTheWebGroups(t *testing.T) {
	dir := t.TempDir()
	// t.TempDir and its parent are 0700: let the other users look in.
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	full, err := listen(filepath.Join(dir, "configd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	web, err := listenGroup(filepath.Join(dir, "configd-web.sock"), 64044)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	go func() {
		for _, ln := range []net.Listener{full, web} {
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
		}
	}()
	if err := dialAs(t, filepath.Join(dir, "configd-web.sock"), 64043, 64044); err != nil {
		t.Errorf("the web UI's user cannot reach the restricted socket: %v", err)
	}
	if err := dialAs(t, filepath.Join(dir, "configd-web.sock"), 64045, 64045); err == nil {
		t.Error("another user reached the restricted socket")
	}
	if err := dialAs(t, filepath.Join(dir, "configd.sock"), 64043, 64044); err == nil {
		t.Error("the web UI's user reached configd's full socket")
	}
}
