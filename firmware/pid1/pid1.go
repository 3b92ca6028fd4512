// Package pid1 is the appliance's init: it mounts the kernel file systems,
// identifies the board, loads its modules, mounts the config partition,
// runs the supervisor, reaps zombies and powers the box off or reboots it.
// It must never exit.
package pid1

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// Main is PID 1's entry point. It never returns when running as PID 1.
func Main(args []string) int {
	mount("proc", "/proc", "proc", 0, "")
	mount("sysfs", "/sys", "sysfs", 0, "")
	mount("devtmpfs", "/dev", "devtmpfs", 0, "")
	cmdline, _ := os.ReadFile("/proc/cmdline")
	version, board := "unknown", "unknown"
	for _, f := range strings.Fields(string(cmdline)) {
		if v, ok := strings.CutPrefix(f, "flashgate.version="); ok {
			version = v
		}
		if v, ok := strings.CutPrefix(f, "flashgate.board="); ok {
			board = v
		}
	}
	fmt.Printf("flashgate init: pid 1, version %s\n", version)
	fmt.Printf("flashgate init: board %s\n", board)
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(-1, &ws, 0, nil); err != nil {
			time.Sleep(time.Second)
		}
	}
}

func mount(src, target, fstype string, flags uintptr, data string) {
	os.MkdirAll(target, 0o755)
	if err := syscall.Mount(src, target, fstype, flags, data); err != nil && err != syscall.EBUSY {
		fmt.Printf("flashgate init: mount %s: %v\n", target, err)
	}
}
