// Command vmcheck runs the xfrm namespace tests on a real board kernel
// without building an appliance image: it compiles the package's test
// binary for 386, packs it as /init into an initramfs with the kernel
// modules ESP needs (from an extracted Debian kernel package), boots that in
// qemu-system-i386 and reports the result the binary prints on the serial
// console.
//
//	go run ./ipsec/xfrm/vmcheck -kernel out/cache/kernels/linux-image-6.1.0-50-686_6.1.176-1_i386
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/u-root/u-root/pkg/cpio"
)

// modules are what kernel ESP in tunnel mode needs on Debian's 686 kernel
// beyond the built-in crypto (aes, cbc, hmac, sha1, sha256): without
// modprobe in the initramfs nothing is loaded on demand, and seqiv and
// echainiv fail with ENOENT unless drbg provides stdrng.
var modules = []string{
	"jitterentropy_rng", "drbg", "veth", "xfrm_user", "esp4",
	"authenc", "echainiv", "seqiv", "ctr", "ghash-generic", "gcm",
}

const marker = "xfrm-vmtest: exit status"

func main() {
	kernelDir := flag.String("kernel", "", "extracted Debian kernel package (boot/vmlinuz-*, lib/modules/<version>/ with modules.dep)")
	timeout := flag.Duration("timeout", 5*time.Minute, "bound on the whole VM run")
	keep := flag.Bool("keep", false, "keep the work directory")
	flag.Parse()
	if *kernelDir == "" {
		fmt.Fprintln(os.Stderr, "vmcheck: -kernel is required")
		os.Exit(2)
	}
	if err := run(*kernelDir, *timeout, *keep); err != nil {
		fmt.Fprintf(os.Stderr, "vmcheck: %v\n", err)
		os.Exit(1)
	}
}

func run(kernelDir string, timeout time.Duration, keep bool) error {
	qemu, err := exec.LookPath("qemu-system-i386")
	if err != nil {
		return fmt.Errorf("qemu-system-i386 not installed (apt-get install qemu-system-x86): %w", err)
	}
	vmlinuz, err := onlyMatch(filepath.Join(kernelDir, "boot", "vmlinuz-*"))
	if err != nil {
		return err
	}
	modDir, err := onlyMatch(filepath.Join(kernelDir, "lib", "modules", "*"))
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
	initrd := filepath.Join(work, "initrd.gz")
	if err := writeInitramfs(initrd, testBin, modDir); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, "-M", "pc", "-cpu", "pentium3", "-m", "256",
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

func onlyMatch(pattern string) (string, error) {
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) != 1 {
		return "", fmt.Errorf("%s: expected exactly one match, found %d", pattern, len(m))
	}
	return m[0], nil
}

// writeInitramfs packs /init (the test binary), /modules.load and the
// closure of the modules with modules.dep.
func writeInitramfs(path, testBin, modDir string) error {
	release := filepath.Base(modDir)
	depPath := filepath.Join(modDir, "modules.dep")
	dep, err := os.ReadFile(depPath)
	if err != nil {
		return fmt.Errorf("%w (run depmod -b on the extracted package)", err)
	}
	files := map[string][]string{}
	for _, line := range strings.Split(string(dep), "\n") {
		file, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		name := strings.ReplaceAll(strings.TrimSuffix(filepath.Base(file), ".ko"), "-", "_")
		files[name] = append([]string{file}, strings.Fields(rest)...)
	}
	need := map[string]bool{}
	for _, m := range modules {
		fs, ok := files[strings.ReplaceAll(m, "-", "_")]
		if !ok {
			continue // built into this kernel
		}
		for _, f := range fs {
			need[f] = true
		}
	}

	bin, err := os.ReadFile(testBin)
	if err != nil {
		return err
	}
	recs := []cpio.Record{
		cpio.StaticFile("init", string(bin), 0o755),
		cpio.StaticFile("modules.load", strings.Join(modules, "\n")+"\n", 0o644),
		cpio.StaticFile(filepath.Join("lib/modules", release, "modules.dep"), string(dep), 0o644),
	}
	for _, extra := range []string{"modules.builtin", "modules.order"} {
		if b, err := os.ReadFile(filepath.Join(modDir, extra)); err == nil {
			recs = append(recs, cpio.StaticFile(filepath.Join("lib/modules", release, extra), string(b), 0o644))
		}
	}
	for f := range need {
		b, err := os.ReadFile(filepath.Join(modDir, f))
		if err != nil {
			return err
		}
		recs = append(recs, cpio.StaticFile(filepath.Join("lib/modules", release, f), string(b), 0o644))
	}
	var buf bytes.Buffer
	w := cpio.Newc.Writer(&buf)
	if err := cpio.WriteRecordsAndDirs(w, recs); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	if err := cpio.WriteTrailer(w); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	if _, err := io.Copy(zw, &buf); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}
