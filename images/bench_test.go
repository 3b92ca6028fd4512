package images

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
)

// The benchmarks behind `make bench`'s image.<board>.firmware_bytes and
// boot.qemu.login_s. Run them with -benchtime 1x: one build or boot is one
// measurement.

// BenchmarkImage builds every supported board's image and reports what one
// firmware slot takes on the card.
func BenchmarkImage(b *testing.B) {
	root := requireBuildHost(b)
	out := b.TempDir()
	for _, board := range boards.All() {
		if board.Unsupported != "" {
			continue
		}
		b.Run(board.Name, func(b *testing.B) {
			bl := &Builder{RepoRoot: root, OutDir: out, CacheDir: filepath.Join(root, "out", "cache")}
			var rep *Report
			start := time.Now()
			for i := 0; i < b.N; i++ {
				var err error
				if rep, err = bl.Build(context.Background(), board, "bench"); err != nil {
					b.Fatal(err)
				}
				os.Remove(rep.Image)
			}
			b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "build_s")
			b.ReportMetric(float64(rep.FirmwareBytes()), "firmware_bytes")
			b.ReportMetric(float64(rep.KernelBytes), "kernel_bytes")
			b.ReportMetric(float64(rep.InitramfsBytes), "initramfs_bytes")
			b.ReportMetric(float64(rep.InitBytes), "init_bytes")
			b.ReportMetric(float64(rep.BootFreeBytes), "boot_free_bytes")
			// What compiling this board's kernel took when it was built
			// (the kernel cache records it), and what this build's kernel
			// step took: ~0 when it came from the cache.
			b.ReportMetric(rep.KernelBuildTime.Seconds(), "kernel_build_s")
			b.ReportMetric(rep.KernelStepTime.Seconds(), "kernel_step_s")
		})
	}
}

// BenchmarkBootBoards boots every supported board's own card once in qemu,
// on the CPU model closest to the board's (boards.Board.Emulation: -cpu
// pentium,+mmx for the net4801), a first boot and then an ordinary one, and
// reports login_s of the ordinary boot, as BenchmarkBootQEMU does.
func BenchmarkBootBoards(b *testing.B) {
	root := requireBuildHost(b)
	out := b.TempDir()
	for _, board := range boards.All() {
		if board.Unsupported != "" {
			continue
		}
		b.Run(board.Name, func(b *testing.B) {
			bl := &Builder{RepoRoot: root, OutDir: out, CacheDir: filepath.Join(root, "out", "cache")}
			rep, err := bl.Build(context.Background(), board, "bench")
			if err != nil {
				b.Fatal(err)
			}
			defer os.Remove(rep.Image)
			var login time.Duration
			for i := 0; i < b.N; i++ {
				card := filepath.Join(out, board.Name+"-card.img")
				if err := CopyCard(rep.Image, card); err != nil {
					b.Fatal(err)
				}
				for _, configured := range []bool{false, true} {
					vm, err := StartVM(QEMUConfig{Board: board, Image: card, NoReboot: true, Emulate: true}, bootLimit)
					if err != nil {
						b.Fatal(err)
					}
					ctx, cancel := context.WithTimeout(context.Background(), bootLimit)
					times, err := bootToLogin(ctx, vm, board, "bench", configured)
					cancel()
					vm.Stop()
					if err != nil {
						b.Fatalf("%v\nserial console:\n%s", err, vm.Log())
					}
					if configured {
						login += times.Login
						b.Logf("%s: %s", board.Name, times)
					}
				}
				os.Remove(card)
			}
			b.ReportMetric(login.Seconds()/float64(b.N), "login_s")
		})
	}
}

// BenchmarkBootQEMU boots the qemu board's image twice per iteration on
// one fresh card: first as a user's first boot (the console asks for the
// admin password, which the benchmark types), then again, as every later
// boot is, with the password on the card. login_s is the time from qemu's
// start to the login prompt of that second, ordinary boot; first_prompt_s
// is when the first boot asked for the password, first_login_s when it
// showed the login prompt after the password was set (argon2id and a
// commit to the card included, the typing not).
func BenchmarkBootQEMU(b *testing.B) {
	root := requireBuildHost(b)
	board, err := boards.Lookup("qemu")
	if err != nil {
		b.Fatal(err)
	}
	out := b.TempDir()
	bl := &Builder{RepoRoot: root, OutDir: out, CacheDir: filepath.Join(root, "out", "cache")}
	rep, err := bl.Build(context.Background(), board, "bench")
	if err != nil {
		b.Fatal(err)
	}
	boot := func(card string, configured bool) bootTimes {
		vm, err := StartVM(QEMUConfig{Board: board, Image: card, NoReboot: true}, bootLimit)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), bootLimit)
		times, err := bootToLogin(ctx, vm, board, "bench", configured)
		cancel()
		vm.Stop()
		if err != nil {
			b.Fatalf("%v\nserial console:\n%s", err, vm.Log())
		}
		return times
	}
	var first, again bootTimes
	for i := 0; i < b.N; i++ {
		card := filepath.Join(out, "card.img")
		if err := CopyCard(rep.Image, card); err != nil {
			b.Fatal(err)
		}
		f := boot(card, false)
		a := boot(card, true)
		b.Logf("first boot %d: %s", i+1, f)
		b.Logf("boot %d again: %s", i+1, a)
		first.FirstBoot += f.FirstBoot
		first.Login += f.Login
		again.Login += a.Login
	}
	n := float64(b.N)
	b.ReportMetric(again.Login.Seconds()/n, "login_s")
	b.ReportMetric(first.FirstBoot.Seconds()/n, "first_prompt_s")
	b.ReportMetric(first.Login.Seconds()/n, "first_login_s")
}
