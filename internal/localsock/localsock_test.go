package localsock

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The socket is root-only from its creation (the umask, not a chmod
// after), and the process's umask is as it was afterwards.
func TestSocketIsCreatedRootOnly(t *testing.T) {
	prev := unix.Umask(0o022)
	defer unix.Umask(prev)
	path := filepath.Join(t.TempDir(), "configd.sock")
	ln, err := Listen(path, RootOnly)
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

// A group's socket (configd's restricted API) is its group's: the web UI's
// user connects, another user does not, and neither reaches a root-only
// socket.
func TestWebSocketIsTheWebGroups(t *testing.T) {
	dir := t.TempDir()
	// t.TempDir and its parent are 0700: let the other users look in.
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	full, err := Listen(filepath.Join(dir, "configd.sock"), RootOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	web, err := Listen(filepath.Join(dir, "configd-web.sock"), Group(64044))
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

// A socket that still answers is another process's: Listen refuses it and
// leaves it working. One nobody answers on is stale and replaced.
func TestListenRefusesALiveSocketAndReplacesAStaleOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "svc.sock")
	live, err := Listen(path, RootOnly)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := live.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if ln, err := Listen(path, RootOnly); err == nil {
		ln.Close()
		t.Fatal("a second Listen took over a socket that answers")
	} else if !strings.Contains(err.Error(), "served by another process") {
		t.Errorf("second Listen: %v, want served by another process", err)
	}
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatalf("the live socket no longer answers after the refused Listen: %v", err)
	}
	c.Close()

	// Closing a unix listener removes its file; a crashed process
	// leaves one behind, which a plain file stands in for.
	live.Close()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(path, Group(-1))
	if err != nil {
		t.Fatalf("Listen over a stale socket file: %v", err)
	}
	defer ln.Close()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || st.Mode&0o777 != 0o660 {
		t.Errorf("socket mode %o, want a 0660 socket", st.Mode)
	}
}
