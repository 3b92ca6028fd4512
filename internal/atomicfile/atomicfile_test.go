package atomicfile

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWriteFile(t *testing.T) {
	defer unix.Umask(unix.Umask(0o077))
	dir := filepath.Join(t.TempDir(), "new", "dir")
	path := filepath.Join(dir, "state.json")
	if err := WriteFile(path, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "two" {
		t.Fatalf("read back %q, %v; want two", b, err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v under umask 077, want 0644", st.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("%d files left in the directory, want only the file", len(ents))
	}
	// A write that cannot rename (the path is a directory) leaves no
	// temporary file and the directory as it was.
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "sub"), []byte("x"), 0o600); err == nil {
		t.Error("replacing a directory succeeded")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("%d entries after the failed write, want 2", len(ents))
	}
}
