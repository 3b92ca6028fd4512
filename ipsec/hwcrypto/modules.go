package hwcrypto

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ModuleLoader loads a kernel module by name ("geode-aes"). Loading a module
// that is already loaded or built in succeeds. Tests inject their own.
type ModuleLoader interface {
	Load(name string) error
}

// KernelModules loads modules from a /lib/modules/<release> directory with
// finit_module(2), dependencies first, as modules.dep lists them. It is the
// loader used on the appliance, where there is no modprobe.
type KernelModules struct {
	Dir       string // /lib/modules/<release>
	SysModule string // /sys/module, to skip modules that are already live

	// finit is unix.FinitModule; tests replace it.
	finit func(fd int, params string, flags int) error
}

// NewKernelModules returns a loader for the running kernel's modules under
// root (normally "/").
func NewKernelModules(root string) (*KernelModules, error) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return nil, fmt.Errorf("uname: %w", err)
	}
	release := unix.ByteSliceToString(uts.Release[:])
	return &KernelModules{
		Dir:       filepath.Join(root, "lib/modules", release),
		SysModule: filepath.Join(root, "sys/module"),
		finit:     unix.FinitModule,
	}, nil
}

// moduleName is the kernel's name for a module file or request: the base
// name without extension, with '-' written as '_'.
func moduleName(s string) string {
	base := filepath.Base(s)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// depTable maps a module name to its file and its dependencies' files,
// relative to the modules directory, in modules.dep order.
type depTable map[string][]string

func parseModulesDep(path string) (depTable, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	deps := depTable{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		file, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[moduleName(file)] = append([]string{file}, strings.Fields(rest)...)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return deps, nil
}

func (k *KernelModules) builtin(name string) bool {
	f, err := os.Open(filepath.Join(k.Dir, "modules.builtin"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if moduleName(sc.Text()) == name {
			return true
		}
	}
	return false
}

func (k *KernelModules) live(name string) bool {
	b, err := os.ReadFile(filepath.Join(k.SysModule, name, "initstate"))
	return err == nil && strings.TrimSpace(string(b)) == "live"
}

// Load loads name and, before it, the modules it depends on.
func (k *KernelModules) Load(name string) error {
	name = moduleName(name)
	if k.live(name) || k.builtin(name) {
		return nil
	}
	deps, err := parseModulesDep(filepath.Join(k.Dir, "modules.dep"))
	if err != nil {
		return fmt.Errorf("load module %s: %w", name, err)
	}
	files, ok := deps[name]
	if !ok {
		return fmt.Errorf("load module %s: not in %s", name, filepath.Join(k.Dir, "modules.dep"))
	}
	// modules.dep lists the module, then its dependencies with the ones
	// loaded last first: load them from the end.
	for i := len(files) - 1; i >= 0; i-- {
		if err := k.insert(files[i]); err != nil {
			return fmt.Errorf("load module %s: %w", name, err)
		}
	}
	return nil
}

func (k *KernelModules) insert(file string) error {
	if k.live(moduleName(file)) {
		return nil
	}
	path := file
	if !filepath.IsAbs(path) {
		path = filepath.Join(k.Dir, file)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	flags := 0
	switch filepath.Ext(path) {
	case ".xz", ".zst", ".gz":
		flags = unix.MODULE_INIT_COMPRESSED_FILE
	}
	err = k.finit(int(f.Fd()), "", flags)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finit_module %s: %w", file, err)
	}
	return nil
}
