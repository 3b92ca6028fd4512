package main

import (
	"os"
	"testing"
	"time"
)

// TestKernelXFRMInVM runs ipsec/xfrm's tests (among them TestKernelTunnel:
// traffic through kernel SAs our code installed, between two namespaces)
// on the qemu board's own kernel (built from kernel/config) in qemu, since
// this host's kernel has no ESP. It is part of `make test`.
func TestKernelXFRMInVM(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	if os.Geteuid() != 0 {
		t.Fatal("run as root (make test): fetching the kernel source needs apt")
	}
	if err := run("qemu", 40*time.Minute, false); err != nil {
		t.Fatal(err)
	}
}
