package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flashgate/flashgate/images"
)

// TestKernelXFRMInVM runs ipsec/xfrm's tests (among them TestKernelTunnel:
// traffic through kernel SAs our code installed, between two namespaces)
// on Debian's 686 board kernel in qemu, since this host's kernel has no
// ESP. It is part of `make test`.
func TestKernelXFRMInVM(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	if os.Geteuid() != 0 {
		t.Fatal("run as root (make test): fetching the kernel package needs apt")
	}
	wd, _ := os.Getwd()
	root, err := images.FindRepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src := &images.KernelSource{CacheDir: filepath.Join(root, "out", "cache")}
	k, err := src.Fetch(ctx, "686")
	if err != nil {
		t.Fatalf("fetch the 686 kernel: %v", err)
	}
	if err := run(k.Root, 6*time.Minute, false); err != nil {
		t.Fatal(err)
	}
}
