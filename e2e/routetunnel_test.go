package e2e

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/internal/testnet"
)

// TestRouteTunnelInVM: one appliance (kernel IPsec) with a route-based
// tunnel to the strongSwan site, configured through the web UI's API as
// docs/tunnels.md shows it: mode route, interface ipsec0 with the cloud's
// MTU of 1399 and an inner /30, no subnets (any-to-any selectors, which
// strongSwan narrows to its own), and a static route to the site's LAN
// through ipsec0. The appliance's kernel makes ipsec0 an XFRM interface;
// hostA reaches hostC by that route, a TCP SYN from hostA arrives at hostC
// with its MSS clamped to 1359, and when strongSwan takes the tunnel down
// the route through ipsec0 goes with it.
func TestRouteTunnelInVM(t *testing.T) {
	if testing.Short() {
		t.Skip("boots an appliance in qemu")
	}
	testnet.RequireRoot(t)
	image := buildImage(t)
	lab := NewLab(t)
	a := NewAppliance(t, lab, "A", image, "brlana", lab.HostA)
	a.WaitLogin(t, adminPassword, true)
	api := NewAPI(lab.HostA, firstBootLAN.String())
	if err := api.WaitLogin("admin", adminPassword, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct {
		path string
		body map[string]any
	}{
		{"/api/v1/interfaces/eth0", map[string]any{"addressing": "static", "addresses": []string{wanA.String() + "/24"}}},
		{"/api/v1/interfaces/eth1", map[string]any{"addresses": []string{"192.168.1.1/24", "10.10.1.1/24"}}},
		{"/api/v1/tunnels/to-c", map[string]any{
			"mode": "route", "interface": "ipsec0", "mtu": "1399", "inner_addresses": []string{"169.254.10.2/30"},
			"local_address": wanA.String(), "remote_address": wanC.String(), "local_id": "a.example", "remote_id": "c.example",
			"psk": pskAC, "local_subnets": []string{}, "remote_subnets": []string{},
			"ike_proposals": []string{"aes128-sha256-ecp256"}, "esp_proposals": []string{"aes128-sha256"},
			"start_action": "respond",
		}},
		{"/api/v1/routes/site-c", map[string]any{"destination": lanC.String(), "interface": "ipsec0", "metric": "100"}},
	} {
		if err := api.Do("PUT", st.path, st.body, nil); err != nil {
			t.Fatalf("PUT %s: %v", st.path, err)
		}
	}
	if err := api.Do("POST", "/api/v1/commit", map[string]any{"message": "e2e: a route tunnel to the strongSwan site"}, nil); err != nil {
		t.Fatal(err)
	}
	charon := testnet.StartCharon(t, lab.GwC, testnet.CharonConn{
		Name: "to-a", LocalAddr: wanC, RemoteAddr: wanA, LocalID: "c.example", RemoteID: "a.example",
		PSK: pskAC, Proposals: "aes128-sha256-ecp256", ESPProposals: "aes128-sha256",
		LocalTS: []netip.Prefix{lanC}, RemoteTS: []netip.Prefix{lanA},
	})
	deadline := time.Now().Add(90 * time.Second)
	for charon.Initiate("to-a-net") != nil {
		if time.Now().After(deadline) {
			t.Fatalf("strongSwan could not bring up the tunnel to A\n%s", consoleReport(t, a, api))
		}
		time.Sleep(2 * time.Second)
	}
	st := waitUp(t, a, api, time.Minute, "to-c")["to-c"]
	if st.Status.DataPlane != "xfrm" {
		t.Errorf("data plane %q, want xfrm", st.Status.DataPlane)
	}
	// The console's ip is u-root's: "xfrmi if_id 1".
	routed := func(out string) bool { return routedVia(out, lanC, "ipsec0") }
	out := a.Shell(t, adminPassword, "ip -d link show ipsec0", "ip route")
	for _, want := range []string{"xfrmi if_id 1", "mtu 1399"} {
		if !strings.Contains(out, want) {
			t.Errorf("the appliance's console lacks %q:\n%s", want, out)
		}
	}
	if !routed(out) {
		t.Errorf("no route to %v through ipsec0 on the appliance:\n%s", lanC, out)
	}
	mss := synMSS(t, lab.HostC, 5301)
	if err := testnet.Ping(lab.HostA, hostC, 3); err != nil {
		t.Fatalf("hostA -> hostC by the route through ipsec0: %v\n%s", err, consoleReport(t, a, api))
	}
	// A TCP connection attempt is enough: the SYN is what is clamped.
	lab.HostA.Do(func() error {
		c, err := net.DialTimeout("tcp4", netip.AddrPortFrom(hostC, 5301).String(), 3*time.Second)
		if err == nil {
			c.Close()
		}
		return nil
	})
	for deadline := time.Now().Add(5 * time.Second); mss() == 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if got := mss(); got != 1359 {
		t.Errorf("a TCP SYN from hostA arrived at hostC with MSS %d, want 1359 (clamped to ipsec0's MTU 1399)", got)
	}
	if out, err := charon.Swanctl("--terminate", "--ike", "to-a"); err != nil {
		t.Fatalf("swanctl --terminate: %v\n%s", err, out)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		out := a.Shell(t, adminPassword, "ip route")
		if !routed(out) && strings.Contains(out, "10.10.1.0/24") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the route through ipsec0 stayed after strongSwan deleted the tunnel:\n%s", out)
		}
		time.Sleep(2 * time.Second)
	}
	// The same boot goes on to the AWS shape.
	checkRouteFailover(t, lab, a, api, charon)
}

