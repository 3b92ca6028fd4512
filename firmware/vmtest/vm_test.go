package vmtest

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/images"
	"github.com/flashgate/flashgate/images/imagestest"
)

// vmLife bounds qemu's whole life in a test; each wait has its own limit.
const vmLife = 25 * time.Minute

const password = "vmtest-password-1"

// console is the serial console of one booted VM (imagestest's driver),
// with where its log is kept and the image's upgrade file.
type console struct {
	*imagestest.Serial
	log string // where the whole serial log is kept

	upgradeFile string // the image's .fgup, the same firmware as the box runs
}

// bootImage builds the qemu board's image from this tree and boots a copy;
// opts change qemu's configuration (a port forward to the web UI).
func bootImage(t testing.TB, opts ...func(*images.QEMUConfig)) *console {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: this test builds an image and boots it in qemu")
	}
	if err := images.CheckBuildTools(); err != nil {
		t.Fatalf("cannot build images on this host: %v", err)
	}
	board, err := boards.Lookup("qemu")
	if err != nil {
		t.Fatal(err)
	}
	if err := images.CheckQEMUTools(board.QEMU.Binary); err != nil {
		t.Fatalf("cannot boot images on this host: %v", err)
	}
	root, err := images.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "out", "test", "firmware")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	b := &images.Builder{RepoRoot: root, OutDir: out, CacheDir: filepath.Join(root, "out", "cache")}
	rep, err := b.Build(ctx, board, "vmtest")
	if err != nil {
		t.Fatalf("build the qemu image: %v", err)
	}
	card := filepath.Join(out, "card.img")
	if err := images.CopyCard(rep.Image, card); err != nil {
		t.Fatal(err)
	}
	// Without -no-reboot: a reboot and a watchdog reset must come back.
	qc := images.QEMUConfig{Board: board, Image: card}
	for _, o := range opts {
		o(&qc)
	}
	vm, err := images.StartVM(qc, vmLife)
	if err != nil {
		t.Fatal(err)
	}
	c := &console{Serial: imagestest.NewSerial(t, vm), log: filepath.Join(out, t.Name()+".log"), upgradeFile: rep.UpgradeFile}
	t.Cleanup(func() {
		vm.Stop()
		os.WriteFile(c.log, vm.Log(), 0o644)
		if t.Failed() {
			t.Logf("serial console in %s; its end:\n%s", c.log, imagestest.Tail(vm.Log(), 3000))
		}
	})
	return c
}

// login gets from boot to the expert shell: the first-boot password if the
// box asks for one, then the login prompt, then the shell — straight away,
// or through the console CLI's `shell` command when the firmware has the
// CLI (its prompt is "admin@<hostname>> ").
func (c *console) login() {
	c.TB.Helper()
	if c.Expect(10*time.Minute, "No admin password is set.", "login: ") == 0 {
		c.Expect(time.Minute, "New admin password: ")
		c.TypeLine(password)
		c.Expect(time.Minute, "Repeat password: ")
		c.TypeLine(password)
		c.Expect(2*time.Minute, "login: ")
	}
	c.TypeLine("admin")
	c.Expect(time.Minute, "Password: ")
	c.TypeLine(password)
	if c.Expect(time.Minute, "Expert shell (", "admin@") == 1 {
		c.Expect(time.Minute, "> ")
		c.TypeLine("shell")
		c.Expect(time.Minute, "Expert shell (")
	}
	c.Expect(time.Minute, "$ ")
}

var consoleRow = regexp.MustCompile(`(?m)^console +running +(\d+) +(\d+) `)
var pid1RSS = regexp.MustCompile(`pid 1: rss (\d+) KiB(?: \(pss (\d+) KiB, private (\d+) KiB\))?`)

// pid1Memory is PID 1's memory as `flashgate status` shows it, in KiB.
type pid1Memory struct{ rss, pss, private int }

// status runs `flashgate status` and returns the console getty's pid and
// restarts, and PID 1's memory.
func (c *console) status() (pid, restarts int, mem pid1Memory) {
	c.TB.Helper()
	from := c.At
	c.TypeLine("flashgate status")
	c.Expect(time.Minute, "orphans reaped")
	out := c.Since(from)
	m := consoleRow.FindStringSubmatch(out)
	r := pid1RSS.FindStringSubmatch(out)
	if m == nil || r == nil {
		c.TB.Fatalf("flashgate status did not show a running console and PID 1's RSS:\n%s", out)
	}
	pid, _ = strconv.Atoi(m[1])
	restarts, _ = strconv.Atoi(m[2])
	mem.rss, _ = strconv.Atoi(r[1])
	mem.pss, _ = strconv.Atoi(r[2])
	mem.private, _ = strconv.Atoi(r[3])
	return pid, restarts, mem
}

