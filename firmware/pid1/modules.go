package pid1

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// moduleIndex is what depmod wrote for one kernel: for each module, its
// file and the modules it needs.
type moduleIndex struct {
	dir     string            // /lib/modules/<release>
	path    map[string]string // module name -> file, relative to dir or absolute
	deps    map[string][]string
	builtin map[string]bool
}

// moduleName normalizes a module or file name the way the kernel does:
// "kernel/drivers/net/via-rhine.ko.xz" and "via_rhine" are both "via_rhine".
func moduleName(s string) string {
	s = filepath.Base(s)
	if i := strings.Index(s, ".ko"); i >= 0 {
		s = s[:i]
	}
	return strings.ReplaceAll(s, "-", "_")
}

// parseModulesDep reads modules.dep: "path.ko: dep1.ko dep2.ko" per line.
func parseModulesDep(r io.Reader) (path map[string]string, deps map[string][]string, err error) {
	path, deps = map[string]string{}, map[string][]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		file, rest, ok := strings.Cut(line, ":")
		if !ok || file == "" || !strings.Contains(file, ".ko") {
			return nil, nil, fmt.Errorf("modules.dep line %d: %q is not \"module.ko: deps\"", n, line)
		}
		name := moduleName(file)
		path[name] = file
		for _, d := range strings.Fields(rest) {
			deps[name] = append(deps[name], moduleName(d))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("modules.dep: %w", err)
	}
	return path, deps, nil
}

// loadModuleIndex reads modules.dep and modules.builtin from dir.
func loadModuleIndex(dir string) (*moduleIndex, error) {
	f, err := os.Open(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	path, deps, err := parseModulesDep(f)
	if err != nil {
		return nil, err
	}
	idx := &moduleIndex{dir: dir, path: path, deps: deps, builtin: map[string]bool{}}
	if b, err := os.ReadFile(filepath.Join(dir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			idx.builtin[moduleName(l)] = true
		}
	}
	return idx, nil
}

// loadOrder returns the files to insert, dependencies first, for the given
// modules in their given order (the board lists softdeps explicitly, in the
// order they must load). Built-in modules are skipped; a module missing from
// the index is reported in missing and the others still load.
func (idx *moduleIndex) loadOrder(modules []string) (files []string, missing []string) {
	done := map[string]bool{}
	var visit func(name string, stack []string)
	visit = func(name string, stack []string) {
		if done[name] || idx.builtin[name] {
			return
		}
		if slicesContains(stack, name) { // a cycle depmod would reject; do not recurse forever
			return
		}
		file, ok := idx.path[name]
		if !ok {
			done[name] = true
			missing = append(missing, name)
			return
		}
		// modules.dep lists the whole closure; loading each dependency
		// through its own entry gives a correct order whatever the order
		// of the list.
		for _, d := range idx.deps[name] {
			visit(d, append(stack, name))
		}
		done[name] = true
		if !filepath.IsAbs(file) {
			file = filepath.Join(idx.dir, file)
		}
		files = append(files, file)
	}
	for _, m := range modules {
		visit(moduleName(m), nil)
	}
	return files, missing
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// insertModule loads one module file with finit_module(2). Compressed
// files are handed to the kernel to decompress.
func insertModule(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	flags := 0
	if strings.HasSuffix(file, ".xz") || strings.HasSuffix(file, ".zst") || strings.HasSuffix(file, ".gz") {
		flags |= unix.MODULE_INIT_COMPRESSED_FILE
	}
	err = unix.FinitModule(int(f.Fd()), "", flags)
	if errors.Is(err, unix.EEXIST) {
		return nil // already loaded
	}
	return err
}

// loadModules loads the board's module groups (boards.Modules: disk, NICs,
// watchdog, crypto, RNG, LEDs, the rest), one goroutine per group, each
// group in its own order with dependencies first. Under software emulation
// and on a single-core Geode, a probe that waits on the hardware (the ATA
// reset, a NIC's EEPROM and PHY) leaves the CPU idle, and another group's
// signature checks and crypto self-tests use it meanwhile; loaded one after
// the other, the 72 modules of the qemu board took 4 s. Within a group the
// order is kept, so a board's NICs still probe, and are named eth0, eth1...,
// in the order the board lists their drivers, and explicit softdeps (crc32c
// before ext4) still come first. A module two groups need is loaded once, by
// the first group to reach it (possibly before what precedes it in the other
// group); the other group waits for it. A module that fails is one log line;
// the rest still load, since a missing crypto driver must not keep the NICs
// down. It returns when every group is done: netd and iked need the
// netfilter and XFRM modules from their first moment.
//
// what names the stage in the log (" for the services"); "" for none.
func loadModules(dir, what string, groups [][]string, insert func(string) error, logf func(string, ...any)) (loaded int) {
	var wanted int
	for _, g := range groups {
		wanted += len(g)
	}
	if wanted == 0 {
		return 0
	}
	idx, err := loadModuleIndex(dir)
	if err != nil {
		logf("modules: %v; no modules loaded (is the board's module closure in the initramfs?)", err)
		return 0
	}
	start := time.Now()
	var (
		mu      sync.Mutex
		loads   = map[string]*moduleLoad{} // by file
		order   []string                   // files in the order a group claimed them, for the log
		missing = map[string]bool{}
		wg      sync.WaitGroup
	)
	// claim returns the load of file, and whether the caller is the one to
	// insert it. Whoever claims a file inserts it at once and never waits
	// while holding a claim, so groups that list modules in different
	// orders cannot wait for each other in a circle.
	claim := func(file string) (*moduleLoad, bool) {
		mu.Lock()
		defer mu.Unlock()
		if l := loads[file]; l != nil {
			return l, false
		}
		l := &moduleLoad{done: make(chan struct{})}
		loads[file] = l
		order = append(order, file)
		return l, true
	}
	for _, g := range groups {
		files, miss := idx.loadOrder(g)
		for _, m := range miss {
			if !missing[m] {
				missing[m] = true
				logf("module %s: not in %s/modules.dep", m, dir)
			}
		}
		if len(files) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, f := range files {
				l, mine := claim(f)
				if !mine {
					<-l.done
					continue
				}
				l.err = insert(f)
				close(l.done)
			}
		}()
	}
	wg.Wait()
	for _, f := range order {
		if err := loads[f].err; err != nil {
			logf("module %s: %v", moduleName(f), err)
			continue
		}
		loaded++
	}
	logf("modules%s: %d of %d loaded in %s", what, loaded, len(order), time.Since(start).Round(10*time.Millisecond))
	return loaded
}

// moduleStages splits a board's modules into what PID 1 loads before it
// starts any service and what it loads while configd, the web UI and the
// console start. Every driver the card, the config partition, the watchdog,
// the NICs, the firewall and IPsec need is built into the board's kernel
// (kernel/config), so nothing is early; what is left are the modules of
// optional cards (a Hifn crypto card), loaded beside the services, which
// iked waits for (the modulesLoaded condition) so that it ranks the card's
// engine from its first SA.
func moduleStages(optional []string) (early, late [][]string) {
	if len(optional) == 0 {
		return nil, nil
	}
	return nil, [][]string{slices.Clone(optional)}
}

// moduleLoad is one module file's insertion; done is closed when err is set.
type moduleLoad struct {
	done chan struct{}
	err  error
}
