package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/images"
)

// The tests in this file flash real block devices: loop devices over
// files in the test's temporary directory. They need root and loop devices;
// where there are none (a container without /dev/loop-control), they skip
// and say so. Loop devices belong to the whole machine: each is attached
// with autoclear, so the kernel detaches it once the test no longer holds
// it, even if the test is killed (a timeout) before its cleanups run; and
// the test runs in a mount namespace of its own, so that what it mounts
// never enters the host's mount table and goes away with the test.

// privateMountsEnv names the test that this test binary, re-executed in a
// mount namespace of its own, is to run.
const privateMountsEnv = "FLASHGATE_FLASH_TEST_PRIVATE_MOUNTS"

// inPrivateMounts runs the calling test again in a child process with a
// mount namespace of its own and private mounts, and reports whether the
// caller is that child, which then goes on with the test.
func inPrivateMounts(t *testing.T) bool {
	t.Helper()
	if os.Getenv(privateMountsEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), privateMountsEnv+"="+t.Name())
	// Go makes the new namespace's mounts private (MS_REC|MS_PRIVATE on
	// /), so nothing propagates back to the host.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	t.Logf("%s in a mount namespace of its own:\n%s", t.Name(), out)
	switch {
	case err != nil:
		t.Fatalf("%s in a mount namespace of its own: %v", t.Name(), err)
	case bytes.Contains(out, []byte("--- SKIP: "+t.Name()+" (")):
		t.Skip("skipped in the mount namespace of its own (above)")
	case !bytes.Contains(out, []byte("--- PASS: "+t.Name()+" (")):
		t.Fatalf("%s did not run in the mount namespace of its own", t.Name())
	}
	return false
}

// requireLoopDevices skips the test where loop devices cannot be made.
func requireLoopDevices(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("attaching loop devices needs root; flashing a real block device is not tested")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("no loop devices here (%v): a container? flashing a real block device is not tested", err)
	}
}

