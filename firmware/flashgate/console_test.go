package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/services/configd/configdapi"
	"github.com/flashgate/flashgate/services/configd/configdtest"
)

// A card whose database is not a bbolt file: configd sets it aside and runs
// the defaults, and the console's banner must say so.
func TestConfigNoticesSetAside(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "config.db")
	if err := os.WriteFile(db, []byte("this is not a configuration database, it is a half-written card"), 0o600); err != nil {
		t.Fatal(err)
	}
	// configd opens it as on the card (it must set it aside, not refuse it).
	cd := configdtest.Start(t, configdtest.Options{Dir: dir, Storage: "card"})

	got := configNotices(context.Background(), cd.Client)
	if len(got) == 0 || !strings.Contains(got[0], "set aside") || !strings.Contains(got[0], "default configuration") {
		t.Fatalf("notices %q: want one saying the configuration was set aside and the defaults run", got)
	}
	if none := configNotices(context.Background(), configdapi.New(filepath.Join(dir, "nobody.sock"))); len(none) != 1 || !strings.Contains(none[0], "configd does not answer") {
		t.Fatalf("with no configd the notices are %q, want one saying configd does not answer", none)
	}
}
