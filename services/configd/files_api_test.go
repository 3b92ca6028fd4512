package configd_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd"
)

func TestAPIFilesReadBack(t *testing.T) {
	e := serve(t)
	ctx := context.Background()
	if _, err := e.c.File(ctx, "webui.key"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("File before PutFile: %v, want an error matching fs.ErrNotExist", err)
	}
	key := []byte("-----BEGIN PRIVATE KEY-----\nnot really\n-----END PRIVATE KEY-----\n")
	info, err := e.c.PutFile(ctx, "webui.key", key)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "webui.key" || info.Size != len(key) || info.Storage != "card" || info.Note != "" {
		t.Errorf("PutFile answered %+v, want webui.key, %d bytes, on the card, no note", info, len(key))
	}
	got, err := e.c.File(ctx, "webui.key")
	if err != nil || !bytes.Equal(got, key) {
		t.Fatalf("File = %q, %v; want what was stored", got, err)
	}
	// Next to the database, mode 0600, and not in the configuration.
	path := filepath.Join(filepath.Dir(e.store.Path()), configd.DefaultFilesDir, "webui.key")
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, %v; want a file of mode 0600", path, fi, err)
	}
	if h, _ := e.c.History(ctx); len(h) != 1 {
		t.Errorf("storing a file made %d revisions, want the 1 of a fresh store", len(h))
	}
	if b, _ := e.c.Export(ctx, config.SecretsIncluded, ""); bytes.Contains(b, []byte("not really")) {
		t.Error("a backup holds a stored file")
	}
	// Replacing it, and the largest file allowed.
	big := bytes.Repeat([]byte{0xa5}, configdapi.MaxFileSize)
	if _, err := e.c.PutFile(ctx, "webui.key", big); err != nil {
		t.Fatalf("PutFile of %d bytes: %v", len(big), err)
	}
	if got, _ := e.c.File(ctx, "webui.key"); !bytes.Equal(got, big) {
		t.Errorf("after replacing: %d bytes, want %d", len(got), len(big))
	}
	if _, err := e.c.PutFile(ctx, "empty", nil); err != nil {
		t.Errorf("PutFile of an empty file: %v", err)
	}
	if got, err := e.c.File(ctx, "empty"); err != nil || len(got) != 0 {
		t.Errorf("empty file read back as %q, %v", got, err)
	}
}

func TestAPIFilesRefused(t *testing.T) {
	e := serve(t)
	ctx := context.Background()
	var ae *configdapi.APIError
	_, err := e.c.PutFile(ctx, "big", make([]byte, configdapi.MaxFileSize+1))
	if !errors.As(err, &ae) || ae.Status != http.StatusRequestEntityTooLarge || ae.Code != configdapi.CodeTooLarge {
		t.Errorf("PutFile of %d bytes: %v, want 413 %s", configdapi.MaxFileSize+1, err, configdapi.CodeTooLarge)
	}
	if _, err := e.c.File(ctx, "big"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an oversized file was kept: %v", err)
	}
	// Names are checked by the server, not only by the client.
	cases := []struct {
		path string
		want int
	}{
		{"/v1/files/Webui.key", http.StatusBadRequest},
		{"/v1/files/" + strings.Repeat("a", 65), http.StatusBadRequest},
		{"/v1/files/a~1", http.StatusBadRequest},
		{"/v1/files/..%2Fconfig.db", http.StatusBadRequest},
		{"/v1/files/a%20b", http.StatusBadRequest},
		{"/v1/files/a/b", http.StatusNotFound}, // no route
	}
	for _, tc := range cases {
		for _, method := range []string{"PUT", "GET"} {
			if code, body := e.raw(t, method, tc.path, "x"); code != tc.want {
				t.Errorf("%s %s: %d %s, want %d", method, tc.path, code, body, tc.want)
			}
		}
	}
	if code, body := e.raw(t, "PUT", "/v1/files/"+strings.Repeat("a", 64), "x"); code != http.StatusOK {
		t.Errorf("PUT of a 64-character name: %d %s, want 200", code, body)
	}
	if code, _ := e.raw(t, "GET", "/v1/files/..%2Fconfig.db", ""); code == http.StatusOK {
		t.Error("the database was read through the file store")
	}
	entries, _ := os.ReadDir(filepath.Join(filepath.Dir(e.store.Path()), configd.DefaultFilesDir))
	if len(entries) != 1 {
		t.Errorf("files directory holds %d entries after refused writes, want the 1 accepted", len(entries))
	}
	if _, err := e.c.PutFile(ctx, "../x", []byte("x")); !errors.Is(err, configdapi.ErrBadFileName) {
		t.Errorf("client PutFile ../x: %v, want ErrBadFileName", err)
	}
	// configd not running is not "no such file": a caller would make a
	// new key.
	gone := configdapi.New(filepath.Join(shortDir(t), "no.sock"))
	if _, err := gone.File(ctx, "webui.key"); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("File with configd not running: %v, want an error not matching fs.ErrNotExist", err)
	}
}

func TestAPIFactoryResetRemovesFiles(t *testing.T) {
	e := serve(t)
	ctx := context.Background()
	for _, name := range []string{"webui.key", "webui.crt"} {
		if _, err := e.c.PutFile(ctx, name, []byte(name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.c.FactoryReset(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"webui.key", "webui.crt"} {
		if got, err := e.c.File(ctx, name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after a factory reset: %q, %v; want gone", name, got, err)
		}
	}
	dir := filepath.Join(filepath.Dir(e.store.Path()), configd.DefaultFilesDir)
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s after a factory reset: %v, want removed", dir, err)
	}
	// A reset with nothing stored works too.
	if _, err := e.c.FactoryReset(ctx, "test"); err != nil {
		t.Errorf("factory reset without stored files: %v", err)
	}
}

// TestAPIFilesInRAM: without a config partition the files are kept next
// to the database in RAM, and the answer says they will not survive a
// reboot.
func TestAPIFilesInRAM(t *testing.T) {
	dir := shortDir(t)
	store, err := config.Open(filepath.Join(dir, "config.db"), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sock := filepath.Join(dir, "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: configd.NewServer(store, "ram", "no config partition", t.Logf)}
	go srv.Serve(ln)
	defer srv.Close()
	info, err := configdapi.New(sock).PutFile(context.Background(), "webui.crt", []byte("cert"))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, configd.DefaultFilesDir)
	if info.Storage != "ram" || !strings.Contains(info.Note, "lost on reboot") || !strings.Contains(info.Note, want) {
		t.Errorf("PutFile in RAM mode answered %+v, want storage ram and a note naming %s and the reboot", info, want)
	}
	if _, err := os.Stat(filepath.Join(want, "webui.crt")); err != nil {
		t.Errorf("file not under the database's directory: %v", err)
	}
}
