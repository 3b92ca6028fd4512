package pid1

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
)

const fixtureModulesDep = `kernel/drivers/ata/ata_piix.ko: kernel/drivers/ata/libata.ko kernel/drivers/scsi/scsi_mod.ko
kernel/drivers/ata/libata.ko: kernel/drivers/scsi/scsi_mod.ko
kernel/drivers/scsi/scsi_mod.ko:
kernel/drivers/scsi/sd_mod.ko: kernel/drivers/scsi/scsi_common.ko kernel/drivers/scsi/scsi_mod.ko
kernel/drivers/scsi/scsi_common.ko:
kernel/drivers/net/ethernet/realtek/r8169.ko: kernel/drivers/net/phy/libphy.ko kernel/drivers/net/mdio/mdio_devres.ko
kernel/drivers/net/mdio/mdio_devres.ko: kernel/drivers/net/phy/libphy.ko
kernel/drivers/net/phy/libphy.ko:
kernel/drivers/net/phy/realtek.ko: kernel/drivers/net/phy/libphy.ko
kernel/drivers/net/ethernet/via/via-rhine.ko.xz: kernel/drivers/net/mii.ko
kernel/drivers/net/mii.ko:
kernel/fs/ext4/ext4.ko: kernel/fs/jbd2/jbd2.ko kernel/fs/mbcache.ko kernel/lib/crc16.ko
kernel/fs/jbd2/jbd2.ko:
kernel/fs/mbcache.ko:
kernel/lib/crc16.ko:
kernel/crypto/crc32c_generic.ko:
`

func fixtureModuleDir(t *testing.T) string {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(fixtureModulesDep), 0o644)
	os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte("kernel/drivers/watchdog/softdog.ko\n"), 0o644)
	return dir
}

func TestLoadOrder(t *testing.T) {
	dir := fixtureModuleDir(t)
	idx, err := loadModuleIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The board order puts softdeps first (crc32c before ext4, the
	// realtek PHY before r8169), as boards.Modules documents.
	files, missing := idx.loadOrder([]string{"ata_piix", "sd_mod", "realtek", "r8169", "via-rhine", "crc32c_generic", "ext4", "softdog", "geode-aes"})
	var got []string
	for _, f := range files {
		if !strings.HasPrefix(f, dir+"/") {
			t.Errorf("%s is not under %s", f, dir)
		}
		got = append(got, moduleName(f))
	}
	want := []string{"scsi_mod", "libata", "ata_piix", "scsi_common", "sd_mod", "libphy", "realtek", "mdio_devres", "r8169",
		"mii", "via_rhine", "crc32c_generic", "jbd2", "mbcache", "crc16", "ext4"}
	if !slices.Equal(got, want) {
		t.Errorf("load order\n got %v\nwant %v", got, want)
	}
	if !slices.Equal(missing, []string{"geode_aes"}) {
		t.Errorf("missing %v, want [geode_aes] (softdog is built in)", missing)
	}
}

func TestLoadModulesGoesOnAfterAFailure(t *testing.T) {
	dir := fixtureModuleDir(t)
	var inserted, logs []string
	insert := func(f string) error { // one group: no concurrent calls
		if moduleName(f) == "libata" {
			return fmt.Errorf("Unknown symbol in module")
		}
		inserted = append(inserted, moduleName(f))
		return nil
	}
	logf := func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }
	n := loadModules(dir, "", [][]string{{"ata_piix", "mii", "nosuch"}}, insert, logf)
	if n != 3 || !slices.Equal(inserted, []string{"scsi_mod", "ata_piix", "mii"}) {
		t.Errorf("loaded %d: %v; want scsi_mod, ata_piix, mii despite libata failing", n, inserted)
	}
	wantLogs := []string{"module nosuch: not in " + dir + "/modules.dep", "module libata: Unknown symbol in module", "modules: 3 of 4 loaded in "}
	if len(logs) != 3 || !slices.Equal(logs[:2], wantLogs[:2]) || !strings.HasPrefix(logs[2], wantLogs[2]) {
		t.Errorf("log lines %q, want %q", logs, wantLogs)
	}
	logs = nil
	if n := loadModules(t.TempDir(), "", [][]string{{"e1000"}}, insert, logf); n != 0 || len(logs) != 1 || !strings.Contains(logs[0], "no modules loaded") {
		t.Errorf("without modules.dep: loaded %d, logs %q; want 0 and one line saying so", n, logs)
	}
}

