// Package localsock binds and dials the unix sockets of the appliance's
// local APIs (under paths.RunDir). Every service binds its socket the same
// way: a socket file that still answers belongs to a running process and
// is left alone, a stale one is replaced, and the socket is never open to
// anyone its mode does not name, not even for a moment.
//
// It links no HTTP stack, so PID 1's supervisor, whose API is one JSON
// line each way, binds its sockets with it too; internal/localapi is the
// HTTP side.
package localsock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Access says who may connect to a socket besides root.
type Access struct {
	// Mode is the socket file's mode: 0600 for root only, 0660 for root
	// and Group.
	Mode os.FileMode
	// Group is the socket's group; -1 leaves it root's (the creator's).
	Group int
}

// RootOnly is the access of a socket only root may use.
var RootOnly = Access{Mode: 0o600, Group: -1}

// Group is the access of a socket root and the members of gid may use
// (0660); gid -1 means root's group.
func Group(gid int) Access { return Access{Mode: 0o660, Group: gid} }

// umaskMu serializes this package's umask changes: the umask is the
// process's, and two Listens at once would restore each other's.
var umaskMu sync.Mutex

// Listen binds the unix socket at path with access a, creating its
// directory (0755) if needed. A socket file that accepts a connection
// belongs to a running process: Listen refuses to take it over and says
// so. A stale one (nothing answers) is removed first.
//
// The socket is created owner-only by the umask, so that no other user can
// connect before it has its group and mode; the chmod after is also for a
// file system that ignores the umask for sockets. The umask is the
// process's: no other file should be created while Listen runs.
func Listen(path string, a Access) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("socket directory of %s: %w", path, err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s is served by another process", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	umaskMu.Lock()
	old := unix.Umask(0o177)
	ln, err := net.Listen("unix", path)
	unix.Umask(old)
	umaskMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if a.Group >= 0 {
		if err := os.Chown(path, -1, a.Group); err != nil {
			ln.Close()
			return nil, fmt.Errorf("socket %s: group %d: %w", path, a.Group, err)
		}
	}
	if err := os.Chmod(path, a.Mode.Perm()); err != nil {
		ln.Close()
		return nil, fmt.Errorf("socket %s: mode %#o: %w", path, a.Mode.Perm(), err)
	}
	return ln, nil
}

// Dial connects to the unix socket at path.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}
