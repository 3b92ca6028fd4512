package xfrm

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/ipsec/hwcrypto"
	"golang.org/x/sys/unix"
)

// initMarker is what the test binary prints, as PID 1, when the tests are
// done: vmcheck reads it from the serial console.
const initMarker = "xfrm-vmtest: exit status"

// TestMain lets the compiled test binary boot as the init of a bare
// initramfs (see vmcheck): as PID 1 it mounts what the tests need, loads
// the modules listed in /modules.load, runs the namespace tests verbosely
// and powers the machine off. Run any other way it is an ordinary test main.
func TestMain(m *testing.M) {
	if !bootedByVMCheck() {
		os.Exit(m.Run())
	}
	for _, mnt := range []struct{ src, dst, fs string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"tmpfs", "/tmp", "tmpfs"}, {"devtmpfs", "/dev", "devtmpfs"},
	} {
		os.MkdirAll(mnt.dst, 0o755)
		if err := unix.Mount(mnt.src, mnt.dst, mnt.fs, 0, ""); err != nil {
			fmt.Printf("xfrm-vmtest: mount %s: %v\n", mnt.dst, err)
		}
	}
	if err := loadModules("/modules.load"); err != nil {
		fmt.Printf("xfrm-vmtest: %v\n", err)
	}
	flag.Set("test.v", "true")
	flag.Set("test.count", "1")
	flag.Set("test.run", "Harness|Kernel|Probe")
	code := m.Run()
	fmt.Printf("%s %d\n", initMarker, code)
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	os.Exit(code) // not reached unless the reboot call failed
}

// bootedByVMCheck reports whether this binary is the init of vmcheck's
// initramfs: PID 1, started as /init, beside /modules.load. Being PID 1 is
// not enough: in a container or under `unshare --pid --fork` the test
// binary can be PID 1 too, and the mounts below (a tmpfs on /tmp, devtmpfs
// on /dev) would then land on the host's file system. (/proc is not
// mounted yet, so the kernel's argv[0] stands in for /proc/self/exe.)
func bootedByVMCheck() bool {
	if os.Getpid() != 1 || os.Args[0] != "/init" {
		return false
	}
	_, err := os.Stat("/modules.load")
	return err == nil
}

func loadModules(list string) error {
	f, err := os.Open(list)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name := strings.TrimSpace(sc.Text()); name != "" {
			names = append(names, name)
		}
	}
	if err := sc.Err(); err != nil || len(names) == 0 {
		return err // flashgate's kernels build ESP in: nothing to load
	}
	k, err := hwcrypto.NewKernelModules("/")
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := k.Load(name); err != nil {
			fmt.Printf("xfrm-vmtest: %v\n", err)
		}
	}
	return nil
}
