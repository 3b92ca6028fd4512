// Command vmcheck runs the xfrm namespace tests on a board's own kernel
// without building an appliance image: it builds (or takes from the kernel
// cache) the board's kernel, which has ESP and XFRM built in, compiles the
// package's test binary for 386, packs it as /init into an initramfs, boots
// that in qemu-system-i386 and reports the result the binary prints on the
// serial console.
//
//	go run ./ipsec/xfrm/vmcheck -board alix2d13
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/images"
	"github.com/u-root/u-root/pkg/cpio"
)

const marker = "xfrm-vmtest: exit status"

func main() {
	boardName := flag.String("board", "qemu", "the 32-bit board whose kernel to boot")
	timeout := flag.Duration("timeout", 5*time.Minute, "bound on the whole VM run")
	keep := flag.Bool("keep", false, "keep the work directory")
	flag.Parse()
	if err := run(*boardName, *timeout, *keep); err != nil {
		fmt.Fprintf(os.Stderr, "vmcheck: %v\n", err)
		os.Exit(1)
	}
}

func run(boardName string, timeout time.Duration, keep bool) error {
	qemu, err := exec.LookPath("qemu-system-i386")
	if err != nil {
		return fmt.Errorf("qemu-system-i386 not installed (apt-get install qemu-system-x86): %w", err)
	}
	board, err := boards.Lookup(boardName)
	if err != nil {
		return err
	}
	if board.GOARCH != "386" {
		return fmt.Errorf("board %s is 64-bit; vmcheck boots the 386 test binary", board.Name)
	}
	k, err := (&images.KernelBuild{Log: os.Stderr}).Build(context.Background(), board)
	if err != nil {
		return err
	}
	vmlinuz := k.Vmlinuz
	emu, err := board.Emulation()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "xfrm-vmcheck-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(work)
	}
	testBin := filepath.Join(work, "xfrm.test")
	build := exec.Command("go", "test", "-c", "-o", testBin, "github.com/flashgate/flashgate/ipsec/xfrm")
	build.Env = append(os.Environ(), "GOARCH=386", "GO386=softfloat", "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build the 386 test binary: %w", err)
	}
	initrd := filepath.Join(work, "initrd.cpio")
	if err := writeInitramfs(initrd, testBin); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, "-M", "pc", "-cpu", emu.CPU, "-m", "256",
		"-nographic", "-no-reboot", "-kernel", vmlinuz, "-initrd", initrd,
		// noapic: TCG on a loaded host sometimes fails the IO-APIC timer check.
		"-append", "console=ttyS0 panic=-1 noapic")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start qemu: %w", err)
	}
	result := ""
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		fmt.Println(line)
		if i := strings.Index(line, marker); i >= 0 {
			result = strings.TrimSpace(line[i+len(marker):])
		}
	}
	waitErr := cmd.Wait()
	switch {
	case result == "0":
		return nil
	case result != "":
		return fmt.Errorf("tests in the VM failed (exit status %s)", result)
	case ctx.Err() != nil:
		return fmt.Errorf("no result within %v", timeout)
	default:
		return fmt.Errorf("the VM stopped without a result: %v", waitErr)
	}
}

// writeInitramfs packs /init (the test binary) and an empty /modules.load,
// which tells the binary it is vmcheck's init: ESP, XFRM and veth are built
// into flashgate's kernels.
func writeInitramfs(path, testBin string) error {
	bin, err := os.ReadFile(testBin)
	if err != nil {
		return err
	}
	recs := []cpio.Record{
		cpio.StaticFile("init", string(bin), 0o755),
		cpio.StaticFile("modules.load", "", 0o644),
	}
	var buf bytes.Buffer
	w := cpio.Newc.Writer(&buf)
	if err := cpio.WriteRecordsAndDirs(w, recs); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	if err := cpio.WriteTrailer(w); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	// Uncompressed: every kernel unpacks a plain cpio.
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
