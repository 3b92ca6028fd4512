// Command vminit is the init of the initramfs in which `flashgate bench`
// runs a board build's benchmarks in qemu (bench.RunInVM): as PID 1 it
// mounts /proc, /sys, /dev and /tmp, runs /bench.test with the arguments in
// /bench.args (one a line), prints its exit status after Marker and powers
// the machine off. Anywhere else it refuses to run.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"
)

// Marker precedes the test binary's exit status on the console.
const Marker = "vmbench: exit status"

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "vminit: not PID 1: this is the init of the benchmark VM's initramfs")
		os.Exit(2)
	}
	for _, m := range []struct{ src, dst, fs string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"}, {"tmpfs", "/tmp", "tmpfs"},
	} {
		os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.fs, 0, ""); err != nil {
			fmt.Printf("vminit: mount %s: %v\n", m.dst, err)
		}
	}
	code := run()
	fmt.Printf("%s %d\n", Marker, code)
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	os.Exit(code)
}

func run() int {
	b, err := os.ReadFile("/bench.args")
	if err != nil {
		fmt.Printf("vminit: %v\n", err)
		return 1
	}
	var args []string
	for _, a := range strings.Split(string(b), "\n") {
		if a = strings.TrimSpace(a); a != "" {
			args = append(args, a)
		}
	}
	cmd := exec.Command("/bench.test", args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	cmd.Env = []string{"PATH=/", "HOME=/tmp", "TMPDIR=/tmp"}
	if err := cmd.Run(); err != nil {
		fmt.Printf("vminit: /bench.test: %v\n", err)
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		return 1
	}
	return 0
}
