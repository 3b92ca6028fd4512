package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/images"
	"github.com/u-root/u-root/pkg/cpio"
)

// vmMarker is what bench/vminit prints before the benchmarks' exit status.
const vmMarker = "vmbench: exit status"

// runInVM runs suite s compiled for the board s.Board (its GOARCH and
// GO386) inside qemu on the board's own kernel, with bench/vminit as init,
// and returns its results with "@"+s.Board appended to their names.
//
// This machine's kernel runs no 32-bit user code (IA-32 emulation is off),
// and qemu-user 7.2 crashes Go's 386 runtime, so a board build can only be
// measured in a whole emulated machine: TCG, no KVM. Its times are
// emulation times; figures compare them with the same benchmarks of the
// amd64 build under the same emulation (see boardFigures).
func runInVM(s Suite, rawPath string) ([]Result, error) {
	board, err := boards.Lookup(s.Board)
	if err != nil {
		return nil, err
	}
	emu, err := board.Emulation()
	if err != nil {
		return nil, err
	}
	qemu, err := exec.LookPath(emu.Binary)
	if err != nil {
		return nil, fmt.Errorf("%s not installed (apt-get install qemu-system-x86): %w", emu.Binary, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	k, err := (&images.KernelBuild{Log: os.Stderr}).Build(ctx, board)
	if err != nil {
		return nil, fmt.Errorf("board %s's kernel: %w", board.Name, err)
	}
	work, err := os.MkdirTemp("", "flashgate-vmbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	env := append(os.Environ(), "GOARCH="+board.GOARCH, "CGO_ENABLED=0")
	if board.GO386 != "" {
		env = append(env, "GO386="+board.GO386)
	}
	testBin, initBin := filepath.Join(work, "bench.test"), filepath.Join(work, "init")
	for _, build := range [][]string{
		{"test", "-c", "-o", testBin, s.Package},
		{"build", "-o", initBin, "./bench/vminit"},
	} {
		cmd := exec.CommandContext(ctx, "go", build...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go %s for %s: %v: %s", strings.Join(build, " "), board.Name, err, out)
		}
	}
	args := []string{"-test.run=^$", "-test.bench=" + s.Pattern, "-test.benchmem", "-test.count=1"}
	if s.Benchtime != "" {
		args = append(args, "-test.benchtime="+s.Benchtime)
	}
	initrd := filepath.Join(work, "initrd.cpio")
	if err := writeVMInitramfs(initrd, initBin, testBin, strings.Join(args, "\n")); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, qemu, "-M", emu.Machine, "-cpu", emu.CPU, "-m", "256",
		"-nographic", "-no-reboot", "-kernel", k.Vmlinuz, "-initrd", initrd,
		// noapic: TCG on a loaded host sometimes fails the IO-APIC timer check.
		"-append", "console=ttyS0 panic=-1 noapic quiet")
	var buf bytes.Buffer
	cmd.Stdout = io.MultiWriter(&buf, os.Stderr)
	cmd.Stderr = cmd.Stdout
	runErr := cmd.Run()
	os.WriteFile(rawPath, buf.Bytes(), 0o644)
	res, err := ParseBenchOutput(bytes.NewReader(buf.Bytes()))
	for i := range res {
		res[i].Name += "@" + board.Name
	}
	if err != nil {
		return res, err
	}
	status := ""
	for _, line := range strings.Split(buf.String(), "\n") {
		if i := strings.Index(line, vmMarker); i >= 0 {
			status = strings.TrimSpace(line[i+len(vmMarker):])
		}
	}
	switch {
	case status == "0":
		return res, nil
	case status != "":
		return res, fmt.Errorf("benchmarks in the %s VM exited with status %s (output in %s)", board.Name, status, rawPath)
	default:
		return res, fmt.Errorf("the %s VM stopped without a result: %v (output in %s)", board.Name, runErr, rawPath)
	}
}

// writeVMInitramfs packs /init, /bench.test and /bench.args into a plain
// cpio, which every kernel unpacks.
func writeVMInitramfs(path, initBin, testBin, args string) error {
	var recs []cpio.Record
	for _, f := range []struct{ name, file string }{{"init", initBin}, {"bench.test", testBin}} {
		b, err := os.ReadFile(f.file)
		if err != nil {
			return err
		}
		recs = append(recs, cpio.StaticFile(f.name, string(b), 0o755))
	}
	recs = append(recs, cpio.StaticFile("bench.args", args+"\n", 0o644))
	var buf bytes.Buffer
	w := cpio.Newc.Writer(&buf)
	if err := cpio.WriteRecordsAndDirs(w, recs); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	if err := cpio.WriteTrailer(w); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
