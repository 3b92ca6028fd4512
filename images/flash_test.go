package images

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sysDisk is a block device in a fixture sysfs tree.
type sysDisk struct {
	name, dev  string // "sdb", "8:16"
	sectors    string
	removable  string
	vendor     string
	model      string
	partitions map[string]string // name -> "major:minor"
	slaves     []string          // for device-mapper devices: paths below sys/block/
}

// fixtureRoots builds sysfs and procfs trees laid out as the kernel lays
// them out (class/block and dev/block are symlinks into block/).
func fixtureRoots(t *testing.T, disks []sysDisk, mountinfo, swaps string) HostRoots {
	t.Helper()
	root := t.TempDir()
	r := HostRoots{Sys: filepath.Join(root, "sys"), Proc: filepath.Join(root, "proc")}
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(name), 0o755)
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range disks {
		dir := filepath.Join(r.Sys, "block", d.name)
		write(filepath.Join(dir, "size"), d.sectors)
		write(filepath.Join(dir, "removable"), d.removable)
		write(filepath.Join(dir, "dev"), d.dev)
		if d.model != "" {
			write(filepath.Join(dir, "device", "vendor"), d.vendor)
			write(filepath.Join(dir, "device", "model"), d.model)
		}
		link("../../block/"+d.name, filepath.Join(r.Sys, "class", "block", d.name))
		link("../../block/"+d.name, filepath.Join(r.Sys, "dev", "block", d.dev))
		for p, num := range d.partitions {
			write(filepath.Join(dir, p, "partition"), "1")
			write(filepath.Join(dir, p, "dev"), num)
			link("../../block/"+d.name+"/"+p, filepath.Join(r.Sys, "class", "block", p))
			link("../../block/"+d.name+"/"+p, filepath.Join(r.Sys, "dev", "block", num))
		}
		for _, s := range d.slaves {
			link("../../"+s, filepath.Join(dir, "slaves", filepath.Base(s)))
		}
	}
	write(filepath.Join(r.Proc, "self", "mountinfo"), mountinfo)
	write(filepath.Join(r.Proc, "swaps"), "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority"+swaps)
	return r
}

var fixtureDisks = []sysDisk{
	{name: "sda", dev: "8:0", sectors: "500118192", removable: "0", vendor: "ATA", model: "Samsung SSD",
		partitions: map[string]string{"sda1": "8:1", "sda2": "8:2"}},
	{name: "sdb", dev: "8:16", sectors: "62720", removable: "1", vendor: "SanDisk", model: "SDCFB-32",
		partitions: map[string]string{"sdb1": "8:17", "sdb2": "8:18"}},
	{name: "sdc", dev: "8:32", sectors: "3907029168", removable: "0", vendor: "WDC", model: "WD20EARS"},
	{name: "sdd", dev: "8:48", sectors: "62720", removable: "1", partitions: map[string]string{"sdd1": "8:49"}},
	{name: "dm-0", dev: "253:0", sectors: "1000000", removable: "0", slaves: []string{"sdd/sdd1"}},
}

const rootOnSda2 = "22 1 8:2 / / rw,relatime shared:1 - ext4 /dev/root rw\n" +
	"23 22 0:21 / /proc rw,nosuid shared:12 - proc proc rw\n" +
	"24 22 8:1 / /boot\\040efi rw shared:2 - vfat /dev/sda1 rw\n"

func TestFlashCardChecks(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dev       string
		mountinfo string
		swaps     string
		force     bool
		want      string // "" means the card may be written
	}{
		{"idle card", "/dev/sdb", rootOnSda2, "", false, ""},
		{"mounted partition", "/dev/sdb", rootOnSda2 + "40 22 8:17 / /media/card rw - vfat /dev/sdb1 rw\n", "", false, "/dev/sdb1 is mounted on /media/card"},
		{"mounted by path only", "/dev/sdb", rootOnSda2 + "40 22 0:99 / /mnt rw - fuseblk /dev/sdb2 rw\n", "", false, "/dev/sdb2 is mounted on /mnt"},
		{"mounted whole disk", "/dev/sdb", rootOnSda2 + "40 22 8:16 / /mnt/whole\\040disk rw - ext2 /dev/sdb rw\n", "", false, "mounted on /mnt/whole disk"},
		{"active swap", "/dev/sdb", rootOnSda2, "\n/dev/sdb2 partition 1000 0 -2", false, "/dev/sdb2 is active swap"},
		{"system disk", "/dev/sda", rootOnSda2, "", false, "holds the running system's root file system"},
		{"system disk, other mount first", "/dev/sda", "24 1 8:1 / /boot rw - vfat /dev/sda1 rw\n" + rootOnSda2, "", true, "holds the running system's root file system"},
		{"system disk under device-mapper", "/dev/sdd", "1 0 253:0 / / rw - ext4 /dev/mapper/root rw\n", "", false, "holds the running system's root file system"},
		{"large disk", "/dev/sdc", rootOnSda2, "", false, "larger than the 64 GiB"},
		{"large disk forced", "/dev/sdc", rootOnSda2, "", true, ""},
		{"root in a container", "/dev/sdb", "1 0 0:50 / / rw - overlay overlay rw\n", "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			roots := fixtureRoots(t, fixtureDisks, tc.mountinfo, tc.swaps)
			card, err := InspectCard(roots, tc.dev)
			if err != nil {
				t.Fatalf("InspectCard(%s): %v", tc.dev, err)
			}
			err = card.Check(roots, DefaultFlashLimit, tc.force)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Check(%s) refused: %v", tc.dev, err)
			case tc.want != "" && err == nil:
				t.Errorf("Check(%s) allowed writing; want a refusal containing %q", tc.dev, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("Check(%s) = %q, want it to contain %q", tc.dev, err, tc.want)
			}
		})
	}
}