// wanC2 is the strongSwan site's second outer address: AWS gives each of a
// connection's two tunnels its own endpoint.
var wanC2 = netip.MustParseAddr("10.10.0.4")

// checkRouteFailover: the appliance gets a second route tunnel to the
// strongSwan site, at its second outer address (ipsec1, its route to the
// site's LAN at metric 200 behind ipsec0's 100), both initiated by the
// appliance with DPD every second, dead after 3 s. With both up ipsec0
// carries hostA's traffic to hostC. Then tunnel 1's peer side dies without
// a word (the site drops everything to and from its first address, and
// strongSwan forgets the tunnel): the appliance's DPD must notice, its
// route through ipsec0 goes, and ipsec1 carries the traffic. When the
// first address answers again the appliance brings tunnel 1 back up, and
// the traffic returns to ipsec0. Which tunnel carried a ping is read from
// the appliance's SA counters (the kernel's).
func checkRouteFailover(t *testing.T, lab *Lab, a *Appliance, api *API, charon *testnet.Charon) {
	mustRun(t, lab.GwC, "ip", "addr", "add", wanC2.String()+"/24", "dev", "wan0")
	conn := func(name string, local netip.Addr, id string) testnet.CharonConn {
		return testnet.CharonConn{
			Name: name, LocalAddr: local, RemoteAddr: wanA, LocalID: id, RemoteID: "a.example",
			PSK: pskAC, Proposals: "aes128-sha256-ecp256", ESPProposals: "aes128-sha256",
			LocalTS: []netip.Prefix{lanC}, RemoteTS: []netip.Prefix{lanA},
		}
	}
	if err := charon.Load(conn("to-a", wanC, "c.example"), conn("to-a2", wanC2, "c2.example")); err != nil {
		t.Fatal(err)
	}
	dpd := map[string]any{"start_action": "initiate", "dpd_interval": "1s", "dpd_timeout": "3s"}
	tunnel2 := map[string]any{
		"mode": "route", "interface": "ipsec1", "mtu": "1399", "inner_addresses": []string{"169.254.11.2/30"},
		"local_address": wanA.String(), "remote_address": wanC2.String(), "local_id": "a.example", "remote_id": "c2.example",
		"psk": pskAC, "local_subnets": []string{}, "remote_subnets": []string{},
		"ike_proposals": []string{"aes128-sha256-ecp256"}, "esp_proposals": []string{"aes128-sha256"},
	}
	for k, v := range dpd {
		tunnel2[k] = v
	}
	for _, st := range []struct {
		path string
		body map[string]any
	}{
		{"/api/v1/tunnels/to-c", dpd},
		{"/api/v1/tunnels/to-c2", tunnel2},
		{"/api/v1/routes/site-c-2", map[string]any{"destination": lanC.String(), "interface": "ipsec1", "metric": "200"}},
	} {
		if err := api.Do("PUT", st.path, st.body, nil); err != nil {
			t.Fatalf("PUT %s: %v", st.path, err)
		}
	}
	if err := api.Do("POST", "/api/v1/commit", map[string]any{"message": "e2e: a second route tunnel, AWS-style"}, nil); err != nil {
		t.Fatal(err)
	}
	waitUp(t, a, api, 2*time.Minute, "to-c", "to-c2")
	out := a.Shell(t, adminPassword, "ip route")
	for _, dev := range []string{"ipsec0", "ipsec1"} {
		if !routedVia(out, lanC, dev) {
			t.Errorf("with both tunnels up, no route to %v through %s:\n%s", lanC, dev, out)
		}
	}
	waitCarrier(t, a, lab, api, "to-c", time.Now(), time.Minute)

	for _, cmd := range [][]string{
		{"nft", "add", "table", "ip", "fgkill"},
		{"nft", "add", "chain", "ip", "fgkill", "in", "{ type filter hook input priority -10; }"},
		{"nft", "add", "chain", "ip", "fgkill", "out", "{ type filter hook output priority -10; }"},
		{"nft", "add", "rule", "ip", "fgkill", "in", "ip", "daddr", wanC.String(), "drop"},
		{"nft", "add", "rule", "ip", "fgkill", "out", "ip", "saddr", wanC.String(), "drop"},
	} {
		mustRun(t, lab.GwC, cmd...)
	}
	died := time.Now()
	charon.Swanctl("--terminate", "--ike", "to-a", "--force", "--timeout", "1") // its DELETE is dropped
	took := waitCarrier(t, a, lab, api, "to-c2", died, time.Minute)
	t.Logf("traffic moved to tunnel 2 (ipsec1) %.1f s after tunnel 1's peer side died (DPD every 1 s, dead after 3 s)", took.Seconds())
	if v := tunnels(t, api)["to-c"]; v.State == "up" {
		t.Errorf("tunnel 1 is up with its peer side dead: %+v", v)
	}
	if out := a.Shell(t, adminPassword, "ip route"); routedVia(out, lanC, "ipsec0") || !routedVia(out, lanC, "ipsec1") {
		t.Errorf("with tunnel 1 down, the routes to %v should be through ipsec1 only:\n%s", lanC, out)
	}

	mustRun(t, lab.GwC, "nft", "delete", "table", "ip", "fgkill")
	revived := time.Now()
	waitUp(t, a, api, 3*time.Minute, "to-c")
	back := waitCarrier(t, a, lab, api, "to-c", revived, time.Minute)
	t.Logf("traffic back on tunnel 1 (ipsec0) %.1f s after its peer side came back (the appliance's retry backoff)", back.Seconds())
}

