package images

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Report is what a build put on the card, in bytes.
type Report struct {
	Board   string
	Version string
	Image   string // path of the card image

	Kernel string // kernel release and the source package it came from
	// KernelBuilt is true when this build compiled the kernel, false when
	// it came from the kernel cache; KernelBuildTime is what compiling it
	// took either way.
	KernelBuilt     bool
	KernelBuildTime time.Duration
	// KernelStepTime is what this build spent getting its kernel (about
	// nothing when it was cached).
	KernelStepTime time.Duration
	KernelBytes    int64 // vmlinuz (already compressed by the kernel build)
	Modules        []Module
	ModulesBytes   int64 // module files, uncompressed, inside the initramfs
	InitBytes      int64 // PID 1's binary (firmware/init), uncompressed, inside the initramfs
	CPIOBytes      int64 // initramfs before compression
	InitramfsBytes int64 // initramfs as stored on the card (zstd)
	BootBytes      int64 // boot partition size
	BootFreeBytes  int64 // free on the boot partition after slot A
	ConfigBytes    int64 // config partition size
	CardBytes      int64 // image size
	MinCardMB      int   // the board's smallest supported card
	Slot           SlotPlan
	UpgradeFile    string // the signed (or developer's unsigned) upgrade file
	Signer         string // key fingerprint, or why unsigned
}

// FirmwareBytes is one firmware slot: kernel plus initramfs.
func (r *Report) FirmwareBytes() int64 { return r.KernelBytes + r.InitramfsBytes }

// SlotBFits reports whether a second slot of the same size fits: slot B is
// laid out at flash time at slot A's size, so it does whenever the card
// was built.
func (r *Report) SlotBFits() bool {
	return r.Slot.KernelBytes >= r.KernelBytes && r.Slot.InitrdBytes >= r.InitramfsBytes
}

// Write prints the report for humans.
func (r *Report) Write(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	row := func(what string, n int64, note string) {
		fmt.Fprintf(tw, "%s\t%d\t%s\t %s\n", what, n, human(n), note)
	}
	fmt.Fprintf(w, "flashgate %s for %s (%s)\n", r.Version, r.Board, r.Kernel)
	row("kernel", r.KernelBytes, "vmlinuz")
	row("modules", r.ModulesBytes, fmt.Sprintf("%d files, uncompressed, in the initramfs", len(r.Modules)))
	row("init", r.InitBytes, "PID 1's binary, uncompressed, in the initramfs")
	row("initramfs", r.InitramfsBytes, fmt.Sprintf("zstd (%s as cpio)", human(r.CPIOBytes)))
	row("firmware", r.FirmwareBytes(), "kernel + initramfs, one slot")
	row("slot", r.Slot.KernelBytes+r.Slot.InitrdBytes, fmt.Sprintf("each of slots a and b: kernel up to %s, initramfs up to %s", human(r.Slot.KernelBytes), human(r.Slot.InitrdBytes)))
	row("boot free", r.BootFreeBytes, fmt.Sprintf("of %s on p1, after both slots", human(r.BootBytes)))
	row("config", r.ConfigBytes, "p2, ext3 fgconfig (journalled)")
	row("card", r.CardBytes, fmt.Sprintf("image, for cards of %d MB and up", r.MinCardMB))
	tw.Flush()
	fmt.Fprintln(w, r.Image)
	if r.UpgradeFile != "" {
		fmt.Fprintf(w, "%s (signer: %s)\n", r.UpgradeFile, r.Signer)
	}
}

func human(n int64) string {
	switch {
	case n >= 10*mib:
		return fmt.Sprintf("%.1f MiB", float64(n)/mib)
	case n >= mib:
		return fmt.Sprintf("%.2f MiB", float64(n)/mib)
	default:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
}