func TestFlashInspectCard(t *testing.T) {
	roots := fixtureRoots(t, fixtureDisks, rootOnSda2, "")
	card, err := InspectCard(roots, "/dev/sdb")
	if err != nil {
		t.Fatal(err)
	}
	if card.Bytes != 62720*512 || card.Model != "SanDisk SDCFB-32" || !card.Removable || strings.Join(card.Partitions, " ") != "sdb1 sdb2" {
		t.Errorf("InspectCard(/dev/sdb) = %+v; want 32112640 bytes, SanDisk SDCFB-32, removable, partitions sdb1 sdb2", card)
	}
	if got, want := card.String(), "/dev/sdb: 32.1 MB, SanDisk SDCFB-32, removable, partitions sdb1 sdb2"; got != want {
		t.Errorf("card.String() = %q, want %q", got, want)
	}
	for dev, want := range map[string]string{
		"/dev/sdb1": "is a partition: give the whole card, /dev/sdb",
		"/dev/sdz":  "is not a block device of this system",
	} {
		if _, err := InspectCard(roots, dev); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("InspectCard(%s) = %v, want an error containing %q", dev, err, want)
		}
	}
	if err := card.CheckFits(card.Bytes + 1); err == nil || !strings.Contains(err.Error(), "holds only 32112640") {
		t.Errorf("CheckFits(one byte too many) = %v, want a refusal with the sizes", err)
	}
}

func TestFlashDeviceModel(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"usb reader", map[string]string{"device/vendor": "Generic", "device/model": "STORAGE DEVICE"}, "Generic STORAGE DEVICE"},
		{"sd slot", map[string]string{"device/type": "SD", "device/name": "SD32G"}, "SD card SD32G"},
		{"loop", map[string]string{"loop/backing_file": "/tmp/card.img"}, "loop device on /tmp/card.img"},
		{"nothing known", map[string]string{"size": "62720"}, ""},
	} {
		sys := filepath.Join(dir, tc.name)
		for name, content := range tc.files {
			os.MkdirAll(filepath.Dir(filepath.Join(sys, name)), 0o755)
			if err := os.WriteFile(filepath.Join(sys, name), []byte(content+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := deviceModel(sys); got != tc.want {
			t.Errorf("%s: deviceModel = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestFlashRefusesBadTargets(t *testing.T) {
	empty := &Card{Dev: "/dev/sdb", Name: "sdb"}
	if err := empty.CheckFits(1); err == nil || !strings.Contains(err.Error(), "/dev/sdb has no medium (0 bytes)") {
		t.Errorf("CheckFits on a reader without a card = %v, want a no-medium refusal", err)
	}
	img := filepath.Join(t.TempDir(), "card.img")
	os.WriteFile(img, []byte("image"), 0o644)
	null := &Card{Dev: os.DevNull, Name: "null", Bytes: 1 << 20, devNums: []string{"1:3"}}
	if err := null.Write(context.Background(), img, nil); err == nil || !strings.Contains(err.Error(), "is a character device") {
		t.Errorf("Write to %s = %v, want a refusal of a character device", os.DevNull, err)
	}
}

func TestFlashWriteVerifies(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "card.img")
	content := bytes.Repeat([]byte("flashgate\x00\xff"), 300000) // not a multiple of the 1 MiB buffer
	if err := os.WriteFile(img, content, 0o644); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(dir, "fake-card")
	// A card is larger than the image and holds old data after it.
	old := bytes.Repeat([]byte{0x5a}, len(content)+4096)
	if err := os.WriteFile(dev, old, 0o644); err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	card := &Card{Dev: dev, Name: "fake-card", Bytes: int64(len(old))}
	if err := card.Write(context.Background(), img, &progress); err != nil {
		t.Fatalf("Write: %v", err)
	}
	got, _ := os.ReadFile(dev)
	if !bytes.Equal(got[:len(content)], content) || !bytes.Equal(got[len(content):], old[len(content):]) {
		t.Error("the fake card does not hold the image followed by its old tail")
	}
	if !strings.Contains(progress.String(), "written 3 of 3 MiB") {
		t.Errorf("progress %q does not report the total", progress.String())
	}

	// A card that does not hold what was written is reported with the offset.
	got[123457] ^= 1
	os.WriteFile(dev, got, 0o644)
	if err := verifyImage(img, dev, int64(len(content))); err == nil || !strings.Contains(err.Error(), "at byte 123457") {
		t.Errorf("verifyImage of a corrupted card = %v, want a difference at byte 123457", err)
	}
	if err := verifyImage(img, filepath.Join(dir, "short"), 10); err == nil {
		t.Error("verifyImage of a missing card succeeded")
	}
}

func TestFlashParseMountInfo(t *testing.T) {
	m, err := parseMountInfo([]byte(rootOnSda2))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 3 || m[0] != (mountEntry{"8:2", "/", "/dev/root"}) || m[2].MountPoint != "/boot efi" {
		t.Errorf("parseMountInfo = %+v", m)
	}
	if _, err := parseMountInfo([]byte("garbage line\n")); err == nil {
		t.Error("parseMountInfo accepted a line without the separator")
	}
}

func FuzzParseMountInfo(f *testing.F) {
	f.Add([]byte(rootOnSda2))
	f.Add([]byte("1 0 8:1 / /a\\04 rw - x \\777 rw\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMountInfo(b)
		if err != nil {
			return
		}
		for _, e := range m {
			if !strings.Contains(e.DevNum, ":") {
				t.Errorf("entry %+v has no major:minor", e)
			}
		}
	})
}
