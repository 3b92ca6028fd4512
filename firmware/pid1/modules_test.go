package pid1

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	insert := func(f string) error {
		if moduleName(f) == "libata" {
			return fmt.Errorf("Unknown symbol in module")
		}
		inserted = append(inserted, moduleName(f))
		return nil
	}
	logf := func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }
	n := loadModules(dir, []string{"ata_piix", "mii", "nosuch"}, insert, logf)
	if n != 3 || !slices.Equal(inserted, []string{"scsi_mod", "ata_piix", "mii"}) {
		t.Errorf("loaded %d: %v; want scsi_mod, ata_piix, mii despite libata failing", n, inserted)
	}
	wantLogs := []string{"module nosuch: not in " + dir + "/modules.dep", "module libata: Unknown symbol in module", "modules: 3 of 4 loaded in "}
	if len(logs) != 3 || !slices.Equal(logs[:2], wantLogs[:2]) || !strings.HasPrefix(logs[2], wantLogs[2]) {
		t.Errorf("log lines %q, want %q", logs, wantLogs)
	}
	logs = nil
	if n := loadModules(t.TempDir(), []string{"e1000"}, insert, logf); n != 0 || len(logs) != 1 || !strings.Contains(logs[0], "no modules loaded") {
		t.Errorf("without modules.dep: loaded %d, logs %q; want 0 and one line saying so", n, logs)
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
