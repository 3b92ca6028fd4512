package images

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/kernel"
)

// The tests in this file and boot_test.go build real images: they need the
// host tools, and build kernels from Debian's kernel source package (cached
// in the kernel cache, shared with `make image` and other checkouts). They fail, saying what to install, when a tool is
// missing; -short skips them.

func requireBuildHost(t testing.TB) (repoRoot string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test builds images from Debian's kernel packages")
	}
	if err := CheckBuildTools(); err != nil {
		t.Fatalf("cannot build images on this host: %v", err)
	}
	root, err := FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// testVersion is the version built into test images: the Makefile passes
// its own through FLASHGATE_VERSION.
func testVersion() string {
	if v := os.Getenv("FLASHGATE_VERSION"); v != "" && versionPattern.MatchString(v) {
		return v
	}
	return "test"
}

// testKernel builds (or finds in the kernel cache) the kernel of a board.
func testKernel(t *testing.T, board string) *Kernel {
	t.Helper()
	b, err := boards.Lookup(board)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	k, err := (&KernelBuild{}).Build(ctx, b)
	if err != nil {
		t.Fatalf("kernel of %s: %v", board, err)
	}
	return k
}

// TestBoardKernels checks the kernels the images carry, as built: the
// crypto engines' drivers are built into the boards that have them, the
// optional Hifn card stays a module with its file, and the net4801's
// kernel assumes no CMOV.
func TestBoardKernels(t *testing.T) {
	requireBuildHost(t)
	for _, tc := range []struct {
		board string
		want  []string // CONFIG_X=v lines of the built .config
	}{
		{"qemu", []string{"CONFIG_ATA_PIIX=y", "CONFIG_E1000=y", "CONFIG_I6300ESB_WDT=y", "CONFIG_XFRM_INTERFACE=y", "CONFIG_INET_ESP=y", "CONFIG_NF_TABLES=y"}},
		{"alix2d13", []string{"CONFIG_CRYPTO_DEV_GEODE=y", "CONFIG_GEODE_WDT=y", "CONFIG_VIA_RHINE=y", "CONFIG_PATA_CS5536=y", "CONFIG_HW_RANDOM_GEODE=y"}},
		{"net4801", []string{"CONFIG_M586MMX=y", "CONFIG_CRYPTO_DEV_HIFN_795X=m", "CONFIG_NATSEMI=y", "CONFIG_PATA_SC1200=y", "CONFIG_SCx200_WDT=y"}},
		{"epia-c7", []string{"CONFIG_CRYPTO_DEV_PADLOCK_AES=y", "CONFIG_CRYPTO_DEV_PADLOCK_SHA=y", "CONFIG_HW_RANDOM_VIA=y"}},
		{"apu2", []string{"CONFIG_CRYPTO_AES_NI_INTEL=y", "CONFIG_IGB=y", "CONFIG_SP5100_TCO=y"}},
	} {
		t.Run(tc.board, func(t *testing.T) {
			k := testKernel(t, tc.board)
			dot, err := os.ReadFile(filepath.Join(k.Root, "config"))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(string(dot), "\n")
			for _, w := range tc.want {
				if !slices.Contains(lines, w) {
					t.Errorf("%s kernel (%s): .config lacks %s", tc.board, k.Release, w)
				}
			}
			if tc.board == "net4801" {
				if slices.Contains(lines, "CONFIG_X86_CMOV=y") {
					t.Error("the net4801 kernel assumes CMOV, which the Geode GX1 lacks")
				}
				c, err := k.Closure(context.Background(), []string{"hifn_795x"})
				if err != nil || !c.Has("hifn_795x") {
					t.Errorf("hifn_795x module of the net4801 kernel: %v", err)
				}
				_, err = k.Closure(context.Background(), []string{"no_such_flashgate_module"})
				if err == nil || !strings.Contains(err.Error(), "no_such_flashgate_module is not in kernel "+k.Release) {
					t.Errorf("closure with a missing module: %v; want it named", err)
				}
			}
			if !strings.HasSuffix(k.Release, kernel.LocalVersion()) {
				t.Errorf("kernel release %q does not name the Debian version (%s)", k.Release, kernel.LocalVersion())
			}
		})
	}
}

// TestUnreachablePackageSource points apt at a proxy on a closed loopback
// port: fetching the kernel source into an empty cache must fail with a
// sentence saying so, and leave no package in the cache.
func TestUnreachablePackageSource(t *testing.T) {
	requireBuildHost(t)
	deadProxy := []string{"Acquire::http::Proxy=http://127.0.0.1:9", "Acquire::https::Proxy=http://127.0.0.1:9", "Acquire::Retries=0"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cache := t.TempDir()
	src := &KernelBuild{CacheDir: cache, AptOpts: deadProxy}
	_, err := src.source(ctx)
	if err == nil || !strings.Contains(err.Error(), "cannot download "+kernel.SourcePackage) || !strings.Contains(err.Error(), "Debian package source") {
		t.Fatalf("fetching the kernel source through a dead proxy: %v; want \"cannot download ... from the Debian package source\"", err)
	}
	debs, _ := filepath.Glob(filepath.Join(cache, "debs", "*.deb"))
	if len(debs) > 0 {
		t.Errorf("a failed download left %v in the cache", debs)
	}
}

// TestImageReproducible builds the qemu image twice, from two copies of the
// source tree at different paths, and compares the bytes.
func TestImageReproducible(t *testing.T) {
	root := requireBuildHost(t)
	board, err := boards.Lookup("qemu")
	if err != nil {
		t.Fatal(err)
	}
	epoch := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	// Two copies of the tree taken at one moment (it may be edited while
	// the test runs) at different paths, which shows that no path leaks
	// into the image.
	srcs := [2]string{filepath.Join(t.TempDir(), "src"), filepath.Join(t.TempDir(), "source-copy")}
	copySourceTree(t, root, srcs[0])
	copySourceTree(t, srcs[0], srcs[1])
	var sums [2]string
	for i, src := range srcs {
		out := t.TempDir()
		b := &Builder{RepoRoot: src, OutDir: out, CacheDir: filepath.Join(root, "out", "cache"), Epoch: epoch}
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute) // with the kernel's first build, if it is not cached
		rep, err := b.Build(ctx, board, "repro")
		cancel()
		if err != nil {
			t.Fatalf("build %d: %v", i+1, err)
		}
		if sums[i], err = fileSHA256(rep.Image); err != nil {
			t.Fatal(err)
		}
	}
	if sums[0] != sums[1] {
		t.Errorf("two builds of the same source gave different images: sha256 %s and %s", sums[0], sums[1])
	}
}

// copySourceTree copies the source tree at src, without out/ and .git, to
// dst.
func copySourceTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() && (rel == "out" || rel == ".git") {
			return filepath.SkipDir
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		_, err = copyFile(p, filepath.Join(dst, rel))
		return err
	})
	if err != nil {
		t.Fatalf("copy the source tree: %v", err)
	}
}