// attachLoop attaches backing to a free loop device with partition
// scanning on (as a USB card reader has) and detaches that device when the
// test ends, whatever happened.
func attachLoop(t *testing.T, backing string) string {
	t.Helper()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("cannot open /dev/loop-control (%v): loop devices are not usable here", err)
	}
	defer ctl.Close()
	bf, err := os.OpenFile(backing, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer bf.Close() // the loop device holds its own reference
	for attempt := 0; attempt < 10; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			t.Skipf("LOOP_CTL_GET_FREE: %v: loop devices cannot be allocated here", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		lf, err := os.OpenFile(dev, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			t.Skipf("%s has no device node (no devtmpfs: a container?): loop devices are not usable here", dev)
		}
		if err != nil {
			t.Fatalf("open %s: %v", dev, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(bf.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_PARTSCAN | unix.LO_FLAGS_AUTOCLEAR
		copy(cfg.Info.File_name[:], backing)
		if err := unix.IoctlLoopConfigure(int(lf.Fd()), &cfg); err != nil {
			lf.Close()
			if err == unix.EBUSY {
				continue // another process took it between GET_FREE and here
			}
			t.Fatalf("LOOP_CONFIGURE %s on %s: %v", dev, backing, err)
		}
		t.Cleanup(func() { detachLoop(t, lf, dev) })
		t.Logf("%s attached to %s", dev, backing)
		return dev
	}
	t.Fatal("no free loop device after 10 attempts")
	return ""
}

// detachLoop detaches the loop device lf is open on and waits until the
// kernel says it has no backing file any more.
func detachLoop(t *testing.T, lf *os.File, dev string) {
	t.Helper()
	err := unix.IoctlSetInt(int(lf.Fd()), unix.LOOP_CLR_FD, 0)
	lf.Close()
	if err != nil && err != unix.ENXIO { // ENXIO: detached already
		t.Errorf("LOOP_CLR_FD %s: %v", dev, err)
		return
	}
	backing := filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(backing); errors.Is(err, fs.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s is still attached 10 s after LOOP_CLR_FD", dev)
			return
		}
	}
}

// mountExt2 mounts an ext2 file system from dev and unmounts it when the
// test ends (before the device is detached: cleanups run last first).
// Call it in the child of inPrivateMounts only.
func mountExt2(t *testing.T, dev string) string {
	t.Helper()
	if !strings.HasPrefix(t.Name(), os.Getenv(privateMountsEnv)) || os.Getenv(privateMountsEnv) == "" {
		t.Fatal("mountExt2 outside inPrivateMounts would mount on the host")
	}
	dir := t.TempDir()
	if err := unix.Mount(dev, dir, "ext2", unix.MS_NOATIME, ""); err != nil {
		t.Fatalf("mount %s on %s: %v", dev, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v; detaching it lazily", dir, err)
			unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	return dir
}

// mke2fs makes an ext2 file system labelled label of kib KiB at offset in
// file.
func mke2fs(t *testing.T, file string, offset int64, kib int, label string) {
	t.Helper()
	path, err := exec.LookPath("mke2fs")
	if err != nil {
		t.Fatalf("mke2fs is not installed (apt-get install e2fsprogs): it makes the file systems the flash tests mount")
	}
	cmd := exec.Command(path, "-q", "-F", "-t", "ext2", "-L", label, "-E", "offset="+strconv.FormatInt(offset, 10),
		file, strconv.Itoa(kib))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mke2fs %s: %v\n%s", file, err, out)
	}
}

// Partitions of the synthetic card image, in 512-byte sectors: the layout
// of a real one (p1 boot from 1 MiB, p2 config after it), smaller.
const (
	synthP1Start, synthP1Sectors = 2048, 6144 // 1 MiB, 3 MiB
	synthP2Start, synthP2Sectors = 8192, 4096 // 4 MiB, 2 MiB
	synthBytes                   = (synthP2Start + synthP2Sectors) * 512
)

// syntheticCard writes a 6 MiB card image: an MBR with a bootable FAT16
// partition of random bytes and an ext2 partition labelled fgconfig. seed
// makes images that differ in every partition.
func syntheticCard(t *testing.T, path string, seed uint64) []byte {
	t.Helper()
	img := make([]byte, synthBytes)
	r := rand.New(rand.NewPCG(seed, 0x666c617368))
	for i := 512; i < len(img); i += 8 {
		binary.LittleEndian.PutUint64(img[i:], r.Uint64())
	}
	mbr := img[:512]
	binary.LittleEndian.PutUint32(mbr[440:], uint32(seed)) // disk signature
	entry := func(i int, boot, typ byte, start, sectors uint32) {
		e := mbr[446+16*i:]
		e[0], e[4] = boot, typ
		binary.LittleEndian.PutUint32(e[8:], start)
		binary.LittleEndian.PutUint32(e[12:], sectors)
	}
	entry(0, 0x80, 0x06, synthP1Start, synthP1Sectors)
	entry(1, 0x00, 0x83, synthP2Start, synthP2Sectors)
	mbr[510], mbr[511] = 0x55, 0xaa
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	mke2fs(t, path, synthP2Start*512, synthP2Sectors/2, "fgconfig")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// oldCard makes a backing file of size bytes holding a recognisable
// pattern and no partition table, as a used card would.
func oldCard(t *testing.T, path string, size int) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Repeat([]byte("old card "), size/9+1)[:size], 0o644); err != nil {
		t.Fatal(err)
	}
}

// readDevice reads n bytes from the start of a block device, past the page
// cache's view of what was written (BLKFLSBUF).
func readDevice(t *testing.T, dev string, n int) []byte {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.BLKFLSBUF, 0); err != nil {
		t.Fatalf("BLKFLSBUF %s: %v", dev, err)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(f, b); err != nil {
		t.Fatalf("read %s: %v", dev, err)
	}
	return b
}

// sysPartition reads a partition's start and size (in sectors) from sysfs.
func sysPartition(dev, part string) (start, size string, err error) {
	dir := filepath.Join("/sys/class/block", filepath.Base(dev), part)
	s, err := os.ReadFile(filepath.Join(dir, "start"))
	if err != nil {
		return "", "", err
	}
	z, err := os.ReadFile(filepath.Join(dir, "size"))
	return strings.TrimSpace(string(s)), strings.TrimSpace(string(z)), err
}

// TestFlashLoopDevice runs `flashgate flash` on a real block device, a
// loop device over a "32 MB card", and then the refusals on real devices:
// a mounted partition of it, a mounted second device, a device larger than
// the limit (over a sparse file), and the disk holding /.
func TestFlashLoopDevice(t *testing.T) {
	requireLoopDevices(t)
	if !inPrivateMounts(t) {
		return
	}
	dir := t.TempDir()
	imgPath, img2Path := filepath.Join(dir, "card.img"), filepath.Join(dir, "card2.img")
	img := syntheticCard(t, imgPath, 1)
	syntheticCard(t, img2Path, 2) // differs from img in every partition

	const cardBytes = 32_000_000 // a "32 MB" card, 62500 sectors
	backing := filepath.Join(dir, "card.backing")
	oldCard(t, backing, cardBytes)
	card := attachLoop(t, backing)
	if entries, _ := filepath.Glob(filepath.Join("/sys/class/block", filepath.Base(card), filepath.Base(card)+"p*")); len(entries) != 0 {
		t.Fatalf("the blank card already has partitions: %v", entries)
	}

	rc, stdout, stderr := flashgate(t, "", "flash", "-image", imgPath, "-dev", card, "-yes")
	t.Logf("flash %s:\n%s%s", card, stdout, stderr)
	if rc != 0 {
		t.Fatalf("flash -yes onto %s: exit status %d: %s", card, rc, stderr)
	}
	for _, want := range []string{card + ": 32.0 MB, loop device on " + backing, "written 6 of 6 MiB", card + " written and verified"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("flash output lacks %q", want)
		}
	}
	got := readDevice(t, card, cardBytes)
	if !bytes.Equal(got[:len(img)], img) {
		t.Errorf("%s does not hold the image after flashing", card)
	}
	if old := bytes.Repeat([]byte("old card "), cardBytes/9+1)[len(img):cardBytes]; !bytes.Equal(got[len(img):], old) {
		t.Errorf("%s: the bytes after the image changed", card)
	}
	// The kernel saw the new partition table (BLKRRPART after writing), if
	// it reads MBR partition tables at all: a loop device attached over a
	// copy of the image is the control.
	synthParts := [][2]int64{{synthP1Start, synthP1Sectors}, {synthP2Start, synthP2Sectors}}
	if kernelReadsMBR(t, imgPath) {
		for i, want := range synthParts {
			part := fmt.Sprintf("%sp%d", filepath.Base(card), i+1)
			start, size, err := sysPartition(card, part)
			if err != nil || start != strconv.FormatInt(want[0], 10) || size != strconv.FormatInt(want[1], 10) {
				t.Errorf("after flashing, the kernel has %s at sector %q, %q sectors (%v); want %d, %d: the partition table was not re-read",
					part, start, size, err, want[0], want[1])
			}
		}
	} else {
		t.Logf("this kernel reads no MBR partition tables (a loop device over the image shows none: no CONFIG_MSDOS_PARTITION), " +
			"so the re-read after flashing cannot be observed; adding the partitions with BLKPG, as partx would")
		for i, p := range synthParts {
			addPartition(t, card, i+1, p[0], p[1])
		}
	}

	// A mounted partition of the card: the config partition just written.
	p2 := card + "p2"
	mnt := mountExt2(t, p2)
	rc, _, stderr = flashgate(t, "", "flash", "-image", img2Path, "-dev", card, "-yes", "-force")
	if want := p2 + " is mounted on " + mnt; rc != 1 || !strings.Contains(stderr, want) {
		t.Errorf("flash onto %s with %s mounted: exit %d, %q; want a refusal containing %q", card, p2, rc, stderr, want)
	}
	// O_EXCL is the last guard, should the checks miss a mount.
	c, err := images.InspectCard(images.SystemRoots, card)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(context.Background(), img2Path, io.Discard); !errors.Is(err, unix.EBUSY) {
		t.Errorf("writing %s past the checks while %s is mounted: %v, want EBUSY from O_EXCL", card, p2, err)
	}
	// Mounting p2 wrote to it; the MBR and p1 must be as flashed.
	if got := readDevice(t, card, synthP2Start*512); !bytes.Equal(got, img[:synthP2Start*512]) {
		t.Errorf("a refused flash changed the MBR or p1 of %s", card)
	}

	// A second device, mounted as a whole.
	diskBacking := filepath.Join(dir, "disk.backing")
	oldCard(t, diskBacking, 4<<20)
	mke2fs(t, diskBacking, 0, 4096, "busy")
	disk := attachLoop(t, diskBacking)
	diskMnt := mountExt2(t, disk)
	rc, _, stderr = flashgate(t, "", "flash", "-image", imgPath, "-dev", disk, "-yes")
	if want := disk + " is mounted on " + diskMnt; rc != 1 || !strings.Contains(stderr, want) {
		t.Errorf("flash onto mounted %s: exit %d, %q; want a refusal containing %q", disk, rc, stderr, want)
	}
	if c, err := images.InspectCard(images.SystemRoots, disk); err != nil {
		t.Error(err)
	} else if err := c.Write(context.Background(), imgPath, io.Discard); !errors.Is(err, unix.EBUSY) {
		t.Errorf("writing mounted %s past the checks: %v, want EBUSY from O_EXCL", disk, err)
	}
	// Mounting writes to the file system, so "unchanged" is: none of the
	// image's random blocks of p1 is on the device.
	got = readDevice(t, disk, 4<<20)
	for off := 4096; off < synthP2Start*512; off += 4096 {
		if bytes.Equal(got[off:off+4096], img[off:off+4096]) {
			t.Errorf("a refused flash wrote to %s: the image's block at byte %d is there", disk, off)
			break
		}
	}

	// A device larger than the limit, over a sparse file.
	bigBacking := filepath.Join(dir, "big.backing")
	f, err := os.Create(bigBacking)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(images.DefaultFlashLimit + 1<<20); err != nil {
		t.Fatalf("sparse %d-byte file: %v", images.DefaultFlashLimit+1<<20, err)
	}
	f.Close()
	big := attachLoop(t, bigBacking)
	rc, _, stderr = flashgate(t, "", "flash", "-image", imgPath, "-dev", big, "-yes")
	if want := big + " is 68.7 GB, larger than the 64 GiB"; rc != 1 || !strings.Contains(stderr, want) {
		t.Errorf("flash onto %s (64 GiB + 1 MiB) without -force: exit %d, %q; want a refusal containing %q", big, rc, stderr, want)
	}
	if got := readDevice(t, big, len(img)); !bytes.Equal(got, make([]byte, len(img))) {
		t.Errorf("a refused flash changed %s", big)
	}
	rc, _, stderr = flashgate(t, "", "flash", "-image", imgPath, "-dev", big, "-yes", "-force")
	if rc != 0 {
		t.Errorf("flash -force onto %s: exit %d: %s", big, rc, stderr)
	} else if got := readDevice(t, big, len(img)); !bytes.Equal(got, img) {
		t.Errorf("%s does not hold the image after flash -force", big)
	}

	// The device written must be the one checked.
	c.Dev = big
	if err := c.Write(context.Background(), imgPath, io.Discard); err == nil || !strings.Contains(err.Error(), "but the checks were made on "+filepath.Base(card)) {
		t.Errorf("writing %s with the checks of %s: %v, want a refusal", big, card, err)
	}

	t.Run("disk holding root", func(t *testing.T) { testFlashRefusesRootDisk(t, dir) })
}

// testFlashRefusesRootDisk points flash at the disk holding / — with -force,
// an image larger than that disk and no confirmation, so that even a broken
// check could write nothing — and wants the root refusal.
func testFlashRefusesRootDisk(t *testing.T, dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var devNum, source string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		pre, post, _ := strings.Cut(sc.Text(), " - ")
		if fl, gl := strings.Fields(pre), strings.Fields(post); len(fl) >= 5 && fl[4] == "/" && len(gl) >= 2 {
			devNum, source = fl[2], gl[1] // the last mount on / is the one in force
		}
	}
	real, err := filepath.EvalSymlinks(filepath.Join("/sys/dev/block", devNum))
	if err != nil {
		t.Skipf("/ is %s (%s), not on a block device (a container?): no system disk to refuse", source, devNum)
	}
	if _, err := os.Stat(filepath.Join(real, "partition")); err == nil {
		real = filepath.Dir(real)
	}
	if _, err := os.Stat(filepath.Join(real, "slaves")); err == nil {
		if slaves, _ := os.ReadDir(filepath.Join(real, "slaves")); len(slaves) > 0 {
			real = filepath.Join(real, "slaves", slaves[0].Name()) // the first disk under dm or md
			if r, err := filepath.EvalSymlinks(real); err == nil {
				real = r
			}
			if _, err := os.Stat(filepath.Join(real, "partition")); err == nil {
				real = filepath.Dir(real)
			}
		}
	}
	disk := "/dev/" + filepath.Base(real)
	if fi, err := os.Stat(disk); err != nil || fi.Mode()&os.ModeDevice == 0 {
		t.Skipf("the disk holding / (%s, from %s) has no device node here", disk, source)
	}
	sectors, err := os.ReadFile(filepath.Join(real, "size"))
	n, perr := strconv.ParseInt(strings.TrimSpace(string(sectors)), 10, 64)
	if err != nil || perr != nil {
		t.Fatalf("size of %s: %v %v", disk, err, perr)
	}
	huge := filepath.Join(dir, "larger-than-the-system-disk.img")
	hf, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(huge)
	if err := hf.Truncate(n*512 + 1<<20); err != nil {
		t.Fatalf("sparse image larger than %s: %v", disk, err)
	}
	hf.Close()
	for _, extra := range [][]string{nil, {"-force"}} {
		args := append([]string{"flash", "-image", huge, "-dev", disk}, extra...)
		rc, _, stderr := flashgate(t, "", args...)
		if want := disk + " holds the running system's root file system"; rc != 1 || !strings.Contains(stderr, want) {
			t.Errorf("flashgate %s: exit %d, %q; want a refusal containing %q", strings.Join(args, " "), rc, stderr, want)
		}
	}
}

// kernelReadsMBR attaches a loop device, with partition scanning, over a
// copy of image (which has an MBR) and reports whether the kernel found its
// partitions.
func kernelReadsMBR(t *testing.T, image string) bool {
	t.Helper()
	b, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "control.img")
	if err := os.WriteFile(cp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	dev := attachLoop(t, cp)
	_, _, err = sysPartition(dev, filepath.Base(dev)+"p1")
	return err == nil
}

// addPartition tells the kernel about partition pno of dev (BLKPG), as
// partx -a does.
func addPartition(t *testing.T, dev string, pno int, start, sectors int64) {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := unix.BlkpgPartition{Start: start * 512, Length: sectors * 512, Pno: int32(pno)}
	arg := unix.BlkpgIoctlArg{Op: unix.BLKPG_ADD_PARTITION, Datalen: int32(unsafe.Sizeof(p)), Data: (*byte)(unsafe.Pointer(&p))}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKPG, uintptr(unsafe.Pointer(&arg))); errno != 0 {
		t.Fatalf("BLKPG add partition %d of %s: %v", pno, dev, errno)
	}
	part := fmt.Sprintf("%sp%d", dev, pno)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(part); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no device node 5 s after BLKPG", part)
		}
	}
}
