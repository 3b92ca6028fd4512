package images

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/kernel"
)

// Kernel is a flashgate kernel built from the pinned Debian source package
// for one board, as the kernel cache holds it.
type Kernel struct {
	Board   string       // the board it was configured for
	Class   kernel.Class // CPU class: the build tree it came from
	Key     string       // cache key: source version, class, fragments, compiler
	Package string       // "linux-source-6.1 6.1.192-3", what it was built from
	Release string       // uname -r: "6.1.192-3-flashgate"
	Root    string       // this build's directory in the cache
	Vmlinuz string       // the bzImage
	// Modules is true when the board has loadable modules (optional
	// cards such as hifn_795x), installed under Root/lib/modules/Release.
	Modules bool
	// Built is true when this call compiled it; false when it came from
	// the cache as it was.
	Built     bool
	BuildTime time.Duration
	// SameAs names the board whose cached kernel this one is a copy of,
	// built from the same configuration; "" when it was compiled.
	SameAs string
	// configSum is configSum of the .config it was built from.
	configSum string
}

// ModulesDir is the kernel's lib/modules/<release> directory.
func (k *Kernel) ModulesDir() string {
	return filepath.Join(k.Root, "lib", "modules", k.Release)
}

// KernelBuild fetches the pinned kernel source and builds a board's kernel
// from it, once per input: a kernel is rebuilt only when the source
// version, a configuration fragment or the compiler changes. Boards of one
// CPU class share one build tree, so moving between them recompiles only
// the drivers that differ (kbuild tracks each object's CONFIG_ symbols).
type KernelBuild struct {
	// CacheDir holds the source, the build trees and the built kernels;
	// DefaultKernelCache when empty. It is meant to outlive a checkout.
	CacheDir string
	AptOpts  []string // extra "-o Key=Value" settings for apt-get and apt-cache
	Jobs     int      // make -j; NumCPU+1 when 0
	Log      io.Writer
}

// DefaultKernelCache is $FLASHGATE_KERNEL_CACHE, else flashgate/kernel in
// the user's cache directory (/root/.cache/flashgate/kernel as root), so
// that a fresh clone of the tree reuses the kernels built before.
func DefaultKernelCache() string {
	if d := os.Getenv("FLASHGATE_KERNEL_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "flashgate", "kernel")
	}
	return filepath.Join(os.TempDir(), "flashgate-kernel-cache")
}

// kernelBuilderRevision changes when the way a kernel is built changes in a
// way the fragments do not show, so cached kernels are built anew.
const kernelBuilderRevision = "1"

func (s *KernelBuild) cacheDir() string {
	if s.CacheDir != "" {
		return s.CacheDir
	}
	return DefaultKernelCache()
}

func (s *KernelBuild) logf(format string, args ...any) {
	if s.Log != nil {
		fmt.Fprintf(s.Log, format+"\n", args...)
	}
}

func (s *KernelBuild) aptArgs(args ...string) []string {
	var out []string
	for _, o := range s.AptOpts {
		out = append(out, "-o", o)
	}
	return append(out, args...)
}

