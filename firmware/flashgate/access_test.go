package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/services/configd/configdapi"
	"github.com/flashgate/flashgate/services/configd/configdtest"
)

// TestAccessHelper is `flashgate access` in a child process (it changes
// its user for good): see TestAccessAsTheWebUIsUser.
func TestAccessHelper(t *testing.T) {
	args := os.Getenv("FG_ACCESS_ARGS")
	if args == "" {
		t.Skip("only as TestAccessAsTheWebUIsUser's child")
	}
	os.Exit(accessMain(strings.Split(args, " ")))
}

// `flashgate access` as the web UI's user, against configd's two sockets
// made as configd makes them: the full one refuses it, the restricted one
// (its group's) answers with the key redacted and refuses a clear-text
// export, and the database cannot be opened. As root everything is
// reachable, which shows that the test sees the difference.
func TestAccessAsTheWebUIsUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: it runs a child as another user")
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	// configd's three sockets as it makes them: the full API root's, the
	// restricted one the web UI's group's, the read-only one iked's.
	cd := configdtest.Start(t, configdtest.Options{Dir: dir, Storage: "card", Web: true, WebGroup: 64044, Read: true, ReadGroup: 64046})
	db := filepath.Join(dir, "config.db")
	ctx := context.Background()
	for _, kv := range [][]string{{"tunnels.hq.remote_address", "198.51.100.1"}, {"tunnels.hq.psk", "a pre-shared key, long enough"},
		{"tunnels.hq.local_subnets", "192.168.1.0/24"}, {"tunnels.hq.remote_subnets", "10.0.0.0/16"}} {
		if _, err := cd.Client.Set(ctx, "", kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cd.Client.Commit(ctx, configdapi.CommitRequest{Who: "test", Message: "a tunnel with a key"}); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestAccessHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FG_ACCESS_ARGS=-run "+dir+" -db "+db+" 64043:64044")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("flashgate access: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{"as uid 64043 gid 64044 groups []:", "configd-web.sock       connects", "configd-read.sock      refused: permission denied", "psk of tunnel hq: redacted",
		"export with secrets in the clear: refused", "configd.sock           refused: permission denied", "config.db              refused: permission denied"} {
		if !strings.Contains(got, want) {
			t.Errorf("flashgate access 64043:64044 says\n%s\nwant %q in it", got, want)
		}
	}
	if strings.Contains(got, "IN THE CLEAR") || strings.Contains(got, "GIVEN") {
		t.Errorf("the web UI's user got a key:\n%s", got)
	}

	// iked's user: the running configuration with its keys through the
	// read-only socket, and nothing else: no candidate, no export, neither
	// of the other configd sockets.
	cmd = exec.Command(os.Args[0], "-test.run=^TestAccessHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FG_ACCESS_ARGS=-run "+dir+" -db "+db+" 64045:64046:64047")
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("flashgate access: %v\n%s", err, out)
	}
	got = string(out)
	for _, want := range []string{"as uid 64045 gid 64046 groups [64047]:", "configd-read.sock      connects", "psk of tunnel hq: IN THE CLEAR",
		"candidate (the edits): refused", "export with secrets in the clear: refused",
		"configd-web.sock       refused: permission denied", "configd.sock           refused: permission denied",
		"config.db              refused: permission denied"} {
		if !strings.Contains(got, want) {
			t.Errorf("flashgate access 64045:64046:64047 says\n%s\nwant %q in it", got, want)
		}
	}

	var root strings.Builder
	reportAccess(&root, dir, db)
	if !strings.Contains(root.String(), "psk of tunnel hq: IN THE CLEAR") || !strings.Contains(root.String(), "config.db              readable") {
		t.Errorf("as root:\n%s\nwant the key in the clear through configd.sock, and the database readable", root.String())
	}
}
