package netd

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/waitfor"

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/internal/testnet"
)

// TestMainProcess is Main itself when TestMain starts this test binary in
// a namespace; it does nothing in a normal run.
func TestMainProcess(t *testing.T) {
	args := os.Getenv("NETD_TEST_MAIN_ARGS")
	if args == "" {
		return
	}
	// The clock is not namespaced: Main's NTP client steps and slews
	// the host's clock whenever a server answers (the defaults name
	// pool.ntp.org). TestMainInNamespace drops CAP_SYS_TIME; never run
	// Main here with it.
	if hasCapability(t, unix.CAP_SYS_TIME) {
		t.Fatal("refusing to run netd's Main with CAP_SYS_TIME: its NTP client would set the host's clock")
	}
	os.Exit(Main(strings.Fields(args)))
}

// hasCapability reports whether cap is in this process's effective set.
func hasCapability(t *testing.T, cap int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			eff, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				t.Fatalf("CapEff %q: %v", hex, err)
			}
			return eff&(1<<cap) != 0
		}
	}
	t.Fatal("/proc/self/status has no CapEff line")
	return false
}

// TestMainInNamespace runs Main as the appliance does, in a namespace of its own with
// the qemu board's ports and no configd: it must apply the board's default
// firewall, serve its API on the socket, and leave the firewall in place
// when stopped.
func TestMainInNamespace(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test: not in -short mode")
	}
	testnet.RequireRoot(t)
	p := testnet.Prefix()
	ns, peer := testnet.NewNS(t, p+"-nd"), testnet.NewNS(t, p+"-pe")
	testnet.Link(t, ns, "eth0", "", peer, "eth0", "")
	testnet.Link(t, ns, "eth1", "", peer, "eth1", "")
	dir := t.TempDir()
	sock := filepath.Join(dir, "netd.sock")
	// Without CAP_SYS_TIME (setpriv drops it from the bounding set, so
	// the test binary execs without it): the namespace has no route to an
	// NTP server today, but the clock it would set is the host's.
	testnet.RequireTool(t, "setpriv", "util-linux")
	cmd := ns.Command("setpriv", "--bounding-set", "-sys_time", "--inh-caps", "-sys_time", "--",
		os.Args[0], "-test.run=^TestMainProcess$")
	// The namespace shares the host's file system: without -resolv-conf
	// netd would rewrite the host's /etc/resolv.conf (it once did, and took
	// the CI machine's DNS with it). Main's resolver file is checked below.
	resolv := filepath.Join(dir, "resolv.conf")
	hostResolv, hostResolvErr := os.ReadFile("/etc/resolv.conf")
	cmd.Env = append(os.Environ(), "NETD_TEST_MAIN_ARGS=-socket "+sock+" -configd "+filepath.Join(dir, "none.sock")+" -configd-wait 200ms -board qemu -resolv-conf "+resolv)
	out, err := os.Create(filepath.Join(dir, "netd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "netd.log"))
			t.Logf("netd's log:\n%s", b)
		}
	}()

	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	get := func(path string, v any) error {
		resp, err := hc.Get("http://netd" + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(v)
	}
	var st netdapi.Status
	waitfor.Cond(t, 15*time.Second, "status with an applied configuration from netd's socket", func() bool {
		return get("/v1/status", &st) == nil && !st.LastApply.At.IsZero()
	})
	if st.Board != "qemu" || !strings.Contains(st.ConfigSource, "defaults") || !st.LastApply.FirewallReplaced {
		t.Errorf("status: board %q, source %q, firewall replaced %v", st.Board, st.ConfigSource, st.LastApply.FirewallReplaced)
	}
	if b, err := os.ReadFile(resolv); err != nil || !strings.Contains(string(b), "no DHCP lease") {
		t.Errorf("-resolv-conf %s: %q (%v), want netd's note that no WAN lease gives DNS servers", resolv, b, err)
	}
	if b, err := os.ReadFile("/etc/resolv.conf"); hostResolvErr == nil && (err != nil || !bytes.Equal(b, hostResolv)) {
		t.Errorf("the host's /etc/resolv.conf changed under the test: %q (%v)", b, err)
	}
	var lan *netdapi.LinkStatus
	for i := range st.Links {
		if st.Links[i].Name == "eth1" {
			lan = &st.Links[i]
		}
	}
	if lan == nil || !lan.Up || len(lan.Addresses) == 0 || !strings.HasPrefix(lan.Addresses[0], "192.168.1.1/24") {
		t.Errorf("eth1 (the qemu board's LAN port) should be up with 192.168.1.1/24: %+v", lan)
	}
	var fw netdapi.FirewallStatus
	if err := get("/v1/firewall", &fw); err != nil {
		t.Fatal(err)
	}
	if len(fw.Kernel) == 0 || len(fw.Kernel) != len(fw.Rules) || !strings.Contains(strings.Join(fw.Rules, "\n"), `iifname "eth1" meta l4proto tcp th dport 443`) {
		t.Errorf("firewall status: %d rules built, %d in the kernel:\n%s", len(fw.Rules), len(fw.Kernel), strings.Join(fw.Rules, "\n"))
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("netd exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("netd did not stop within 10 s of SIGTERM")
	}
	fd, err := unix.Open("/run/netns/"+ns.Name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	rules, err := NewNFTables(nftables.WithNetNSFd(fd)).Rules()
	if err != nil || len(rules) != len(fw.Kernel) {
		t.Errorf("after netd stopped the firewall must stay: %d rules (%v), want %d", len(rules), err, len(fw.Kernel))
	}
}
