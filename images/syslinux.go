package images

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/flashgate/flashgate/boards"
)

// Paths of slot A on the boot partition. Slot B (/b/) is left free for A/B
// upgrades.
const (
	slotAKernel    = "/a/vmlinuz"
	slotAInitramfs = "/a/initrd.img" // zstd-compressed cpio; before zstd it was /a/initrd.xz
)

// KernelCommandLine is what syslinux passes to the kernel: the console the
// board's BIOS uses, and the board and version for PID 1 (which reads them
// from /proc/cmdline: dotted arguments are not passed to init as env), and
// a reboot 10 s after a panic.
func KernelCommandLine(b boards.Board, version string) string {
	return fmt.Sprintf("console=%s,%d flashgate.board=%s flashgate.version=%s panic=10",
		b.Console.Device, b.Console.Baud, b.Name, version)
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
// everything twice), and half a second to interrupt the boot and edit the
// kernel command line: hold a key while the box starts. A longer wait would
// be paid on every boot.
func SyslinuxConfig(b boards.Board, version string) (string, error) {
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
	s.WriteString("PROMPT 1\n")
	s.WriteString("TIMEOUT 5\n")
	s.WriteString("DEFAULT flashgate\n")
	s.WriteString("\n")
	s.WriteString("LABEL flashgate\n")
	fmt.Fprintf(&s, "  KERNEL %s\n", slotAKernel)
	fmt.Fprintf(&s, "  INITRD %s\n", slotAInitramfs)
	fmt.Fprintf(&s, "  APPEND %s\n", KernelCommandLine(b, version))
	return s.String(), nil
}

// installSyslinux writes ldlinux.sys and ldlinux.c32 into the FAT file
// system at offset in img, and syslinux's MBR boot code over the first 440
// bytes (the partition table and signature after it are kept).
func installSyslinux(ctx context.Context, img string, offset int64, env []string) error {
	if _, err := (command{Env: env}).run(ctx, tool(toolSyslinux), "--offset", strconv.FormatInt(offset, 10), "--install", img); err != nil {
		return fmt.Errorf("install syslinux: %w", err)
	}
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
