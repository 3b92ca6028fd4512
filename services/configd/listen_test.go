package configd

import (
	"path/filepath"
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
