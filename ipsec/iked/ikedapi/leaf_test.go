package ikedapi

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestContractIsALeaf: the contract links nothing of the daemon, the IKE
// engine or the data planes, so that its clients (the console, the web
// UI) do not either. It fails with the offending import path.
func TestContractIsALeaf(t *testing.T) {
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed %d packages: %q", len(deps), out)
	}
	for _, d := range deps {
		for _, f := range []string{
			"github.com/flashgate/flashgate/ipsec/iked", "github.com/flashgate/flashgate/ipsec/ike",
			"github.com/flashgate/flashgate/ipsec/esp", "github.com/flashgate/flashgate/ipsec/xfrm",
			"github.com/flashgate/flashgate/ipsec/hwcrypto", "github.com/flashgate/flashgate/config",
			"github.com/vishvananda/netlink", "github.com/google/nftables",
		} {
			if d == f || strings.HasPrefix(d, f+"/") && d != "github.com/flashgate/flashgate/ipsec/iked/ikedapi" {
				t.Errorf("ipsec/iked/ikedapi links %s", d)
			}
		}
	}
}
