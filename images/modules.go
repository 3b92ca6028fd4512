package images

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Module is one module file of a closure.
type Module struct {
	Name string // module name as the kernel knows it: "geode_aes"
	Path string // relative to the kernel's modules directory: "kernel/drivers/crypto/geode-aes.ko"
}

// ModuleClosure is the set of module files a list of requested modules
// needs, in an order in which they can be loaded (dependencies first).
type ModuleClosure struct {
	Requested []string // as given, e.g. board.AllModules()
	Modules   []Module // every file to ship, dependencies before their users
	Builtin   []string // requested modules that are built into the kernel
}

// Has reports whether the closure provides module name (a file or built in).
// Names compare as the kernel compares them: '-' and '_' are the same.
func (c *ModuleClosure) Has(name string) bool {
	n := moduleName(name)
	for _, m := range c.Modules {
		if m.Name == n {
			return true
		}
	}
	for _, b := range c.Builtin {
		if moduleName(b) == n {
			return true
		}
	}
	return false
}

// moduleName normalises a module or file name the way the kernel does.
func moduleName(s string) string {
	s = filepath.Base(s)
	for _, ext := range []string{".xz", ".zst", ".gz", ".ko"} {
		s = strings.TrimSuffix(s, ext)
	}
	return strings.ReplaceAll(s, "-", "_")
}

// ErrNoSuchModule is returned (wrapped) when a requested module is neither a
// module file nor built into the kernel.
var ErrNoSuchModule = errors.New("no such kernel module")

// Closure resolves mods against k with modprobe, which follows the
// dependencies of modules.dep and the softdeps the modules declare
// (crc32c before ext4). The host's /etc/modprobe.d is ignored.
func (k *Kernel) Closure(ctx context.Context, mods []string) (*ModuleClosure, error) {
	c := &ModuleClosure{Requested: mods}
	seen := map[string]bool{}
	for _, mod := range mods {
		out, err := command{}.run(ctx, tool(toolModprobe), "-C", "/dev/null", "-d", k.Root, "-S", k.Release, "--show-depends", mod)
		if err != nil {
			var ce *commandError
			if errors.As(err, &ce) && strings.Contains(ce.Stderr, "not found") {
				return nil, fmt.Errorf("%w: %s is not in kernel %s (%s)", ErrNoSuchModule, mod, k.Release, k.Package)
			}
			return nil, fmt.Errorf("resolve module %s: %w", mod, err)
		}
		steps, err := parseShowDepends(out, k.ModulesDir())
		if err != nil {
			return nil, fmt.Errorf("resolve module %s: %w", mod, err)
		}
		for _, s := range steps {
			if s.Builtin {
				c.Builtin = append(c.Builtin, s.Name)
				continue
			}
			if !seen[s.Path] {
				seen[s.Path] = true
				c.Modules = append(c.Modules, Module{Name: moduleName(s.Path), Path: s.Path})
			}
		}
	}
	return c, nil
}

// showDependsStep is one line of `modprobe --show-depends`.
type showDependsStep struct {
	Builtin bool
	Name    string // for built-in modules
	Path    string // for module files, relative to the modules directory
}

// parseShowDepends parses `modprobe --show-depends` output: lines
// "insmod /abs/path.ko [options]" and "builtin name". Paths must lie under
// modDir; the result holds them relative to it.
func parseShowDepends(out []byte, modDir string) ([]showDependsStep, error) {
	var steps []showDependsStep
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "builtin" && len(f) == 2:
			steps = append(steps, showDependsStep{Builtin: true, Name: f[1]})
		case f[0] == "insmod" && len(f) >= 2:
			rel, err := filepath.Rel(modDir, f[1])
			if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || !strings.HasSuffix(rel, ".ko") && !strings.Contains(rel, ".ko.") {
				return nil, fmt.Errorf("modprobe named %q, which is not a module file under %s", f[1], modDir)
			}
			steps = append(steps, showDependsStep{Path: rel})
		default:
			return nil, fmt.Errorf("unexpected modprobe output line %q", sc.Text())
		}
	}
	if len(steps) == 0 {
		return nil, errors.New("modprobe printed nothing")
	}
	return steps, nil
}

// Stage copies the closure's module files into dir/lib/modules/<release>/
// with a modules.dep generated for exactly these files, as the initramfs
// carries them. It returns the bytes of module files staged.
func (k *Kernel) Stage(ctx context.Context, c *ModuleClosure, dir string) (int64, error) {
	dst := filepath.Join(dir, "lib", "modules", k.Release)
	var total int64
	ship := map[string]bool{}
	for _, m := range c.Modules {
		n, err := copyFile(filepath.Join(k.ModulesDir(), m.Path), filepath.Join(dst, m.Path))
		if err != nil {
			return 0, fmt.Errorf("stage module %s: %w", m.Name, err)
		}
		total += n
		ship[m.Path] = true
	}
	// modules.builtin lets modprobe on the box say "built in" instead of
	// "not found"; modules.order keeps depmod's output in the kernel's order.
	if _, err := copyFile(filepath.Join(k.ModulesDir(), "modules.builtin"), filepath.Join(dst, "modules.builtin")); err != nil {
		return 0, fmt.Errorf("stage modules.builtin: %w", err)
	}
	order, err := os.ReadFile(filepath.Join(k.ModulesDir(), "modules.order"))
	if err != nil {
		return 0, fmt.Errorf("stage modules.order: %w", err)
	}
	var kept bytes.Buffer
	for _, l := range strings.Split(string(order), "\n") {
		if ship[l] {
			kept.WriteString(l + "\n")
		}
	}
	if err := os.WriteFile(filepath.Join(dst, "modules.order"), kept.Bytes(), 0o644); err != nil {
		return 0, err
	}
	if _, err := (command{}).run(ctx, tool(toolDepmod), "-C", "/dev/null", "-b", dir, k.Release); err != nil {
		return 0, fmt.Errorf("depmod for the initramfs: %w", err)
	}
	// The .bin indexes are for kmod; the box reads the text files.
	bins, _ := filepath.Glob(filepath.Join(dst, "modules.*.bin"))
	for _, b := range bins {
		if err := os.Remove(b); err != nil {
			return 0, err
		}
	}
	return total, nil
}

func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// copyTree copies the directory src to dst: directories, regular files and
// symbolic links (as links).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular():
			_, err := copyFile(p, to)
			return err
		}
		return fmt.Errorf("%s: not a file, directory or link", p)
	})
}
