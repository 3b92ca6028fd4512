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
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Kernel is a Debian kernel package extracted into the cache, with
// modules.dep generated for its full module tree.
type Kernel struct {
	Metapackage string // what was resolved: "linux-image-686:i386"
	Package     string // the ABI package it named: "linux-image-6.1.0-50-686:i386"
	Version     string // Debian version of Package: "6.1.176-1"
	Release     string // uname -r, the directory under lib/modules: "6.1.0-50-686"
	Root        string // extracted package tree
	Vmlinuz     string // path of the kernel image in Root
}

// ModulesDir is the kernel's lib/modules/<release> directory.
func (k *Kernel) ModulesDir() string {
	return filepath.Join(k.Root, "lib", "modules", k.Release)
}

// KernelSource resolves and fetches kernel packages with apt. The zero value
// uses the host's apt configuration.
type KernelSource struct {
	CacheDir string   // downloaded .deb files and extracted trees live here
	AptOpts  []string // extra "-o Key=Value" settings for apt-get and apt-cache
	Log      io.Writer
}

// metapackage returns the Debian metapackage that always depends on the
// current kernel ABI package of flavour.
func metapackage(flavour string) (name, arch string, err error) {
	switch flavour {
	case "686", "686-pae":
		return "linux-image-" + flavour + ":i386", "i386", nil
	case "amd64":
		return "linux-image-amd64:amd64", "amd64", nil
	}
	return "", "", fmt.Errorf("kernel flavour %q: flashgate knows how to fetch 686, 686-pae and amd64", flavour)
}

// Fetch resolves the kernel of flavour through its metapackage, downloads the
// package into the cache (once: a cached file is checked against the
// archive's SHA256) and extracts it.
func (s *KernelSource) Fetch(ctx context.Context, flavour string) (*Kernel, error) {
	meta, arch, err := metapackage(flavour)
	if err != nil {
		return nil, err
	}
	pkg, err := s.resolve(ctx, meta, arch)
	if err != nil {
		return nil, err
	}
	out, err := command{}.run(ctx, tool(toolAptCache), s.aptArgs("show", "--no-all-versions", pkg)...)
	if err != nil {
		return nil, fmt.Errorf("read package record of %s: %w", pkg, err)
	}
	rec := parseStanza(out)
	filename, sum, version := rec["Filename"], rec["SHA256"], rec["Version"]
	if filename == "" || sum == "" || version == "" {
		return nil, fmt.Errorf("package record of %s lacks Filename, SHA256 or Version", pkg)
	}
	deb := filepath.Join(s.CacheDir, "debs", path.Base(filename))
	if err := s.download(ctx, pkg, deb, sum); err != nil {
		return nil, err
	}
	k := &Kernel{Metapackage: meta, Package: pkg, Version: version}
	k.Root = filepath.Join(s.CacheDir, "kernels", strings.TrimSuffix(path.Base(filename), ".deb"))
	if err := s.extract(ctx, deb, k.Root); err != nil {
		return nil, err
	}
	rels, err := os.ReadDir(filepath.Join(k.Root, "lib", "modules"))
	if err != nil || len(rels) != 1 {
		return nil, fmt.Errorf("%s: expected exactly one lib/modules/<release> directory in %s", pkg, k.Root)
	}
	k.Release = rels[0].Name()
	k.Vmlinuz = filepath.Join(k.Root, "boot", "vmlinuz-"+k.Release)
	if _, err := os.Stat(k.Vmlinuz); err != nil {
		return nil, fmt.Errorf("%s has no kernel image: %w", pkg, err)
	}
	// Debian does not ship modules.dep: it is generated at install time.
	if _, err := os.Stat(filepath.Join(k.ModulesDir(), "modules.dep")); err != nil {
		if _, err := (command{}).run(ctx, tool(toolDepmod), "-b", k.Root, k.Release); err != nil {
			return nil, fmt.Errorf("generate modules.dep for %s: %w", k.Release, err)
		}
	}
	return k, nil
}