// TestLoadModulesGroupsConcurrently loads two groups that share scsi_mod,
// and holds scsi_mod's insertion until another group has started: each
// module must be inserted once, none before its dependencies or the modules
// listed before it in its group, and the groups must overlap.
func TestLoadModulesGroupsConcurrently(t *testing.T) {
	dir := fixtureModuleDir(t)
	groups := [][]string{
		{"ata_piix", "sd_mod"},
		{"crc32c_generic", "sd_mod", "ext4"},
		{"mii"},
	}
	var (
		mu       sync.Mutex
		inserted = map[string]int{} // name -> position
		order    []string
	)
	otherStarted := make(chan struct{})
	var once sync.Once
	insert := func(f string) error {
		name := moduleName(f)
		if name == "scsi_mod" {
			select {
			case <-otherStarted:
			case <-time.After(10 * time.Second):
				return fmt.Errorf("no other group inserted anything while scsi_mod was loading: the groups are not concurrent")
			}
		} else {
			once.Do(func() { close(otherStarted) })
		}
		mu.Lock()
		defer mu.Unlock()
		inserted[name]++
		order = append(order, name)
		return nil
	}
	var logs []string
	logf := func(format string, args ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	n := loadModules(dir, "", groups, insert, logf)
	want := []string{"scsi_mod", "libata", "ata_piix", "scsi_common", "sd_mod", "crc32c_generic", "jbd2", "mbcache", "crc16", "ext4", "mii"}
	if n != len(want) {
		t.Errorf("loaded %d modules, want %d; logs %q", n, len(want), logs)
	}
	for _, m := range want {
		if inserted[m] != 1 {
			t.Errorf("%s inserted %d times, want once (insertions: %v)", m, inserted[m], order)
		}
	}
	pos := map[string]int{}
	for i, m := range order {
		pos[m] = i
	}
	for _, before := range [][2]string{
		// sd_mod is in two groups: it may come before ata_piix, with the
		// second group, but never before its own dependencies.
		{"scsi_mod", "libata"}, {"libata", "ata_piix"}, {"scsi_common", "sd_mod"},
		{"scsi_mod", "sd_mod"}, {"crc32c_generic", "ext4"}, {"sd_mod", "ext4"}, {"crc16", "ext4"},
	} {
		if pos[before[0]] > pos[before[1]] {
			t.Errorf("%s inserted after %s; insertions: %v", before[0], before[1], order)
		}
	}
	if last := logs[len(logs)-1]; !strings.HasPrefix(last, fmt.Sprintf("modules: %d of %d loaded in ", len(want), len(want))) {
		t.Errorf("last log line %q, want the count of %d modules", last, len(want))
	}
}

func TestParseModulesDepRejectsGarbage(t *testing.T) {
	for _, bad := range []string{"no colon here\n", ": dep.ko\n", "foo.txt: bar.ko\n"} {
		if _, _, err := parseModulesDep(strings.NewReader(bad)); err == nil {
			t.Errorf("parseModulesDep(%q) accepted it", bad)
		}
	}
}

func FuzzParseModulesDep(f *testing.F) {
	f.Add(fixtureModulesDep)
	f.Add("a.ko: a.ko\n")
	f.Add("a.ko: b.ko\nb.ko: a.ko\n")
	f.Fuzz(func(t *testing.T, s string) {
		path, deps, err := parseModulesDep(strings.NewReader(s))
		if err != nil {
			return
		}
		idx := &moduleIndex{dir: "/m", path: path, deps: deps, builtin: map[string]bool{}}
		var names []string
		for n := range path {
			names = append(names, n)
		}
		files, _ := idx.loadOrder(names) // must terminate, even with cycles
		if len(files) > len(path) {
			t.Errorf("%d files to load for %d modules", len(files), len(path))
		}
	})
}

// TestModuleStages checks that PID 1 loads nothing before the services (the
// kernels build in every driver a board needs) and the optional cards'
// modules beside them.
func TestModuleStages(t *testing.T) {
	for _, tc := range []struct {
		board string
		late  []string
	}{
		{"qemu", nil},
		{"alix2d13", nil},
		{"net4801", []string{"hifn_795x"}},
		{"net5501", []string{"hifn_795x"}},
	} {
		t.Run(tc.board, func(t *testing.T) {
			b, err := boards.Lookup(tc.board)
			if err != nil {
				t.Fatal(err)
			}
			early, late := moduleStages(b.Modules)
			if len(early) != 0 {
				t.Errorf("early modules %v; every driver the services wait for is built in", early)
			}
			var gotLate []string
			for _, g := range late {
				gotLate = append(gotLate, g...)
			}
			if !slices.Equal(gotLate, tc.late) {
				t.Errorf("modules beside the services %v, want %v", gotLate, tc.late)
			}
		})
	}
}

func TestAwaitModules(t *testing.T) {
	for _, tc := range []struct {
		name string
		load func(release chan struct{})
		want string // substring of the log, "" for none
	}{
		{"loaded", func(chan struct{}) {}, ""},
		{"panics", func(chan struct{}) { panic("bad module index") }, "panic: bad module index"},
		{"a probe hangs", func(release chan struct{}) { <-release }, "still loading after 50ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			var logs []string
			var mu sync.Mutex
			logf := func(format string, args ...any) {
				mu.Lock()
				logs = append(logs, fmt.Sprintf(format, args...))
				mu.Unlock()
			}
			provided := 0
			start := time.Now()
			awaitModules(func() { tc.load(release) }, 50*time.Millisecond, func() { provided++ }, logf)
			if provided != 1 {
				t.Errorf("the condition was provided %d times, want once", provided)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("awaitModules took %s with a 50ms bound", took)
			}
			mu.Lock()
			defer mu.Unlock()
			got := strings.Join(logs, "\n")
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("log %q, want %q", got, tc.want)
			}
		})
	}
}
