package images

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
)

// bootLimit bounds the whole boot test; qemu itself runs under `timeout`
// with the same limit, so it dies even if the test binary is killed.
const bootLimit = 3 * time.Minute

// TestBootQEMU builds the qemu board's image from this tree, boots it in
// qemu (software emulation, -cpu pentium2) and follows the serial console
// through the boot markers of the cross-team contract: syslinux passed our
// command line, our PID 1 ran and identified the board, first boot asked
// for an admin password (answered over the serial port, without echo),
// and the login prompt appeared. The serial log is kept in
// out/test/boot-qemu.log, and printed in full on failure.
func TestBootQEMU(t *testing.T) {
	root := requireBuildHost(t)
	board, err := boards.Lookup("qemu")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckQEMUTools(board.QEMU.Binary); err != nil {
		t.Fatalf("cannot boot images on this host: %v", err)
	}
	version := testVersion()
	outDir := filepath.Join(root, "out", "test")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// 45 minutes: run alone on a fresh machine (go test ./images), the
	// kernel is built first, some 30 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	buildStart := time.Now()
	b := &Builder{RepoRoot: root, OutDir: outDir, CacheDir: filepath.Join(root, "out", "cache")}
	rep, err := b.Build(ctx, board, version)
	if err != nil {
		t.Fatalf("build the qemu image: %v", err)
	}
	t.Logf("built %s in %s: firmware %d bytes (kernel %d, initramfs %d)", rep.Image,
		time.Since(buildStart).Round(time.Second), rep.FirmwareBytes(), rep.KernelBytes, rep.InitramfsBytes)

	checkInitramfs(t, rep)

	// Boot a copy: the first boot writes the admin password to the card.
	card := filepath.Join(outDir, "boot-qemu.img")
	if err := CopyCard(rep.Image, card); err != nil {
		t.Fatal(err)
	}
	vm := startTestVM(t, QEMUConfig{Board: board, Image: card, NoReboot: true}, filepath.Join(outDir, "boot-qemu.log"))
	bootCtx, bootCancel := context.WithTimeout(ctx, bootLimit)
	defer bootCancel()

	times, err := bootToLogin(bootCtx, vm, board, version, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (first boot; the ordinary boot's target is a login prompt within 10 s)", times)

	// Once the services start, the kernel's informational messages (the
	// config partition's remounts when the password is committed, which
	// every first boot does, the NICs' VLAN filters and links coming up)
	// stay off the console, where they would land in the middle of the
	// prompts.
	log := vm.Log()
	if i := bytes.Index(log, []byte("flashgate init: starting services")); i < 0 {
		t.Error("PID 1 never said it was starting the services")
	} else {
		after := log[i:]
		for _, info := range []string{"EXT4-fs (", "8021q: ", "NIC Link is Up", "e1000 0000:"} {
			if bytes.Contains(after, []byte(info)) {
				t.Errorf("kernel information (%q) reached the console after the services started:\n%s", info, after)
				break
			}
		}
	}
}

// TestBootBoards builds every supported board's own card (its kernel from
// kernel/config, its initramfs for its GOARCH/GO386) and boots it in qemu
// on the CPU model closest to the board's: the net4801's card with -cpu
// pentium,+mmx (no CMOV) and 128 MB, the ALIX and net5501 cards with
// pentium2, the EPIA C3's with pentium3 (SSE, no SSE2), the 64-bit boards
// with qemu64. Each must reach the login prompt. The boards' own NICs and
// disk controllers are not emulated: every kernel carries qemu's PIIX IDE
// and e1000 for this, so what this proves is that the kernel, the
// initramfs and the Go binaries run on that CPU, not that the board's
// drivers find their chips. The qemu board itself is TestBootQEMU's.
func TestBootBoards(t *testing.T) {
	root := requireBuildHost(t)
	outDir := filepath.Join(root, "out", "test")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	version := testVersion()
	for _, board := range boards.All() {
		if board.Unsupported != "" || board.Name == "qemu" {
			continue
		}
		t.Run(board.Name, func(t *testing.T) {
			q, err := board.Emulation()
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckQEMUTools(q.Binary); err != nil {
				t.Fatalf("cannot boot images on this host: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
			defer cancel()
			b := &Builder{RepoRoot: root, OutDir: outDir, CacheDir: filepath.Join(root, "out", "cache")}
			rep, err := b.Build(ctx, board, version)
			if err != nil {
				t.Fatalf("build the %s image: %v", board.Name, err)
			}
			defer os.Remove(rep.Image)
			t.Logf("%s: firmware %d bytes (kernel %s %d, initramfs %d)", board.Name, rep.FirmwareBytes(), rep.Kernel, rep.KernelBytes, rep.InitramfsBytes)
			card := filepath.Join(outDir, "boot-"+board.Name+".img")
			if err := CopyCard(rep.Image, card); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(card)
			vm := startTestVM(t, QEMUConfig{Board: board, Image: card, NoReboot: true, Emulate: true},
				filepath.Join(outDir, "boot-"+board.Name+".log"))
			bootCtx, bootCancel := context.WithTimeout(ctx, bootLimit)
			defer bootCancel()
			times, err := bootToLogin(bootCtx, vm, board, version, false)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s on -cpu %s: %s", board.Name, q.CPU, times)
			log := vm.Log()
			if !bytes.Contains(log, []byte("Linux version "+strings.TrimSuffix(strings.Fields(rep.Kernel)[0], " "))) {
				t.Errorf("the kernel that booted is not the board's own %s", rep.Kernel)
			}
			if bytes.Contains(log, []byte("requires the following features not present on the CPU")) {
				t.Errorf("the kernel refused the CPU")
			}
		})
	}
}

// startTestVM boots c for a test, limited to bootLimit; when the test ends
// it stops qemu and keeps the serial console in logPath, printed as well if
// the test failed.
func startTestVM(t *testing.T, c QEMUConfig, logPath string) *VM {
	t.Helper()
	vm, err := StartVM(c, bootLimit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		vm.Stop()
		log := vm.Log()
		os.WriteFile(logPath, log, 0o644)
		if t.Failed() {
			t.Logf("serial console (also in %s):\n%s", logPath, log)
		}
	})
	return vm
}

// checkInitramfs lists the initramfs on the built card with zstd and cpio
// and checks it against the contract: /init is the flashgate binary, no
// u-root init or uinit, the expert commands, and exactly the module closure
// under lib/modules/<release>/ with its modules.dep.
func checkInitramfs(t *testing.T, rep *Report) {
	t.Helper()
	if err := checkTools(hostTool{"cpio", "cpio"}); err != nil {
		t.Fatalf("cannot list the initramfs: %v", err)
	}
	ctx := context.Background()
	mtools := command{Env: []string{"MTOOLS_SKIP_CHECK=1"}}
	packed, err := mtools.run(ctx, tool(toolMcopy), "-n", "-i", rep.Image+"@@1048576", "::"+slotAInitramfs, "-")
	if err != nil {
		t.Fatal(err)
	}
	// The slot's files are preallocated, so the archive is followed by
	// zeros up to the slot's size; the kernel skips them, zstd does not.
	if int64(len(packed)) < rep.InitramfsBytes {
		t.Fatalf("the card's initramfs has %d bytes, the build made %d", len(packed), rep.InitramfsBytes)
	}
	if pad := packed[rep.InitramfsBytes:]; len(bytes.Trim(pad, "\x00")) != 0 {
		t.Errorf("the initramfs slot has non-zero bytes after the archive")
	}
	packed = packed[:rep.InitramfsBytes]
	// The kernel picks the decompressor by the magic number: a zstd
	// frame starts with 28 b5 2f fd.
	if zstdMagic := []byte{0x28, 0xb5, 0x2f, 0xfd}; !bytes.HasPrefix(packed, zstdMagic) {
		t.Errorf("the initramfs does not start with the zstd magic % x (header % x)", zstdMagic, packed[:min(8, len(packed))])
	}
	// The build's zstd archive, then the uncompressed one that stamps the
	// version (AppendToInitramfs), 4-byte aligned: the kernel unpacks both.
	frame, err := zstdFrameLen(packed)
	if err != nil {
		t.Fatalf("the initramfs is not zstd: %v", err)
	}
	cpioData, err := command{Stdin: packed[:frame]}.run(ctx, tool(toolZstd), "-dc")
	if err != nil {
		t.Fatalf("the initramfs is not zstd: %v", err)
	}
	stamp := bytes.TrimLeft(packed[frame:], "\x00")
	listing, err := command{Stdin: cpioData}.run(ctx, tool(hostTool{"cpio", "cpio"}), "-it", "--quiet")
	if err != nil {
		t.Fatalf("the initramfs is not a cpio archive: %v", err)
	}
	stamped, err := command{Stdin: stamp}.run(ctx, tool(hostTool{"cpio", "cpio"}), "-it", "--quiet")
	if err != nil {
		t.Fatalf("what follows the initramfs's zstd frame is not a cpio archive: %v", err)
	}
	if !strings.Contains(string(stamped), "etc/flashgate/version") {
		t.Errorf("the appended archive lacks etc/flashgate/version: %q", stamped)
	}
	files := map[string]bool{}
	for _, f := range strings.Split(strings.TrimSpace(string(listing)), "\n") {
		files[f] = true
	}
	for _, want := range []string{"init", InitPath, "bbin/bb", "bbin/flashgate", "bin/sh", "dev/console"} {
		if !files[want] {
			t.Errorf("the initramfs lacks %s", want)
		}
	}
	for _, c := range ExpertCommands {
		if !files["bbin/"+c] {
			t.Errorf("the initramfs lacks the expert command %s", c)
		}
	}
	for _, unwanted := range []string{"bin/uinit", "bbin/init"} {
		if files[unwanted] {
			t.Errorf("the initramfs has %s: PID 1 must be flashgate alone", unwanted)
		}
	}
	// /init links to PID 1's own binary.
	long, err := command{Stdin: cpioData}.run(ctx, tool(hostTool{"cpio", "cpio"}), "-itv", "--quiet", "init")
	if l := strings.TrimSpace(string(long)); err != nil || !(strings.HasSuffix(l, "init -> "+InitPath) || strings.HasSuffix(l, "init -> /"+InitPath)) {
		t.Errorf("/init in the initramfs: %q (%v), want a link to /%s", long, err, InitPath)
	}
	checkNoNOPL(t, cpioData, "bbin/bb")
	checkNoNOPL(t, cpioData, InitPath)

	var kos []string
	modDir := ""
	for f := range files {
		if strings.HasSuffix(f, ".ko") {
			kos = append(kos, f)
		}
		if strings.HasSuffix(f, "/modules.dep") {
			modDir = strings.TrimSuffix(f, "modules.dep")
		}
	}
	if len(rep.Modules) == 0 {
		// Every driver is built into the kernel: no module tree at all.
		if modDir != "" || len(kos) > 0 {
			t.Errorf("the initramfs holds %d module files and %q, the board needs none", len(kos), modDir)
		}
		return
	}
	if modDir == "" {
		t.Fatal("the initramfs has no modules.dep")
	}
	if len(kos) != len(rep.Modules) {
		t.Errorf("the initramfs holds %d module files, the closure has %d", len(kos), len(rep.Modules))
	}
	for _, m := range rep.Modules {
		if !files[modDir+m.Path] {
			t.Errorf("the initramfs lacks %s%s", modDir, m.Path)
		}
	}
}

// checkNoNOPL disassembles a binary (path) of a 386 initramfs and fails
// on NOPL/NOPW (0F 1F): the Geode LX and the VIA C3 do not have them, and
// would die with SIGILL where the qemu boot test (pentium2 has them) would
// not notice.
func checkNoNOPL(t *testing.T, cpioData []byte, path string) {
	t.Helper()
	if err := checkTools(hostTool{"objdump", "binutils"}); err != nil {
		t.Fatalf("cannot check the binary's instructions: %v", err)
	}
	bb, err := command{Stdin: cpioData}.run(context.Background(), tool(hostTool{"cpio", "cpio"}), "-i", "--quiet", "--to-stdout", path)
	if err != nil || len(bb) == 0 {
		t.Fatalf("extract %s from the initramfs: %v", path, err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(bin, bb, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tool(hostTool{"objdump", "binutils"}), "-d", "--no-show-raw-insn", bin)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var bad []string
	lines := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		lines++
		// "addr:\tnopl ..." or, after prefixes, "addr:\tcs nopw ...".
		f := strings.Fields(sc.Text())
		for i := 1; i < len(f) && i < 4; i++ {
			if (f[i] == "nopl" || f[i] == "nopw") && len(bad) < 5 {
				bad = append(bad, sc.Text())
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("objdump: %v", err)
	}
	if lines < 1000 {
		t.Fatalf("objdump printed %d lines for %s: not a disassembly", lines, path)
	}
	if len(bad) > 0 {
		t.Errorf("%s uses multi-byte NOPs, which the Geode LX and VIA C3 lack:\n%s", path, strings.Join(bad, "\n"))
	}
}

// testPassword is the admin password the boot test sets on first boot.
const testPassword = "Fg-test-3141"

// bootToLogin follows a boot on the serial console to the login prompt and
// returns when each milestone appeared, counted from qemu's start. It checks
// the contract's markers in order. A fresh card has no admin account: then
// it records when the console asked for one (FirstBoot) and answers the
// first-boot password prompts; a card that has one (configured) must go
// straight to the login prompt.
func bootToLogin(ctx context.Context, vm *VM, board boards.Board, version string, configured bool) (bootTimes, error) {
	at, syslinux, err := vm.WaitFor(ctx, 0, "SYSLINUX ")
	if err != nil {
		return bootTimes{}, fmt.Errorf("syslinux did not start: %w", err)
	}
	at, kernel, err := vm.WaitFor(ctx, at, "ommand line: ")
	if err != nil {
		return bootTimes{}, fmt.Errorf("the kernel did not start: %w", err)
	}
	// The rest of the line may still be on its way.
	if _, _, err := vm.WaitFor(ctx, at, "\n"); err != nil {
		return bootTimes{}, fmt.Errorf("the kernel command line did not end: %w", err)
	}
	cmdline := lineAt(vm.Log(), at)
	for _, want := range []string{"BOOT_IMAGE=/a/vmlinuz", "flashgate.board=" + board.Name, "flashgate.slot=a",
		fmt.Sprintf("console=%s,%d", board.Console.Device, board.Console.Baud)} {
		if !strings.Contains(cmdline, want) {
			return bootTimes{}, fmt.Errorf("kernel command line %q lacks %q: syslinux did not pass syslinux.cfg's APPEND", cmdline, want)
		}
	}
	at, pid1, err := vm.WaitFor(ctx, at, "flashgate init: pid 1, version "+version)
	if err != nil {
		return bootTimes{}, fmt.Errorf("PID 1: %w", err)
	}
	// On an emulated hardware board the probe disagrees ("board alix2d13
	// (probe says qemu: ...)"); the board named on the command line wins.
	if at, _, err = vm.WaitFor(ctx, at, "flashgate init: board "+board.Name); err != nil {
		return bootTimes{}, fmt.Errorf("PID 1: %w", err)
	}
	times := bootTimes{Syslinux: syslinux, Kernel: kernel, PID1: pid1}
	if !configured {
		for _, s := range []struct{ prompt, answer string }{
			{"No admin password is set.", ""},
			{"New admin password: ", testPassword + "\r"},
			{"Repeat password: ", testPassword + "\r"},
		} {
			var when time.Duration
			if at, when, err = vm.WaitFor(ctx, at, s.prompt); err != nil {
				return bootTimes{}, fmt.Errorf("first-boot password: %w", err)
			}
			if s.answer == "" {
				times.FirstBoot = when
				continue
			}
			if err := vm.Type(s.answer); err != nil {
				return bootTimes{}, fmt.Errorf("type on the serial console: %w", err)
			}
		}
	}
	_, times.Login, err = vm.WaitFor(ctx, at, "login: ")
	if err != nil {
		return bootTimes{}, fmt.Errorf("console: %w", err)
	}
	log := vm.Log()
	if bytes.Contains(log, []byte(testPassword)) {
		return bootTimes{}, errors.New("the console echoed the admin password")
	}
	if configured && bytes.Contains(log, []byte("No admin password is set.")) {
		return bootTimes{}, errors.New("the console asked for an admin password again: the one set on the first boot was not kept")
	}
	return times, nil
}

// bootTimes are a boot's milestones, counted from qemu's start. FirstBoot
// is when the console asked for the admin password, on a fresh card only;
// Login is then after the password was set (argon2id and a commit).
type bootTimes struct {
	Syslinux, Kernel, PID1, FirstBoot, Login time.Duration
}

func (b bootTimes) String() string {
	s := fmt.Sprintf("syslinux at %.1f s, kernel %.1f s, PID 1 %.1f s, ", b.Syslinux.Seconds(), b.Kernel.Seconds(), b.PID1.Seconds())
	if b.FirstBoot > 0 {
		s += fmt.Sprintf("first-boot password prompt %.1f s, ", b.FirstBoot.Seconds())
	}
	return s + fmt.Sprintf("login prompt %.1f s after qemu started", b.Login.Seconds())
}

// lineAt returns the line of log that contains offset at.
func lineAt(log []byte, at int) string {
	start := bytes.LastIndexByte(log[:at], '\n') + 1
	end := bytes.IndexByte(log[at:], '\n')
	if end < 0 {
		end = len(log) - at
	}
	return strings.TrimRight(string(log[start:at+end]), "\r")
}

// zstdFrameLen walks the zstd frame at the start of b (RFC 8878 section 3.1:
// the frame header, then blocks up to the one flagged last, then an
// optional checksum) and returns its length, so what follows it can be
// told apart.
func zstdFrameLen(b []byte) (int, error) {
	if len(b) < 6 || !bytes.HasPrefix(b, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		return 0, fmt.Errorf("no zstd magic (header % x)", b[:min(8, len(b))])
	}
	fhd := b[4]
	fcsFlag, single, checksum, didFlag := fhd>>6, fhd&0x20 != 0, fhd&0x04 != 0, fhd&0x03
	n := 5
	if !single {
		n++ // window descriptor
	}
	n += []int{0, 1, 2, 4}[didFlag]
	fcs := []int{0, 2, 4, 8}[fcsFlag]
	if fcsFlag == 0 && single {
		fcs = 1
	}
	n += fcs
	for {
		if n+3 > len(b) {
			return 0, fmt.Errorf("zstd frame cut at byte %d", n)
		}
		h := int(b[n]) | int(b[n+1])<<8 | int(b[n+2])<<16
		last, typ, size := h&1 != 0, (h>>1)&3, h>>3
		n += 3
		switch typ {
		case 0, 2: // raw, compressed
			n += size
		case 1: // RLE: one byte repeated size times
			n++
		default:
			return 0, fmt.Errorf("reserved zstd block type at byte %d", n-3)
		}
		if last {
			break
		}
	}
	if checksum {
		n += 4
	}
	if n > len(b) {
		return 0, fmt.Errorf("zstd frame of %d bytes in %d", n, len(b))
	}
	return n, nil
}
