package images

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
)

// The tests in this file and boot_test.go build real images: they need the
// host tools and the Debian kernel packages (cached in out/cache, shared
// with `make image`). They fail, saying what to install, when a tool is
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

var kernels struct {
	sync.Mutex
	byFlavour map[string]*Kernel
}

// testKernel fetches (or finds in out/cache) the kernel of flavour.
func testKernel(t *testing.T, root, flavour string) *Kernel {
	t.Helper()
	kernels.Lock()
	defer kernels.Unlock()
	if k := kernels.byFlavour[flavour]; k != nil {
		return k
	}
	src := &KernelSource{CacheDir: filepath.Join(root, "out", "cache")}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	k, err := src.Fetch(ctx, flavour)
	if err != nil {
		t.Fatalf("fetch the %s kernel: %v", flavour, err)
	}
	if kernels.byFlavour == nil {
		kernels.byFlavour = map[string]*Kernel{}
	}
	kernels.byFlavour[flavour] = k
	return k
}

// TestBoardModules checks the module lists the images carry: every module
// of every supported board exists in its kernel, and the crypto engine,
// watchdog, NIC and disk drivers of the Geode and VIA boards are there.
func TestBoardModules(t *testing.T) {
	root := requireBuildHost(t)
	want := map[string][]string{
		"alix2d13": {"geode-aes", "geodewdt", "via-rhine", "pata_cs5536"},
		"net5501":  {"geode-aes", "geodewdt", "via-rhine", "pata_cs5536"},
		"epia-c3":  {"padlock-aes", "via-rhine"},
		"qemu":     {"ata_piix", "e1000", "i6300esb"},
	}
	for _, b := range boards.All() {
		if b.Unsupported != "" {
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			k := testKernel(t, root, b.KernelFlavour)
			c, err := k.Closure(context.Background(), b.AllModules())
			if err != nil {
				t.Fatalf("module closure of %s in %s: %v", b.Name, k.Release, err)
			}
			for _, m := range want[b.Name] {
				if !c.Has(m) {
					t.Errorf("%s image lacks module %s", b.Name, m)
				}
			}
			t.Logf("%s: %d module files for %d requested modules (%d built in)", b.Name, len(c.Modules), len(b.AllModules()), len(c.Builtin))
		})
	}
}

// TestMissingModuleIsNamed checks that a board asking for a module its
// kernel lacks is refused with the module's name.
func TestMissingModuleIsNamed(t *testing.T) {
	root := requireBuildHost(t)
	k := testKernel(t, root, "686")
	_, err := k.Closure(context.Background(), []string{"via-rhine", "no_such_flashgate_module"})
	if err == nil || !strings.Contains(err.Error(), "no_such_flashgate_module is not in kernel "+k.Release) {
		t.Errorf("closure with a missing module: %v; want it named", err)
	}
}

// TestUnreachablePackageSource points apt at a proxy on a closed loopback
// port: the download must fail with a sentence saying so, and leave no
// package in the cache; a kernel already in the cache is used without
// the network.
func TestUnreachablePackageSource(t *testing.T) {
	root := requireBuildHost(t)
	deadProxy := []string{"Acquire::http::Proxy=http://127.0.0.1:9", "Acquire::https::Proxy=http://127.0.0.1:9", "Acquire::Retries=0"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cached := testKernel(t, root, "686")
	offline := &KernelSource{CacheDir: filepath.Join(root, "out", "cache"), AptOpts: deadProxy}
	if k, err := offline.Fetch(ctx, "686"); err != nil || k.Vmlinuz != cached.Vmlinuz {
		t.Errorf("Fetch of a cached kernel without the network: %v, %+v", err, k)
	}

	cache := t.TempDir()
	src := &KernelSource{CacheDir: cache, AptOpts: deadProxy}
	_, err := src.Fetch(ctx, "686")
	if err == nil || !strings.Contains(err.Error(), "cannot download linux-image-") || !strings.Contains(err.Error(), "Debian package source") {
		t.Fatalf("Fetch through a dead proxy: %v; want \"cannot download ... from the Debian package source\"", err)
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
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
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
