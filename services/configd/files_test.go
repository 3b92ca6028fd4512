package configd

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/config"
)

func TestValidFileName(t *testing.T) {
	cases := []struct {
		name string
		want bool
	}{
		{"webui.key", true},
		{"ssh_host_ed25519_key", true},
		{"a", true},
		{"0-9._-z", true},
		{strings.Repeat("a", 64), true},
		{"", false},
		{strings.Repeat("a", 65), false},
		{".", false},
		{"..", false},
		{"Webui.key", false},
		{"a/b", false},
		{"../config.db", false},
		{"webui.key~123", false}, // the store's temporary files
		{"a b", false},
		{"a\x00", false},
		{"é", false},
	}
	for _, tc := range cases {
		if got := configdapi.ValidFileName(tc.name); got != tc.want {
			t.Errorf("ValidFileName(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// countingCard counts the brackets around writes.
type countingCard struct {
	mu           sync.Mutex
	begins, ends int
}

func (c *countingCard) BeginWrite() error { c.mu.Lock(); c.begins++; c.mu.Unlock(); return nil }
func (c *countingCard) EndWrite() error   { c.mu.Lock(); c.ends++; c.mu.Unlock(); return nil }

func TestFileStoreWritesAtomically(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "files")
	card := &countingCard{}
	fs1 := NewFileStore(dir, card, t.Logf)
	if _, err := fs1.Get("webui.key"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Get before any Put: %v, want fs.ErrNotExist", err)
	}
	if err := fs1.Put("webui.key", []byte("first")); err != nil {
		t.Fatal(err)
	}
	// A power cut during an earlier write left a temporary file: the next
	// write of that name clears it.
	os.WriteFile(filepath.Join(dir, "webui.key~4711"), []byte("half"), 0o600)
	if err := fs1.Put("webui.key", []byte("second")); err != nil {
		t.Fatal(err)
	}
	if got, err := fs1.Get("webui.key"); err != nil || string(got) != "second" {
		t.Errorf("read back %q, %v; want \"second\"", got, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "webui.key" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only webui.key (no temporary files)", names)
	}
	if fi, err := os.Stat(filepath.Join(dir, "webui.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, %v; want 0600", fi.Mode(), err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, %v; want 0700", fi.Mode(), err)
	}
	if card.begins != 2 || card.ends != 2 {
		t.Errorf("card brackets: %d BeginWrite, %d EndWrite; want 2 of each for 2 writes", card.begins, card.ends)
	}
	if err := fs1.Put("big", make([]byte, configdapi.MaxFileSize+1)); !errors.Is(err, configdapi.ErrFileTooBig) {
		t.Errorf("Put of %d bytes: %v, want configdapi.ErrFileTooBig", configdapi.MaxFileSize+1, err)
	}
	if err := fs1.Put("../config.db", []byte("x")); !errors.Is(err, configdapi.ErrBadFileName) {
		t.Errorf("Put ../config.db: %v, want configdapi.ErrBadFileName", err)
	}
	if card.begins != 2 {
		t.Errorf("refused writes touched the card (%d BeginWrite)", card.begins)
	}
}

// TestFileStoreFailedWriteKeepsOldFile fills a small tmpfs so that a write
// fails half-way (ENOSPC): the old file must be intact and no temporary
// file left behind.
func TestFileStoreFailedWriteKeepsOldFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (it mounts a small tmpfs)")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64k"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	files := NewFileStore(filepath.Join(dir, "files"), nil, t.Logf)
	old := bytes.Repeat([]byte("o"), 4096)
	if err := files.Put("webui.crt", old); err != nil {
		t.Fatal(err)
	}
	filler, _ := os.Create(filepath.Join(dir, "filler"))
	filler.Write(make([]byte, 128<<10)) // fills the tmpfs; the error is the point
	filler.Close()
	err := files.Put("webui.crt", bytes.Repeat([]byte("n"), 32<<10))
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("write on a full file system: %v, want ENOSPC", err)
	}
	if got, _ := files.Get("webui.crt"); !bytes.Equal(got, old) {
		t.Errorf("after a failed write the file holds %d bytes %.10q..., want the old %d bytes", len(got), got, len(old))
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, "files", "*~*")); len(tmp) != 0 {
		t.Errorf("temporary files left behind: %v", tmp)
	}
}

// TestFileStoreOnReadOnlyCard stores files on a read-only tmpfs standing
// in for the config partition, sharing the card with a config store as
// configd does: writes work, and the partition is read-only again after
// each of them, also when a commit and a file write overlap.
func TestFileStoreOnReadOnlyCard(t *testing.T) {
	if !inPrivateMounts(t) {
		return
	}
	dir := mountReadOnlyTmpfs(t)
	card := &sharedCard{card: RemountCard{Dir: dir}}
	files := NewFileStore(filepath.Join(dir, DefaultFilesDir), card, t.Logf)
	if err := files.Put("webui.key", []byte("key")); err != nil {
		t.Fatalf("Put on the read-only card: %v", err)
	}
	if err := writable(dir); !errors.Is(err, unix.EROFS) {
		t.Fatalf("card left writable after a file write: %v", err)
	}
	if got, err := files.Get("webui.key"); err != nil || string(got) != "key" {
		t.Fatalf("read back from the read-only card: %q, %v", got, err)
	}

	// A writer whose EndWrite found the other still writing logs "card
	// left writable"; one whose file system went read-only under it fails.
	var logMu sync.Mutex
	var logged []string
	logf := func(format string, args ...any) {
		logMu.Lock()
		logged = append(logged, fmt.Sprintf(format, args...))
		logMu.Unlock()
	}
	files = NewFileStore(files.Dir(), card, logf)
	store, err := config.Open(filepath.Join(dir, DefaultDBName), config.Options{Card: card, Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 90)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range 30 {
			store.SetPath("", "system.hostname", fmt.Sprintf("gw-%d", i))
			if _, err := store.Commit("test", "overlapping"); err != nil {
				errs <- err
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 60 {
			if err := files.Put("webui.crt", bytes.Repeat([]byte{byte(i)}, 2048)); err != nil {
				errs <- err
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("overlapping commit and file write: %v", err)
	}
	for _, l := range logged {
		t.Errorf("overlapping commit and file write: %s", l)
	}
	if err := writable(dir); !errors.Is(err, unix.EROFS) {
		t.Fatalf("card left writable after overlapping writes: %v", err)
	}
	if card.writers != 0 {
		t.Errorf("shared card counts %d writers after all finished", card.writers)
	}

	if err := files.RemoveAll(); err != nil {
		t.Fatalf("RemoveAll on the read-only card: %v", err)
	}
	if _, err := os.Stat(files.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("files directory after RemoveAll: %v", err)
	}
	if err := writable(dir); !errors.Is(err, unix.EROFS) {
		t.Fatalf("card left writable after RemoveAll: %v", err)
	}
}

func TestSharedCardRemountsOnce(t *testing.T) {
	inner := &countingCard{}
	card := &sharedCard{card: inner}
	card.BeginWrite()
	card.BeginWrite()
	card.EndWrite()
	if inner.begins != 1 || inner.ends != 0 {
		t.Errorf("with one writer still inside: %d begins, %d ends; want 1, 0", inner.begins, inner.ends)
	}
	card.EndWrite()
	if inner.ends != 1 {
		t.Errorf("after the last writer: %d ends, want 1", inner.ends)
	}
	if err := card.EndWrite(); err == nil {
		t.Error("EndWrite without BeginWrite was accepted")
	}
}

// FuzzValidFileName checks that every accepted name stays a plain entry of
// the store's directory and can never be one of its temporary files.
func FuzzValidFileName(f *testing.F) {
	for _, s := range []string{"webui.key", ".", "..", "../x", "a/b", "a~1", "", "A", strings.Repeat("z", 65), "...", "-.-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if !configdapi.ValidFileName(name) {
			return
		}
		const dir = "/cfg/files"
		if p := filepath.Join(dir, name); filepath.Dir(p) != dir || filepath.Base(p) != name {
			t.Errorf("accepted %q, which is not a plain entry of %s (%s)", name, dir, p)
		}
		if strings.ContainsAny(name, "~/\x00") || len(name) > 64 {
			t.Errorf("accepted %q", name)
		}
	})
}
