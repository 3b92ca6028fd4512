package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/firmware/supervisor"
)

// BenchmarkSupervisorIdleRSS measures the resident memory of the process
// that is PID 1 + supervisor on the appliance, idle, with its API serving:
// `flashgate supervisor` runs the same code without booting. It is built
// for the appliance's 386 (softfloat, as for the Geode) and for amd64. The
// loop times a /v1/system query; the figure that matters is rss_KiB, the
// VmRSS the process reports after the loop (boot.qemu.rss_init_kb in
// make bench; target 8 MB).
func BenchmarkSupervisorIdleRSS(b *testing.B) {
	for _, arch := range []struct{ name, goarch, go386 string }{
		{"386", "386", "softfloat"},
		{"amd64", "amd64", ""},
	} {
		b.Run(arch.name, func(b *testing.B) {
			bin := filepath.Join(b.TempDir(), "flashgate")
			build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
			build.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch.goarch, "GO386="+arch.go386, "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				b.Fatalf("build for %s: %v\n%s", arch.goarch, err, out)
			}
			sock := filepath.Join(b.TempDir(), "supervisor.sock")
			cmd := exec.Command(bin, "supervisor", "-socket", sock)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := cmd.Start(); err != nil {
				b.Fatalf("start (a 386 binary needs the kernel's IA32 emulation): %v", err)
			}
			defer func() {
				cmd.Process.Signal(syscall.SIGTERM)
				cmd.Wait()
			}()
			c := supervisor.NewClient(sock)
			ctx := context.Background()
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := c.System(ctx); err == nil {
					break
				} else if time.Now().After(deadline) {
					b.Fatalf("supervisor API never answered: %v", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			var sys supervisor.System
			for b.Loop() {
				var err error
				if sys, err = c.System(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(sys.RSSKiB), "rss_KiB")
			if m := sys.Memory; m != nil {
				b.ReportMetric(float64(m.PSS), "pss_KiB")
				b.ReportMetric(float64(m.Private), "private_KiB")
			}
			fi, _ := os.Stat(bin)
			b.ReportMetric(float64(fi.Size())/1024, "binary_KiB")
		})
	}
}
