package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd"
	"github.com/flashgate/flashgate/services/configd/configdapi"
)

// A card whose database is not a bbolt file: configd sets it aside and runs
// the defaults, and the console's banner must say so.
func TestConfigNoticesSetAside(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "config.db")
	if err := os.WriteFile(db, []byte("this is not a configuration database, it is a half-written card"), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := config.Open(db, config.Options{})
	if err != nil {
		t.Fatalf("open a corrupt database: %v (it must be set aside, not refused)", err)
	}
	defer store.Close()
	sock := filepath.Join(dir, "configd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: configd.NewServer(store, "card", "", t.Logf)}
	go srv.Serve(l)
	defer srv.Close()

	got := configNotices(context.Background(), configdapi.New(sock))
	if len(got) == 0 || !strings.Contains(got[0], "set aside") || !strings.Contains(got[0], "default configuration") {
		t.Fatalf("notices %q: want one saying the configuration was set aside and the defaults run", got)
	}
	if none := configNotices(context.Background(), configdapi.New(filepath.Join(dir, "nobody.sock"))); len(none) != 1 || !strings.Contains(none[0], "configd does not answer") {
		t.Fatalf("with no configd the notices are %q, want one saying configd does not answer", none)
	}
}