func (s *KernelSource) aptArgs(args ...string) []string {
	var out []string
	for _, o := range s.AptOpts {
		out = append(out, "-o", o)
	}
	return append(out, args...)
}

func (s *KernelSource) logf(format string, args ...any) {
	if s.Log != nil {
		fmt.Fprintf(s.Log, format+"\n", args...)
	}
}

// resolve names the ABI package meta depends on. When the package lists do
// not know meta, it says what to run: add the architecture, or update the
// lists (which it does itself when it is root).
func (s *KernelSource) resolve(ctx context.Context, meta, arch string) (string, error) {
	if pkg, err := s.dependsOf(ctx, meta); err == nil {
		return pkg, nil
	}
	if arch == "i386" && runtime.GOARCH != "386" {
		out, err := command{}.run(ctx, tool(toolDpkg), "--print-foreign-architectures")
		if err == nil && !containsLine(out, "i386") {
			return "", fmt.Errorf("the %s kernel package needs the i386 architecture in dpkg: run `dpkg --add-architecture i386 && apt-get update` as root", meta)
		}
	}
	if os.Geteuid() == 0 {
		s.logf("%s is not in the package lists; running apt-get update", meta)
		// apt-get update exits 100 when any index fails, and Debian's
		// i386 security index is often mid-sync. What matters is whether
		// meta resolves afterwards, so the exit status is only logged.
		if _, err := (command{}).run(ctx, tool(toolAptGet), s.aptArgs("update")...); err != nil {
			s.logf("apt-get update reported a problem (checking whether %s resolves anyway): %v", meta, err)
		}
		if pkg, err := s.dependsOf(ctx, meta); err == nil {
			return pkg, nil
		}
		return "", fmt.Errorf("cannot resolve %s even after apt-get update: the Debian package source is unreachable or does not carry it (check /etc/apt/sources.list*)", meta)
	}
	return "", fmt.Errorf("%s is not in the package lists: run `apt-get update` as root (and check that the Debian package source is reachable)", meta)
}

func (s *KernelSource) dependsOf(ctx context.Context, meta string) (string, error) {
	out, err := command{}.run(ctx, tool(toolAptCache), s.aptArgs("depends", meta)...)
	if err != nil {
		return "", err
	}
	pkg := parseKernelDepends(out)
	if pkg == "" {
		return "", fmt.Errorf("%s depends on no linux-image package", meta)
	}
	return pkg, nil
}

// parseKernelDepends returns the linux-image package named by a "Depends:"
// line of `apt-cache depends` output, or "".
func parseKernelDepends(out []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		// Alternatives are printed as "|Depends: x"; the first
		// alternative is what apt would install.
		line = strings.TrimPrefix(line, "|")
		dep, ok := strings.CutPrefix(line, "Depends:")
		if !ok {
			continue
		}
		dep = strings.TrimSpace(dep)
		if strings.HasPrefix(dep, "linux-image-") && !strings.ContainsAny(dep, " <>()") {
			return dep
		}
	}
	return ""
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
func (s *KernelSource) download(ctx context.Context, pkg, deb, want string) error {
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

// extract unpacks deb into root unless it is there already. It extracts into
// a temporary directory first so that an interrupted run leaves no
// half-extracted tree that a later run would trust.
func (s *KernelSource) extract(ctx context.Context, deb, root string) error {
	if _, err := os.Stat(root); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		return fmt.Errorf("kernel cache: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(root), ".extract-")
	if err != nil {
		return fmt.Errorf("kernel cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	if _, err := (command{}).run(ctx, tool(toolDpkgDeb), "-x", deb, tmp); err != nil {
		return fmt.Errorf("extract %s: %w", filepath.Base(deb), err)
	}
	if err := os.Rename(tmp, root); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("kernel cache: %w", err)
	}
	return nil
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

func containsLine(out []byte, want string) bool {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) == want {
			return true
		}
	}
	return false
}
