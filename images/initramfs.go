package images

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// FirmwarePackage is the appliance's multi-call binary. On the box it is
// /bbin/flashgate in the u-root busybox.
const FirmwarePackage = "github.com/flashgate/flashgate/firmware/flashgate"

// InitPackage is PID 1, built as a binary of its own (see firmware/init for
// why) and placed at InitPath; /init links to it.
const (
	InitPackage = "github.com/flashgate/flashgate/firmware/init"
	InitPath    = "bin/init"
)

// ExpertCommands are the u-root core commands shipped for the expert shell:
// enough to look around, move files and poke at the network, nothing more.
// gosh is built with the goshsmall tag (no line-editor dependencies).
// The busybox is built with BuildTags.
var ExpertCommands = []string{
	"gosh", "ls", "cat", "cp", "mv", "rm", "mkdir", "dmesg", "ps", "kill",
	"mount", "umount", "ip", "ping", "free", "df", "uname",
}

// BuildTags are the Go build tags of the busybox: goshsmall (above), and
// nethttpomithttp2, which leaves HTTP/2 out of net/http (the web UI
// offers HTTP/1.1 only, webui.TLSConfig; the local APIs speak HTTP/1.1 on
// unix sockets): about 300 KB less binary for every process to map.
var BuildTags = []string{"goshsmall", "nethttpomithttp2"}

const urootModule = "github.com/u-root/u-root"

// Initramfs describes an initramfs to build.
type Initramfs struct {
	RepoRoot   string // the flashgate module, whose go.mod pins u-root
	CacheDir   string // the u-root tool is built here once per version
	GOARCH     string
	GO386      string
	ModulesDir string // a directory holding lib/modules/<release>/, or ""
	Log        func(format string, args ...any)

	// InitBytes is set by Build: the size of PID 1's binary.
	InitBytes int64
}

// built remembers, for the life of this process, the initramfs built for
// each target (GOARCH, GO386 and the module files): the u-root busybox of
// one target is the same bytes for every board (the version is appended
// by the caller), and compiling it takes minutes on a 2-core machine, so
// the tests that build a card for every board build it once per target.
var built struct {
	sync.Mutex
	byKey map[string]builtInitramfs
}

type builtInitramfs struct {
	path                      string // a copy kept under the cache
	compressed, cpio, initBin int64
}

