package configd_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd"
	"github.com/flashgate/flashgate/services/configd/configdapi"
)

// The console's "boot other slot" to firmware that reads only database
// format 2: configd rewrites the database in format 2 and commits nothing
// more; the web UI's and the services' sockets cannot ask for it.
func TestAPIHandOff(t *testing.T) {
	ctx := context.Background()
	e := serve(t)
	etag := addTunnel(t, ctx, e.c, "")
	if _, err := e.c.Commit(ctx, configdapi.CommitRequest{Etag: etag, Who: "admin", Message: "a tunnel"}); err != nil {
		t.Fatal(err)
	}
	web := serveRestricted(t, e)
	read := serveAnother(t, e, "read.sock", configd.ReadOnly())
	for name, env := range map[string]*env{"web": web, "read-only": read} {
		if status, body := env.raw(t, "POST", "/v1/handoff", `{"db_formats":[1,2],"schema":2}`); status != http.StatusForbidden {
			t.Errorf("%s socket: POST /v1/handoff answered %d %s", name, status, body)
		}
	}
	// Firmware that reads this database needs nothing.
	resp, err := e.c.HandOff(ctx, configdapi.HandOffRequest{DBFormats: config.DBFormats, Schema: config.SchemaVersion})
	if err != nil || resp.Converted || resp.Running.Revision != 2 {
		t.Fatalf("hand-off to firmware that reads format %d: %+v, %v", config.DBFormat, resp, err)
	}
	if _, err := e.c.HandOff(ctx, configdapi.HandOffRequest{DBFormats: []int{4}, Schema: config.SchemaVersion}); err == nil {
		t.Fatal("a hand-off to firmware reading only format 4 was accepted")
	}
	if _, err := e.c.HandOff(ctx, configdapi.HandOffRequest{DBFormats: config.DBFormats, Schema: config.SchemaVersion - 1}); err == nil || !strings.Contains(err.Error(), "schema") {
		t.Fatalf("a hand-off to firmware reading an older schema: %v", err)
	}
	etag, err = e.c.Set(ctx, "", "system.hostname", "still-editable")
	if err != nil {
		t.Fatalf("edits after a hand-off that changed nothing: %v", err)
	}
	resp, err = e.c.HandOff(ctx, configdapi.HandOffRequest{DBFormats: []int{1, 2}, Schema: 2})
	if err != nil || !resp.Converted || resp.Running.Revision != 2 || resp.Running.Message != "a tunnel" {
		t.Fatalf("hand-off to format 2 firmware: %+v, %v", resp, err)
	}
	_, err = e.c.Commit(ctx, configdapi.CommitRequest{Etag: etag, Who: "admin", Message: "too late"})
	if !errors.Is(err, config.ErrHandedOff) {
		t.Fatalf("a commit after the hand-off: %v, want %s", err, configdapi.CodeHandedOff)
	}
	// Reads go on: the services keep running until the reboot.
	if c, _, err := e.c.Running(ctx); err != nil || len(c.Tunnels) != 1 {
		t.Fatalf("running after the hand-off: %v", err)
	}
}
