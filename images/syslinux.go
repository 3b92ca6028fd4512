package images

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/flashgate/flashgate/boards"
)

// The boot partition holds two firmware slots, /a/ and /b/, each a kernel,
// an initramfs and the signed manifest of the upgrade file they came from.
// Both are laid out at flash time at their full size (see planSlots): an
// upgrade then overwrites the inactive slot's data clusters in place and
// never changes the FAT or a directory entry (firmware/bootfs).
const (
	slotAKernel    = "/a/vmlinuz"
	slotAInitramfs = "/a/initrd.img" // zstd-compressed cpio; before zstd it was /a/initrd.xz
)

// SlotPaths are the files of slot ("a" or "b") on the boot partition.
func SlotPaths(slot string) (kernel, initrd, manifest string) {
	return "/" + slot + "/vmlinuz", "/" + slot + "/initrd.img", "/" + slot + "/manifest"
}

// Slots are the slot names, in the order syslinux.cfg lists them.
var Slots = []string{"a", "b"}

// syslinuxModules are the com32 modules the menu needs: menu.c32 is the UI
// because it, unlike ldlinux's own prompt, takes its default from the ADV's
// MENUSAVE record, which is how the box switches slots for good.
var syslinuxModules = []string{"menu.c32", "libutil.c32", "libcom32.c32"}

// KernelCommandLine is what syslinux passes to the kernel of slot: the
// console the board's BIOS uses, the board and the slot for PID 1 (which
// reads them from /proc/cmdline: dotted arguments are not passed to init as
// env), and a reboot 10 s after a panic (which is how a broken upgrade
// falls back). The version is not on it: syslinux.cfg is written once, at
// flash time, and outlives upgrades; the version is inside the initramfs
// (/etc/flashgate/version).
func KernelCommandLine(b boards.Board, slot string) string {
	return fmt.Sprintf("console=%s,%d flashgate.board=%s flashgate.slot=%s panic=10",
		b.Console.Device, b.Console.Baud, b.Name, slot)
}

// serialPort returns the syslinux SERIAL port number of a ttyS device.
func serialPort(device string) (int, error) {
	n, ok := strings.CutPrefix(device, "ttyS")
	if !ok {
		return 0, fmt.Errorf("console %q is not a ttyS serial port", device)
	}
	p, err := strconv.Atoi(n)
	if err != nil || p < 0 || p > 3 {
		return 0, fmt.Errorf("console %q: syslinux drives ttyS0..ttyS3 only", device)
	}
	return p, nil
}

// SyslinuxConfig returns syslinux.cfg for the board: serial console at the
// board's baud, no video output (these boxes are headless, and BIOSes such as
// tinyBIOS redirect video to the same serial port, which would print
// everything twice), and half a second to interrupt the boot: hold a key
// while the box starts to get the (otherwise hidden) menu of the two slots.
// A longer wait would be paid on every boot.
//
// Which slot boots is in syslinux's ADV, never in this file: the default is
// the MENUSAVE label (slot a until the first upgrade is committed), and a
// boot-once command line ("b"), which ldlinux clears before it boots it,
// makes the test boot of an upgrade. MENU NOSAVE on the labels keeps a slot
// picked by hand at the menu from becoming the default.
func SyslinuxConfig(b boards.Board) (string, error) {
	port, err := serialPort(b.Console.Device)
	if err != nil {
		return "", err
	}
	if b.Console.Baud <= 0 {
		return "", fmt.Errorf("board %s has no console baud rate", b.Name)
	}
	var s strings.Builder
	fmt.Fprintf(&s, "SERIAL %d %d\n", port, b.Console.Baud)
	s.WriteString("CONSOLE 0\n")
	s.WriteString("UI menu.c32\n")
	s.WriteString("MENU SAVE\n")
	s.WriteString("MENU HIDDEN\n")
	s.WriteString("MENU TITLE flashgate: choose the firmware slot\n")
	s.WriteString("TIMEOUT 5\n")
	s.WriteString("DEFAULT a\n")
	for _, slot := range Slots {
		kernel, initrd, _ := SlotPaths(slot)
		fmt.Fprintf(&s, "\nLABEL %s\n", slot)
		fmt.Fprintf(&s, "  MENU LABEL slot %s\n", slot)
		s.WriteString("  MENU NOSAVE\n")
		fmt.Fprintf(&s, "  KERNEL %s\n", kernel)
		fmt.Fprintf(&s, "  INITRD %s\n", initrd)
		fmt.Fprintf(&s, "  APPEND %s\n", KernelCommandLine(b, slot))
	}
	return s.String(), nil
}

// installSyslinux writes ldlinux.sys and ldlinux.c32 into the FAT file
// system at offset in img, and syslinux's MBR boot code over the first 440
// bytes (the partition table and signature after it are kept).
func installSyslinux(ctx context.Context, img string, offset int64, env []string) error {
	if _, err := (command{Env: env}).run(ctx, tool(toolSyslinux), "--offset", strconv.FormatInt(offset, 10), "--install", img); err != nil {
		return fmt.Errorf("install syslinux: %w", err)
	}
	// The installer leaves an empty ADV (both copies consistent): slot a
	// is the default until an upgrade is committed.
	mbr, err := os.ReadFile(tool(toolMBR))
	if err != nil {
		return fmt.Errorf("read syslinux MBR: %w", err)
	}
	if len(mbr) > 440 {
		mbr = mbr[:440]
	}
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(mbr, 0); err != nil {
		return fmt.Errorf("write MBR boot code: %w", err)
	}
	return f.Close()
}