// Build writes the compressed initramfs to out and returns its size and the
// size of the uncompressed cpio archive.
func (r *Initramfs) Build(ctx context.Context, out string) (compressedBytes, cpioBytes int64, err error) {
	key, err := r.memoKey()
	if err != nil {
		return 0, 0, err
	}
	built.Lock()
	defer built.Unlock()
	if b, ok := built.byKey[key]; ok {
		if _, err := copyFile(b.path, out); err == nil {
			r.InitBytes = b.initBin
			r.logf("the initramfs for GOARCH=%s %s was built by this process already: reused", r.GOARCH, r.GO386)
			return b.compressed, b.cpio, nil
		}
	}
	compressedBytes, cpioBytes, err = r.build(ctx, out)
	if err != nil {
		return 0, 0, err
	}
	dir := filepath.Join(r.CacheDir, "initramfs", strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err == nil {
		keep := filepath.Join(dir, fmt.Sprintf("%x.img", sha256.Sum256([]byte(key))))
		if _, err := copyFile(out, keep); err == nil {
			if built.byKey == nil {
				built.byKey = map[string]builtInitramfs{}
				removeStaleInitramfs(filepath.Dir(dir))
			}
			built.byKey[key] = builtInitramfs{path: keep, compressed: compressedBytes, cpio: cpioBytes, initBin: r.InitBytes}
		}
	}
	return compressedBytes, cpioBytes, nil
}

// memoKey names what the initramfs is built from besides the source tree,
// which does not change under a running process.
func (r *Initramfs) memoKey() (string, error) {
	key := r.RepoRoot + "\x00" + r.GOARCH + "\x00" + r.GO386
	if r.ModulesDir == "" {
		return key, nil
	}
	h := sha256.New()
	err := filepath.WalkDir(r.ModulesDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r.ModulesDir, p)
		fmt.Fprintf(h, "%s %d\n", rel, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("initramfs modules: %w", err)
	}
	return fmt.Sprintf("%s\x00%x", key, h.Sum(nil)), nil
}

// removeStaleInitramfs removes the kept copies of processes that have
// ended.
func removeStaleInitramfs(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == nil {
			continue
		}
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

func (r *Initramfs) build(ctx context.Context, out string) (compressedBytes, cpioBytes int64, err error) {
	if err := r.checkFirmwareSource(); err != nil {
		return 0, 0, err
	}
	urootBin, err := r.urootTool(ctx)
	if err != nil {
		return 0, 0, err
	}
	work, err := os.MkdirTemp(filepath.Dir(out), ".initramfs-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(work)
	cpio := filepath.Join(work, "initramfs.cpio")
	env := []string{"GOOS=linux", "GOARCH=" + r.GOARCH, "CGO_ENABLED=0"}
	if r.GO386 != "" {
		env = append(env, "GO386="+r.GO386)
	}
	if r.GOARCH == "amd64" {
		env = append(env, "GOAMD64=v1")
	}
	initBin := filepath.Join(work, "init")
	if err := r.buildInit(ctx, env, initBin); err != nil {
		return 0, 0, err
	}
	if fi, err := os.Stat(initBin); err == nil {
		r.InitBytes = fi.Size()
	}
	args := []string{
		"-build=bb",
		"-format=cpio",
		"-o", cpio,
		"-tmp-dir", work,
		// PID 1 is our own supervising init: no u-root init and no
		// uinit, so nothing ever loops a shell on the console.
		"-initcmd=/" + InitPath,
		"-uinitcmd=",
		"-defaultsh=gosh",
		"-skip-ldd",
		"-files", initBin + ":" + InitPath,
	}
	for _, tag := range BuildTags {
		args = append(args, "-go-build-tags="+tag)
	}
	if r.ModulesDir != "" {
		args = append(args, "-files", filepath.Join(r.ModulesDir, "lib")+":lib")
	}
	args = append(args, FirmwarePackage)
	for _, c := range ExpertCommands {
		args = append(args, urootModule+"/cmds/core/"+c)
	}
	target := "GOARCH=" + r.GOARCH
	if r.GO386 != "" {
		target += " GO386=" + r.GO386
	}
	r.logf("building the u-root busybox (%s) for %s", FirmwarePackage, target)
	if _, err := (command{Dir: r.RepoRoot, Env: env}).run(ctx, urootBin, args...); err != nil {
		var ce *commandError
		if errors.As(err, &ce) {
			if reason := urootFailure(ce.Stderr); reason != "" {
				return 0, 0, fmt.Errorf("build the initramfs with u-root: %s", reason)
			}
		}
		return 0, 0, fmt.Errorf("build the initramfs with u-root: %w", err)
	}
	fi, err := os.Stat(cpio)
	if err != nil {
		return 0, 0, fmt.Errorf("u-root wrote no archive: %w", err)
	}
	if err := compressInitramfs(ctx, cpio, out); err != nil {
		return 0, 0, err
	}
	cfi, err := os.Stat(out)
	if err != nil {
		return 0, 0, err
	}
	return cfi.Size(), fi.Size(), nil
}

// buildInit builds PID 1 (InitPackage) for the board into out. The flags
// make it reproducible (no paths, build ID or VCS stamp) and small: no
// symbol table or DWARF, and no inlining, as u-root builds the busybox
// (the 386 binary 3 145 854 -> 3 027 070 bytes; PID 1 maps its binary
// alone, so those pages are its own memory as well as the card's), except
// in package syscall: its child code between fork and exec calls helpers
// (capToIndex, for the services' ambient capabilities) that must be
// inlined there, and PID 1 died with "stack growth after fork" at its
// first service when they were not.
func (r *Initramfs) buildInit(ctx context.Context, env []string, out string) error {
	r.logf("building PID 1 (%s)", InitPackage)
	_, err := (command{Dir: r.RepoRoot, Env: env}).run(ctx, tool(toolGo), "build",
		"-trimpath", "-buildvcs=false", "-gcflags=all=-l", "-gcflags=syscall=", "-ldflags=-s -w -buildid=", "-o", out, InitPackage)
	if err != nil {
		return fmt.Errorf("build PID 1 (%s): %w", InitPackage, err)
	}
	return nil
}

func (r *Initramfs) logf(format string, args ...any) {
	if r.Log != nil {
		r.Log(format, args...)
	}
}

// urootFailure picks the reason out of u-root's log, which is otherwise
// mostly a Go version warning and temp directory notes.
func urootFailure(stderr string) string {
	const mark = "mkuimage error: "
	i := strings.LastIndex(stderr, mark)
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(stderr[i+len(mark):])
}

// checkFirmwareSource fails early, in plain words, when the appliance's
// main package is not in the tree, rather than deep inside u-root.
func (r *Initramfs) checkFirmwareSource() error {
	dir := filepath.Join(r.RepoRoot, strings.TrimPrefix(FirmwarePackage, "github.com/flashgate/flashgate/"))
	goFiles, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	if len(goFiles) == 0 {
		return fmt.Errorf("the appliance binary %s is missing (no Go files in %s)", FirmwarePackage, dir)
	}
	return nil
}

// urootTool builds the u-root command at the version go.mod requires, so the
// initramfs tooling is pinned with the rest of the dependencies and nothing
// needs installing separately.
func (r *Initramfs) urootTool(ctx context.Context) (string, error) {
	goBin := tool(toolGo)
	out, err := (command{Dir: r.RepoRoot}).run(ctx, goBin, "list", "-m", "-f", "{{.Version}}", urootModule)
	if err != nil {
		return "", fmt.Errorf("find the u-root version in go.mod: %w", err)
	}
	version := strings.TrimSpace(string(out))
	bin := filepath.Join(r.CacheDir, "bin", "u-root-"+version)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	r.logf("building u-root %s", version)
	tmp := bin + ".tmp"
	if _, err := (command{Dir: r.RepoRoot, Env: []string{"GOOS=", "GOARCH=", "CGO_ENABLED=0"}}).run(ctx, goBin, "build", "-o", tmp, urootModule); err != nil {
		return "", fmt.Errorf("build u-root %s: %w", version, err)
	}
	return bin, os.Rename(tmp, bin)
}

// compressInitramfs compresses src into dst with zstd for the kernel's
// initramfs decoder (CONFIG_RD_ZSTD, set in Debian's kernels). zstd -19 is
// about a fifth larger than xz -9e with the x86 filter, but the kernel
// unpacks it several times faster, and the unpacking is on every boot's
// critical path: in qemu the 4.4 MB xz archive took 2.1 s to unpack.
//
// --long=25 lets a match reach back up to 32 MiB instead of level 19's
// 8 MiB: the archive holds two Go binaries (PID 1 and the busybox, ~18 MB
// of cpio together), and PID 1's runtime and libraries repeat code from
// the start of the busybox more than 8 MiB earlier. It made the alix2d13
// initramfs 140 KB smaller (5 662 373 -> 5 522 391 bytes), which is what
// brings that firmware back under its 8 MiB budget. zstd records the
// window as the archive's size when that is smaller than 32 MiB; the
// kernel's decoder (lib/decompress_unzstd.c, window limit 1 GiB on 32-bit)
// vmallocs a buffer of that size while it unpacks and frees it right after,
// 17.5 MiB on a 128 MB board at a moment when nothing else runs.
// --ultra levels (20-22) gained nothing more here (-400 bytes).
// Single-threaded, so the output is the same for the same input.
func compressInitramfs(ctx context.Context, src, dst string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	args := []string{"-19", "--long=25", "--threads=1", "--quiet", "--no-progress", "--stdout", src}
	out, err := command{}.run(ctx, tool(toolZstd), args...)
	if err != nil {
		return fmt.Errorf("compress the initramfs: %w", err)
	}
	if _, err := f.Write(out); err != nil {
		return err
	}
	return f.Close()
}
