package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestPID1StaysSmall guards why PID 1 is a binary of its own: it must link
// no HTTP or TLS stack and nothing of the configuration store or the
// services. One such import brings megabytes into the process that must
// never fail (and onto the ALIX card, whose firmware budget is 12 MiB).
func TestPID1StaysSmall(t *testing.T) {
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	forbidden := []string{
		"net/http", "crypto/tls", "html/template", "go.etcd.io/bbolt",
		"github.com/flashgate/flashgate/config",
		"github.com/flashgate/flashgate/services/",
		"github.com/flashgate/flashgate/ipsec/",
		"github.com/flashgate/flashgate/webui",
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(d, f)) {
				t.Errorf("PID 1 links %s (forbidden: %s)", d, f)
			}
		}
	}
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed %d packages: %q", len(deps), out)
	}
}
