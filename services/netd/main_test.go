package netd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
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
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
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

// The user netd runs as in TestMainInNamespace, as on the appliance
// (firmware/pid1 gives it 503; a number no host account is likely to have
// here).
const (
	testNetdUID = 64053
	testNetdGID = 64054
	// testNetdWebGID stands for the group of netd's socket for the web
	// UI, which netd is a member of (as on the appliance) to give it.
	testNetdWebGID = 64055
)

// TestMainInNamespace runs Main as the appliance does, in a namespace of
// its own with the qemu board's ports and no configd: as its own user with
// only CAP_NET_ADMIN, CAP_NET_BIND_SERVICE and CAP_NET_RAW, no_new_privs,
// and its socket and resolver file in a directory of its own. It must
// take a DHCP lease on the WAN (and write the lease's DNS servers),
// answer a LAN host's DHCP request on port 67, apply the board's default
// firewall, turn forwarding on, serve its API on the socket, and leave
// the firewall in place when stopped.
func TestMainInNamespace(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test: not in -short mode")
	}
	testnet.RequireRoot(t)
	p := testnet.Prefix()
	ns, peer := testnet.NewNS(t, p+"-nd"), testnet.NewNS(t, p+"-pe")
	testnet.Link(t, ns, "eth0", "", peer, "eth0", "10.77.0.1/24")
	testnet.Link(t, ns, "eth1", "", peer, "eth1", "")

	// The WAN's DHCP server, as an ISP's router: one address, a DNS server.
	isp, err := NewScopeServer(DHCPScope{Link: "eth0", Address: netip.MustParsePrefix("10.77.0.1/24"),
		First: netip.MustParseAddr("10.77.0.50"), Last: netip.MustParseAddr("10.77.0.50"), LeaseTime: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	isp.SetDNS([]netip.Addr{netip.MustParseAddr("10.77.0.53")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ispDone := make(chan error, 1)
	go func() { ispDone <- do(peer, func() error { return isp.Serve(ctx) }) }()
	defer func() {
		cancel()
		select {
		case <-ispDone:
		case <-time.After(10 * time.Second):
			t.Errorf("the WAN's DHCP server did not stop within 10 s")
		}
	}()

	// netd's own directory, as PID 1 makes it, and the test binary where
	// netd's user can run it (go test keeps it in a 0700 directory).
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runDir := filepath.Join(dir, "netd")
	if err := os.Mkdir(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(runDir, testNetdUID, testNetdGID); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "netd.test")
	if b, err := os.ReadFile(os.Args[0]); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(runDir, "netd.sock")
	// Not CAP_SYS_TIME, which the appliance gives it: the clock it
	// would set is the host's (the namespace has no route to an NTP
	// server today, but TestMainProcess refuses to run with it).
	testnet.RequireTool(t, "setpriv", "util-linux")
	const caps = "+net_admin,+net_bind_service,+net_raw"
	cmd := ns.Command("setpriv", "--reuid", strconv.Itoa(testNetdUID), "--regid", strconv.Itoa(testNetdGID), "--groups", strconv.Itoa(testNetdWebGID),
		"--inh-caps", "-all,"+caps, "--ambient-caps", "-all,"+caps, "--bounding-set", "-all,"+caps, "--no-new-privs", "--",
		exe, "-test.run=^TestMainProcess$")
	// The namespace shares the host's file system: without -resolv-conf
	// netd would rewrite the host's /etc/resolv.conf (it once did, and took
	// the CI machine's DNS with it). Main's resolver file is checked below.
	resolv := filepath.Join(runDir, "resolv.conf")
	hostResolv, hostResolvErr := os.ReadFile("/etc/resolv.conf")
	webSock := filepath.Join(runDir, "netd-web.sock")
	cmd.Env = append(os.Environ(), "NETD_TEST_MAIN_ARGS=-socket "+sock+" -web-socket "+webSock+" -web-group "+strconv.Itoa(testNetdWebGID)+" -configd "+filepath.Join(dir, "none.sock")+" -configd-wait 200ms -board qemu -resolv-conf "+resolv)
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
	// Not LastApply.FirewallReplaced: the WAN lease may already have
	// caused a second apply, which rightly replaces nothing. The
	// firewall in the kernel is checked below.
	if st.Board != "qemu" || !strings.Contains(st.ConfigSource, "defaults") || st.LastApply.Error != "" {
		t.Errorf("status: board %q, source %q, apply error %q", st.Board, st.ConfigSource, st.LastApply.Error)
	}
	// It runs as its user, with the three capabilities (bits 10, 12
	// and 13) and no_new_privs.
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)); err != nil {
		t.Error(err)
	} else {
		for _, want := range []string{fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d", testNetdUID, testNetdUID, testNetdUID, testNetdUID),
			"CapEff:\t0000000000003400", "CapPrm:\t0000000000003400", "NoNewPrivs:\t1"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("netd's /proc/PID/status:\n%s\nwant %q", b, want)
			}
		}
	}

	// The WAN lease, and its DNS server in the resolver file.
	waitfor.Cond(t, 30*time.Second, "a WAN lease in netd's status", func() bool {
		return get("/v1/status", &st) == nil && len(st.Leases) > 0
	})
	if l := st.Leases[0]; l.Link != "eth0" || l.Address != netip.MustParsePrefix("10.77.0.50/24") {
		t.Errorf("WAN lease %+v, want 10.77.0.50/24 on eth0", l)
	}
	waitfor.Cond(t, 10*time.Second, "the lease's DNS server in "+resolv, func() bool {
		b, err := os.ReadFile(resolv)
		return err == nil && strings.Contains(string(b), "nameserver 10.77.0.53")
	})
	if fi, err := os.Stat(resolv); err != nil || fi.Mode().Perm() != 0o644 || fi.Sys().(*syscall.Stat_t).Uid != testNetdUID {
		t.Errorf("%s: %v (%v), want netd's, 0644 (everybody's resolver reads it)", resolv, fi, err)
	}
	if fwd, err := ns.Output("cat", "/proc/sys/net/ipv4/ip_forward"); err != nil || strings.TrimSpace(fwd) != "1" {
		t.Errorf("ip_forward in netd's namespace: %q (%v), want 1", fwd, err)
	}

	// A LAN host asks netd's DHCP server (port 67).
	leases := make(chan *netdapi.Lease, 4)
	lanClient := &DHCPClient{Link: "eth1", OnLease: func(l *netdapi.Lease) { leases <- l },
		Open: func(link string) (c *nclient4.Client, err error) {
			err = do(peer, func() (err error) { c, err = nclient4.New(link, nclient4.WithTimeout(2*time.Second)); return err })
			return c, err
		}}
	go lanClient.Run(ctx)
	select {
	case got := <-leases:
		if got == nil || !netip.MustParsePrefix("192.168.1.0/24").Contains(got.Address.Addr()) || got.Router != netip.MustParseAddr("192.168.1.1") {
			t.Errorf("LAN lease %+v, want an address in 192.168.1.0/24 via 192.168.1.1", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the LAN host got no lease from netd's DHCP server in 30 s")
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

	// The web UI's socket: its group's, the kernel's links through the
	// contract's client (eth0 and eth1 with their roles, lo without one;
	// veths are no ports), and nothing else.
	var fi syscall.Stat_t
	if err := syscall.Stat(webSock, &fi); err != nil || fi.Gid != testNetdWebGID || fi.Mode&0o777 != 0o660 {
		t.Errorf("-web-socket %s: gid %d mode %o (%v), want %d and 0660", webSock, fi.Gid, fi.Mode&0o777, err, testNetdWebGID)
	}
	links, err := netdapi.New(webSock).Links(context.Background())
	roles := map[string]string{}
	for _, l := range links {
		roles[l.Name] = l.Role
		if l.Port || !l.Present {
			t.Errorf("link %s on the web socket: port %v present %v; want a present link that is no port (a veth, loopback)", l.Name, l.Port, l.Present)
		}
	}
	if err != nil || roles["eth0"] != "wan" || roles["eth1"] != "lan" || roles["lo"] != "" || len(links) != 3 {
		t.Errorf("GET /v1/links on the web socket: %+v, %v; want eth0 (wan), eth1 (lan) and lo", links, err)
	}
	webHC := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", webSock)
		}}}
	for _, route := range []string{netdapi.RouteStatus, netdapi.RouteFirewall, netdapi.RouteReconcile} {
		method, path, _ := strings.Cut(route, " ")
		req, _ := http.NewRequest(method, "http://netd"+path, nil)
		resp, err := webHC.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s on the web socket: %s, want 404 (the web UI gets the links only)", route, resp.Status)
		}
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