// routedVia reports whether the output of ip route has a route to dst
// through dev. The console's ip is u-root's, which lists routes whole.
func routedVia(out string, dst netip.Prefix, dev string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), dst.String()) && strings.Contains(l, "dev "+dev) {
			return true
		}
	}
	return false
}

// waitCarrier pings hostC from hostA until a ping passes and the named
// tunnel's CHILD_SAs sent it (the appliance's counters), and returns how
// long after start that was.
func waitCarrier(t *testing.T, a *Appliance, lab *Lab, api *API, name string, start time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	sent := func() (n uint64) {
		for _, c := range tunnels(t, api)[name].Status.Children {
			n += c.PacketsOut
		}
		return n
	}
	for time.Since(start) < timeout {
		before := sent()
		if testnet.Ping(lab.HostA, hostC, 1) == nil && sent() > before {
			return time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no ping from hostA to hostC carried by %s within %v: %+v\n%s", name, timeout, tunnels(t, api), consoleReport(t, a, api))
	return 0
}

// synMSS captures, in ns, the MSS option of the first TCP SYN to port (0
// while none has arrived).
func synMSS(t *testing.T, ns *testnet.NS, port uint16) func() int {
	t.Helper()
	var fd int
	err := ns.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0x0008 /* htons(ETH_P_IP) */)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	var mss atomic.Int32
	var stop atomic.Bool
	done := make(chan struct{})
	t.Cleanup(func() { stop.Store(true); <-done; unix.Close(fd) })
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for !stop.Load() {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil || n < 40 || buf[0]>>4 != 4 || buf[9] != unix.IPPROTO_TCP {
				continue
			}
			tcp := buf[int(buf[0]&0xf)*4 : n]
			if len(tcp) < 20 || binary.BigEndian.Uint16(tcp[2:]) != port || tcp[13]&0x02 == 0 {
				continue
			}
			opts := tcp[20:min(len(tcp), int(tcp[12]>>4)*4)]
			for i := 0; i+1 < len(opts) && opts[i] != 0; {
				if opts[i] == 1 {
					i++
					continue
				}
				if opts[i] == 2 && i+4 <= len(opts) {
					mss.CompareAndSwap(0, int32(binary.BigEndian.Uint16(opts[i+2:])))
				}
				if opts[i+1] < 2 {
					break
				}
				i += int(opts[i+1])
			}
		}
	}()
	return func() int { return int(mss.Load()) }
}