// systemSettings goes from the expert shell back to the CLI, commits a
// host name and a time zone, and checks from the shell that hostd applied
// both: the kernel's host name, and /etc/localtime, a TZif file whose
// footer is the zone's POSIX rule. It ends in the expert shell.
func (c *console) systemSettings() {
	c.TB.Helper()
	c.TypeLine("exit")
	c.Expect(time.Minute, "admin@")
	c.Expect(time.Minute, "> ")
	c.TypeLine("set system.hostname vmgw")
	c.Expect(time.Minute, "> ")
	c.TypeLine("set system.timezone Europe/Berlin")
	c.Expect(time.Minute, "> ")
	c.TypeLine(`commit "vm test: hostd applies the host name and time zone"`)
	c.Expect(time.Minute, "Committed revision")
	c.Expect(time.Minute, "> ")
	c.TypeLine("shell")
	c.Expect(time.Minute, "Expert shell (")
	c.Expect(time.Minute, "$ ")
	for _, check := range []struct{ cmd, want string }{
		{"cat /proc/sys/kernel/hostname", "\nvmgw"},
		{"cat /etc/localtime", "CET-1CEST,M3.5.0,M10.5.0/3"},
	} {
		var out string
		for try := 0; try < 10; try++ {
			if out = strings.ReplaceAll(c.Shell(check.cmd), "\r", ""); strings.Contains(out, check.want) {
				break
			}
			time.Sleep(time.Second)
		}
		if !strings.Contains(out, check.want) {
			c.TB.Errorf("10 s after the commit, %s shows %q; want %q (hostd applies it)", check.cmd, out, check.want)
		}
	}
}

// TestFirmwareInVM walks through the VM checks on one boot chain:
// kill a service and see it restarted and counted; stop the watchdog's
// petting and see the VM reset; reboot back to a login prompt; power off
// with qemu exiting 0.
func TestFirmwareInVM(t *testing.T) {
	c := bootImage(t)
	c.Expect(4*time.Minute, "flashgate init: pid 1, version vmtest")
	c.Expect(time.Minute, "flashgate init: board qemu")
	c.Expect(time.Minute, "flashgate init: watchdog: /dev/watchdog armed")
	c.login()

	pid, restarts, mem := c.status()
	t.Logf("PID 1 + supervisor at the first status: rss %d KiB, pss %d KiB, private %d KiB (target 8 MB)", mem.rss, mem.pss, mem.private)
	if restarts != 0 {
		t.Errorf("console restarted %d times before anything killed it", restarts)
	}

	// The box's own settings: committed at the CLI, applied by hostd
	// (host name, time zone) without a reboot.
	c.systemSettings()

	// Kill the getty (and with it this shell): the supervisor restarts
	// it and counts the restart.
	c.TypeLine("kill " + strconv.Itoa(pid))
	c.Expect(time.Minute, "flashgate init: console: signal: terminated after")
	c.Expect(time.Minute, "flashgate init: console: restarted (pid")
	c.login()
	newPID, restarts, _ := c.status()
	if restarts != 1 || newPID == pid {
		t.Errorf("after kill %d: console pid %d with %d restarts; want a new pid and 1 restart", pid, newPID, restarts)
	}

	// The watchdog test hook: the board must reset by itself.
	c.TypeLine("flashgate watchdog stop-petting")
	c.Expect(time.Minute, "watchdog petting stopped")
	c.Expect(3*time.Minute, "flashgate init: pid 1, version vmtest")
	c.login()

	c.TypeLine("flashgate reboot")
	c.Expect(time.Minute, "flashgate init: reboot: stopping services")
	c.Expect(time.Minute, "flashgate init: rebooting")
	c.Expect(4*time.Minute, "flashgate init: pid 1, version vmtest")
	c.login()

	c.TypeLine("flashgate poweroff")
	c.Expect(time.Minute, "flashgate init: powering off")
	// qemu exits by itself (ACPI power-off); its exit status is images'
	// to report: WaitFor fails with it once qemu is gone.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, _, err := c.VM.WaitFor(ctx, c.At, "this marker is never printed")
	if err == nil || !strings.Contains(err.Error(), "qemu exited (<nil>)") {
		t.Errorf("after poweroff: %v; want qemu to exit with status 0", err)
	}
}

// BenchmarkPID1IdleQEMU boots the qemu image, logs in, leaves the box idle
// for idleWait with all its services running, and reports PID 1 +
// supervisor's memory from `flashgate status`: rss_KiB (smaps_rollup's Rss, what
// boot.qemu.rss_init_kb asks for), and pss_KiB and private_KiB, since most
// of the RSS is the firmware binary's initramfs pages that every service
// shares. One boot is one measurement: run it with -benchtime 1x.
func BenchmarkPID1IdleQEMU(b *testing.B) {
	const idleWait = 15 * time.Second
	var mem pid1Memory
	for i := 0; i < b.N; i++ {
		c := bootImage(b)
		c.login()
		time.Sleep(idleWait)
		_, _, mem = c.status()
		c.VM.Stop()
	}
	b.ReportMetric(float64(mem.rss), "rss_KiB")
	b.ReportMetric(float64(mem.pss), "pss_KiB")
	b.ReportMetric(float64(mem.private), "private_KiB")
}
