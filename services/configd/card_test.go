package configd

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/config"
)

// privateMountsEnv names the test that this test binary, re-executed in a
// mount namespace of its own, is to run.
const privateMountsEnv = "FLASHGATE_CONFIGD_TEST_PRIVATE_MOUNTS"

// inPrivateMounts runs the calling test again in a child process with a
// mount namespace of its own and private mounts, and reports whether the
// caller is that child, which then goes on with the test. A mount made
// there never enters the host's mount table, and goes away with the
// child even if it is killed before its cleanups run (a test timeout).
func inPrivateMounts(t *testing.T) bool {
	t.Helper()
	if os.Getenv(privateMountsEnv) == t.Name() {
		return true
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (it mounts a tmpfs to stand in for the config partition)")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), privateMountsEnv+"="+t.Name())
	// Go makes the new namespace's mounts private (MS_REC|MS_PRIVATE on
	// /), so nothing propagates back to the host.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a mount namespace of its own: %v\n%s", t.Name(), err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s did not run in the mount namespace of its own:\n%s", t.Name(), out)
	}
	return false
}

// mountReadOnlyTmpfs mounts a small tmpfs read-only and nosuid on a new
// directory, as PID 1 mounts the config partition, and unmounts it at the
// end of the test. Call it in the child of inPrivateMounts only.
func mountReadOnlyTmpfs(t *testing.T) string {
	t.Helper()
	if os.Getenv(privateMountsEnv) != t.Name() {
		t.Fatal("mountReadOnlyTmpfs outside inPrivateMounts would mount on the host")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4m"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", dir, err)
	}
	return dir
}

func writable(dir string) error {
	f, err := os.CreateTemp(dir, "probe")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

func TestRemountCard(t *testing.T) {
	if !inPrivateMounts(t) {
		return
	}
	dir := mountReadOnlyTmpfs(t)
	if !isMountPoint(dir) {
		t.Fatalf("%s not seen as a mount point", dir)
	}
	if err := writable(dir); !errors.Is(err, unix.EROFS) {
		t.Fatalf("read-only mount is writable: %v", err)
	}
	card := RemountCard{Dir: dir}
	if err := card.BeginWrite(); err != nil {
		t.Fatal(err)
	}
	if err := writable(dir); err != nil {
		t.Fatalf("after BeginWrite: %v", err)
	}
	if err := card.EndWrite(); err != nil {
		t.Fatal(err)
	}
	if err := writable(dir); !errors.Is(err, unix.EROFS) {
		t.Fatalf("after EndWrite the mount is writable: %v", err)
	}
	var st unix.Statfs_t
	unix.Statfs(dir, &st)
	if st.Flags&unix.ST_NOSUID == 0 || st.Flags&unix.ST_NODEV == 0 {
		t.Errorf("remounts dropped nosuid/nodev: flags %#x", st.Flags)
	}

	// A store on the read-only partition: it works, and the partition is
	// read-only again after every write.
	s, err := config.Open(filepath.Join(dir, "config.db"), config.Options{Card: card})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SetPath("", "system.hostname", "on-card"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit("test", "on a read-only card"); err != nil {
		t.Fatal(err)
	}
	if err := writable(dir); !errors.Is(err, unix.EROFS) {
		t.Fatalf("card left writable after a commit: %v", err)
	}
	if h, err := s.History(); err != nil || len(h) != 2 {
		t.Fatalf("history read from the read-only card: %d, %v", len(h), err)
	}
}

func TestIsMountPoint(t *testing.T) {
	if !isMountPoint("/proc") {
		t.Error("/proc is not seen as a mount point")
	}
	if isMountPoint(t.TempDir()) {
		t.Error("a plain directory is seen as a mount point")
	}
}