// Build returns the kernel of board, from the cache when its inputs are
// unchanged, else built now. Concurrent builds (two test packages) are
// serialised per class by a lock file.
func (s *KernelBuild) Build(ctx context.Context, board boards.Board) (*Kernel, error) {
	frags, err := kernel.Fragments(board.KernelClass, board.Name)
	if err != nil {
		return nil, fmt.Errorf("board %s: %w", board.Name, err)
	}
	want, err := kernel.ParseSettings(frags...)
	if err != nil {
		return nil, err
	}
	arch, err := board.KernelClass.Arch()
	if err != nil {
		return nil, err
	}
	cc, err := compilerVersion(ctx)
	if err != nil {
		return nil, err
	}
	key := kernel.Key(board.KernelClass, frags, cc, kernelBuilderRevision)
	k := &Kernel{Board: board.Name, Class: board.KernelClass, Key: key,
		Package: kernel.SourcePackage + " " + kernel.SourceVersion,
		Root:    filepath.Join(s.cacheDir(), "built", board.Name+"-"+key)}
	if s.load(k) {
		return k, nil
	}
	// While another process holds the class's lock, look for this kernel
	// in the cache at every try: `flashgate kernels` builds a class's
	// boards one after the other, taking the lock again at once for the
	// next, and a test waiting for a kernel it built before would
	// otherwise wait for the whole class (it did, 25 minutes, in a cold
	// make test).
	unlock, err := lockFile(ctx, filepath.Join(s.cacheDir(), "build-"+string(board.KernelClass)+".lock"), func() bool { return s.load(k) })
	if err != nil {
		return nil, err
	}
	if unlock == nil { // another process built it while we waited
		return k, nil
	}
	defer unlock()
	if s.load(k) {
		return k, nil
	}
	src, err := s.source(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	tree := filepath.Join(s.cacheDir(), "tree", string(board.KernelClass)+"-"+kernel.SourceVersion)
	if err := os.MkdirAll(tree, 0o755); err != nil {
		return nil, fmt.Errorf("kernel cache: %w", err)
	}
	logPath := filepath.Join(tree, "build-"+board.Name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("kernel cache: %w", err)
	}
	defer logFile.Close()
	// A tree that never finished a build compiles every file, and not one
	// of them can be in ccache (the cache is only ever filled from this
	// tree's own builds): ccache would hash each source and header list
	// and store each object for nothing, 11 % more time on the first build
	// of a class (see ccacheCC). It stays the compiler on the command line
	// (kbuild recompiles any object whose command changes) but steps
	// aside; the boards built in the tree afterwards fill it.
	_, err = os.Stat(filepath.Join(tree, "vmlinux"))
	firstBuild := errors.Is(err, fs.ErrNotExist)
	mk := func(args ...string) error {
		what := args[len(args)-1]
		args = append([]string{"-C", src, "O=" + tree, "ARCH=" + arch}, args...)
		if cc := ccacheCC(); cc != "" {
			args = append(args, "CC="+cc)
		}
		cmd := exec.CommandContext(ctx, "make", args...)
		cmd.Env = append(os.Environ(), "KBUILD_BUILD_USER=flashgate", "KBUILD_BUILD_HOST=flashgate",
			"KBUILD_BUILD_TIMESTAMP="+kernelTimestamp(), "CCACHE_DIR="+filepath.Join(s.cacheDir(), "ccache"),
			"CCACHE_BASEDIR="+s.cacheDir(), "CCACHE_DEPEND=1", "LC_ALL=C")
		if firstBuild {
			cmd.Env = append(cmd.Env, "CCACHE_DISABLE=1")
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		// make and its children in a group of their own, killed together
		// when ctx ends: a sub-make left running would go on writing into
		// the tree under the next build.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		fmt.Fprintf(logFile, "+ make %s\n", strings.Join(args, " "))
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("make %s for %s: %w (log: %s)\n%s", what, board.Name, err, logPath, tailFile(logPath, 25))
		}
		return nil
	}
	s.logf("kernel for %s: configuring %s (%s) from %s", board.Name, arch, board.KernelClass, k.Package)
	if err := mk("tinyconfig"); err != nil {
		return nil, err
	}
	if err := appendFragments(filepath.Join(tree, ".config"), frags); err != nil {
		return nil, err
	}
	if err := mk("olddefconfig"); err != nil {
		return nil, err
	}
	dot, err := os.ReadFile(filepath.Join(tree, ".config"))
	if err != nil {
		return nil, err
	}
	got, err := kernel.ParseSettings(kernel.Fragment{Name: ".config", Text: dot})
	if err != nil {
		return nil, err
	}
	if miss := want.Missing(got); len(miss) > 0 {
		return nil, fmt.Errorf("kernel config of %s: kconfig did not keep %d setting(s) of the fragments:\n  %s",
			board.Name, len(miss), strings.Join(miss, "\n  "))
	}
	k.Modules = slices.Contains(slices.Collect(maps.Values(got)), "m")
	configSum := configSum(dot)
	if from := s.builtFromConfig(configSum); from != nil {
		// Another board's kernel was built from this very configuration
		// (alix2d13 and alix3d carry the same drivers): its bytes are
		// what make would produce, so take them instead of walking the
		// tree and linking again (20-30 s a board on the 2-core build
		// machine of December 2026, with nothing to compile).
		if err := s.reuse(k, from, dot, configSum, start); err != nil {
			return nil, err
		}
		s.logf("kernel for %s: %s is the kernel of %s (same configuration)", board.Name, k.Release, k.SameAs)
		return k, nil
	}
	how := "building"
	if firstBuild {
		how = "building the class's tree from scratch, ccache aside"
	}
	s.logf("kernel for %s: %s (log: %s)", board.Name, how, logPath)
	targets := []string{"bzImage"}
	if k.Modules {
		targets = append(targets, "modules")
	}
	if err := mk(append([]string{fmt.Sprintf("-j%d", s.jobs())}, targets...)...); err != nil {
		return nil, err
	}
	rel, err := exec.CommandContext(ctx, "make", "-s", "-C", src, "O="+tree, "ARCH="+arch, "kernelrelease").Output()
	if err != nil {
		return nil, fmt.Errorf("kernel release of %s: %w", board.Name, err)
	}
	k.Release = strings.TrimSpace(string(rel))
	// Into a temporary directory, then renamed: an interrupted build
	// leaves nothing a later run would trust.
	if err := os.MkdirAll(filepath.Dir(k.Root), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(k.Root), ".new-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if _, err := copyFile(filepath.Join(tree, "arch", "x86", "boot", "bzImage"), filepath.Join(tmp, "vmlinuz")); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "config"), dot, 0o644); err != nil {
		return nil, err
	}
	if k.Modules {
		if err := mk("INSTALL_MOD_PATH="+tmp, "INSTALL_MOD_STRIP=1", "modules_install"); err != nil {
			return nil, err
		}
	}
	k.BuildTime = time.Since(start)
	if err := s.commit(k, tmp, configSum); err != nil {
		return nil, err
	}
	s.logf("kernel for %s: %s built in %s", board.Name, k.Release, k.BuildTime.Round(time.Second))
	return k, nil
}

// commit writes k's metadata into tmp, a complete build directory, and
// renames it to k.Root.
func (s *KernelBuild) commit(k *Kernel, tmp, configSum string) error {
	meta := fmt.Sprintf("release %s\nmodules %t\nbuild_seconds %.1f\nconfig_sha256 %s\n", k.Release, k.Modules, k.BuildTime.Seconds(), configSum)
	if err := os.WriteFile(filepath.Join(tmp, "kernel.meta"), []byte(meta), 0o644); err != nil {
		return err
	}
	os.RemoveAll(k.Root)
	if err := os.Rename(tmp, k.Root); err != nil {
		return fmt.Errorf("kernel cache: %w", err)
	}
	k.Vmlinuz = filepath.Join(k.Root, "vmlinuz")
	k.Built = true
	return nil
}

// configSum names a kernel by what decides its bytes: the merged .config
// (which records the compiler's version), the Debian source version and
// the builder's revision.
func configSum(dot []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s %s\n", kernel.SourcePackage, kernel.SourceVersion, kernelBuilderRevision)
	h.Write(dot)
	return hex.EncodeToString(h.Sum(nil))
}

// builtFromConfig returns the cached kernel built from the configuration
// sum names, loaded, or nil.
func (s *KernelBuild) builtFromConfig(sum string) *Kernel {
	dirs, _ := filepath.Glob(filepath.Join(s.cacheDir(), "built", "*"))
	for _, d := range dirs {
		if strings.HasPrefix(filepath.Base(d), ".") { // a build not yet renamed into place
			continue
		}
		if k := (&Kernel{Root: d}); s.load(k) && k.configSum == sum {
			return k
		}
	}
	return nil
}

// reuse makes k a copy of from, a cached kernel (builtFromConfig's) built
// from the same configuration for another board.
func (s *KernelBuild) reuse(k *Kernel, from *Kernel, dot []byte, sum string, start time.Time) error {
	dir := from.Root
	if err := os.MkdirAll(filepath.Dir(k.Root), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(k.Root), ".new-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := copyFile(from.Vmlinuz, filepath.Join(tmp, "vmlinuz")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "config"), dot, 0o644); err != nil {
		return err
	}
	if from.Modules {
		if err := copyTree(filepath.Join(dir, "lib"), filepath.Join(tmp, "lib")); err != nil {
			return fmt.Errorf("kernel cache: modules of %s: %w", filepath.Base(dir), err)
		}
	}
	k.Release, k.Modules = from.Release, from.Modules
	k.SameAs = filepath.Base(dir)
	if i := strings.LastIndex(k.SameAs, "-"); i > 0 { // <board>-<key>
		k.SameAs = k.SameAs[:i]
	}
	k.BuildTime = time.Since(start)
	return s.commit(k, tmp, sum)
}

// load fills k from the cache and reports whether it was there.
func (s *KernelBuild) load(k *Kernel) bool {
	meta, err := os.ReadFile(filepath.Join(k.Root, "kernel.meta"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(meta), "\n") {
		f, v, _ := strings.Cut(line, " ")
		switch f {
		case "release":
			k.Release = v
		case "modules":
			k.Modules = v == "true"
		case "config_sha256":
			k.configSum = v
		case "build_seconds":
			if secs, err := strconv.ParseFloat(v, 64); err == nil {
				k.BuildTime = time.Duration(secs * float64(time.Second))
			}
		}
	}
	k.Vmlinuz = filepath.Join(k.Root, "vmlinuz")
	_, err = os.Stat(k.Vmlinuz)
	return err == nil && k.Release != ""
}

func (s *KernelBuild) jobs() int {
	if s.Jobs > 0 {
		return s.Jobs
	}
	return runtime.NumCPU() + 1
}

// appendFragments appends the fragments to a .config: kconfig reads the
// file in order and the last setting of a symbol wins, so this is the
// merge that scripts/kconfig/merge_config.sh does.
func appendFragments(dotConfig string, frags []kernel.Fragment) error {
	f, err := os.OpenFile(dotConfig, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("kernel config: %w", err)
	}
	for _, fr := range frags {
		fmt.Fprintf(f, "\n# --- flashgate %s\n", fr.Name)
		for _, line := range strings.Split(string(fr.Text), "\n") {
			if k, ok := strings.CutSuffix(line, "=n"); ok && strings.HasPrefix(k, "CONFIG_") {
				line = "# " + k + " is not set"
			}
			fmt.Fprintln(f, line)
		}
	}
	fmt.Fprintf(f, "CONFIG_LOCALVERSION=%q\n", kernel.LocalVersion())
	return f.Close()
}

// source returns the extracted kernel source tree of the pinned package,
// downloading and unpacking it once.
func (s *KernelBuild) source(ctx context.Context) (string, error) {
	root := filepath.Join(s.cacheDir(), "src", kernel.SourcePackage+"_"+kernel.SourceVersion)
	if _, err := os.Stat(filepath.Join(root, ".flashgate-extracted")); err == nil {
		return root, nil
	}
	// The classes build side by side: one of them unpacks, the other waits.
	unlock, err := lockFile(ctx, filepath.Join(s.cacheDir(), "source.lock"), nil)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(root, ".flashgate-extracted")); err == nil {
		return root, nil
	}
	pkg := kernel.SourcePackage + "=" + kernel.SourceVersion
	out, err := command{}.run(ctx, tool(toolAptCache), s.aptArgs("show", pkg)...)
	if err != nil && os.Geteuid() == 0 {
		s.logf("%s is not in the package lists; running apt-get update", pkg)
		if _, uerr := (command{}).run(ctx, tool(toolAptGet), s.aptArgs("update")...); uerr != nil {
			s.logf("apt-get update reported a problem (checking whether %s resolves anyway): %v", pkg, uerr)
		}
		out, err = command{}.run(ctx, tool(toolAptCache), s.aptArgs("show", pkg)...)
	}
	if err != nil {
		return "", fmt.Errorf("the pinned kernel source %s %s is not in the package lists (run `apt-get update` as root; if Debian dropped that version, set kernel.SourceVersion to one `apt-cache policy %s` lists): %w",
			kernel.SourcePackage, kernel.SourceVersion, kernel.SourcePackage, err)
	}
	rec := parseStanza(out)
	filename, sum := rec["Filename"], rec["SHA256"]
	if filename == "" || sum == "" {
		return "", fmt.Errorf("package record of %s lacks Filename or SHA256", pkg)
	}
	deb := filepath.Join(s.cacheDir(), "debs", path.Base(filename))
	if err := s.download(ctx, pkg, deb, sum); err != nil {
		return "", err
	}
	s.logf("unpacking %s", path.Base(filename))
	tmp, err := os.MkdirTemp(s.cacheDir(), ".src-")
	if err != nil {
		return "", fmt.Errorf("kernel cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	if _, err := (command{}).run(ctx, tool(toolDpkgDeb), "-x", deb, filepath.Join(tmp, "deb")); err != nil {
		return "", fmt.Errorf("extract %s: %w", path.Base(deb), err)
	}
	tarballs, _ := filepath.Glob(filepath.Join(tmp, "deb", "usr", "src", "linux-source-*.tar.xz"))
	if len(tarballs) != 1 {
		return "", fmt.Errorf("%s holds %d source tarballs, want 1", path.Base(deb), len(tarballs))
	}
	if _, err := (command{Dir: tmp}).run(ctx, "tar", "-xJf", tarballs[0]); err != nil {
		return "", fmt.Errorf("unpack %s: %w", filepath.Base(tarballs[0]), err)
	}
	dirs, _ := filepath.Glob(filepath.Join(tmp, "linux-source-*"))
	if len(dirs) != 1 {
		return "", fmt.Errorf("%s unpacked into %d directories, want 1", filepath.Base(tarballs[0]), len(dirs))
	}
	if err := os.WriteFile(filepath.Join(dirs[0], ".flashgate-extracted"), []byte(kernel.SourceVersion+"\n"), 0o644); err != nil {
		return "", err
	}
	os.RemoveAll(root)
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(dirs[0], root); err != nil {
		return "", fmt.Errorf("kernel cache: %w", err)
	}
	os.Remove(deb) // 139 MB the tree now holds
	return root, nil
}

// compilerVersion is part of the cache key: a new gcc may build another
// kernel from the same source.
func compilerVersion(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "gcc", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("building a kernel needs gcc (apt-get install build-essential): %w", err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return line, nil
}

// ccacheCC is "ccache gcc" when ccache is installed: switching a class's
// tree between boards and back then recompiles from the cache. It runs in
// depend mode (CCACHE_DEPEND, set in Build): the kernel's own -MMD output
// names the headers, so a miss costs no extra preprocessor run. Measured on
// 120 files of the i586 tree (net/ipv4, fs/ext4) with an empty cache, -j2:
// plain gcc 64.5 s, ccache's default mode 93.1 s (+44 %), depend mode
// 71.8 s (+11 %), a second depend-mode run 15.6 s (all direct hits). The
// first build of a class on a fresh machine is ~1 500 such files.
func ccacheCC() string {
	if _, err := exec.LookPath("ccache"); err == nil {
		return "ccache gcc"
	}
	return ""
}

// kernelTimestamp is the build date the kernel prints (uname -v), fixed to
// the Unix epoch, as reproducible builds do, so that two builds of one input
// are the same bytes; the release names the source version instead.
func kernelTimestamp() string {
	return time.Unix(0, 0).UTC().Format("Mon Jan 2 15:04:05 UTC 2006")
}

// lockFile takes an exclusive flock on name, waiting for it. While it
// waits it calls ready (when not nil) before each try, and returns a nil
// unlock and no error as soon as ready reports that what the lock's holder
// was making is there.
func lockFile(ctx context.Context, name string, ready func() bool) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kernel cache lock: %w", err)
	}
	for {
		if ready != nil && ready() {
			f.Close()
			return nil, nil
		}
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("kernel cache lock %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the kernel build lock %s: %w", name, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// tailFile returns the last n lines of a file, for an error message.
func tailFile(name string, n int) string {
	b, err := os.ReadFile(name)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// parseStanza parses the first stanza of a Debian control-format record into
// field -> value; continuation lines are joined with "\n".
func parseStanza(out []byte) map[string]string {
	rec := map[string]string{}
	var last string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if len(rec) > 0 {
				break
			}
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if last != "" {
				rec[last] += "\n" + strings.TrimSpace(line)
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			last = ""
			continue
		}
		last = k
		rec[k] = strings.TrimSpace(v)
	}
	return rec
}

// download fetches pkg into deb unless a file with the expected SHA256 is
// already there.
func (s *KernelBuild) download(ctx context.Context, pkg, deb, want string) error {
	if got, err := fileSHA256(deb); err == nil && got == want {
		return nil
	}
	dir := filepath.Dir(deb)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("kernel cache: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, ".download-")
	if err != nil {
		return fmt.Errorf("kernel cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	s.logf("downloading %s", pkg)
	if err := retryTransient(ctx, downloadTries, time.Second, s.logf, func() error {
		_, err := (command{Dir: tmp}).run(ctx, tool(toolAptGet), s.aptArgs("download", pkg)...)
		return err
	}); err != nil {
		return fmt.Errorf("cannot download %s from the Debian package source (is it reachable?): %w", pkg, err)
	}
	got := filepath.Join(tmp, filepath.Base(deb))
	sum, err := fileSHA256(got)
	if err != nil {
		return fmt.Errorf("apt-get download %s: %w", pkg, err)
	}
	if sum != want {
		return fmt.Errorf("apt-get download %s: SHA256 %s, the package lists say %s", pkg, sum, want)
	}
	return os.Rename(got, deb)
}

// downloadTries is how often a kernel download is tried. A mirror's name
// that fails to resolve for a moment, or a connection reset, should not
// fail a whole image build (seen in CI: "Temporary failure resolving
// 'deb.debian.org'"); an unreachable source still fails within seconds.
const downloadTries = 4

// retryTransient calls f up to tries times, waiting first, then twice as
// long after each failure, and returns the last error.
func retryTransient(ctx context.Context, tries int, first time.Duration, logf func(string, ...any), f func() error) error {
	wait := first
	var err error
	for i := 1; ; i++ {
		if err = f(); err == nil || i == tries {
			return err
		}
		logf("try %d of %d failed (%v); again in %s", i, tries, err, wait)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		wait *= 2
	}
}

func fileSHA256(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
