package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/images"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/services/netd"
	"github.com/flashgate/flashgate/upgrade/remote"
	"github.com/strongswan/govici/vici"
)

// upgradeNet is the network of TestUpgrade's box: the e2e lab (doc.go),
// with the box in appliance A's place and strongSwan's charon as the
// site C it makes a tunnel with:
//
//	hostA 10.10.1.2 ─ brlana ─ box (eth1 10.10.1.1 + 192.168.1.1, eth0 10.10.0.1) ─ brwan ─ gwC 10.10.0.3 (charon) ─ hostC 10.10.3.2
//
// The box's WAN port keeps its default, DHCP, as behind an ISP's router:
// gwC runs a DHCP server (netd's own, the one the box runs on its LAN)
// whose only address is 10.10.0.1, so every boot of the box must take its
// lease again before the tunnel can come back, and the test boot's health
// check waits for it ("every port that had an IPv4 address").
//
// remote.Box, which the upgrade tests drive the box with as `flashgate
// upgrade` does, dials the URL it is given from the test process's own
// network namespace, where the lab's addresses do not exist: port is a
// TCP forward on the host's loopback to the box's web UI, each connection
// dialled from hostA (so the box sees a LAN client, as its firewall
// wants).
type upgradeNet struct {
	lab            *Lab
	wanTap, lanTap string
	mac            byte
	port           int
	charon         *testnet.Charon
	dhcp           *netd.DHCPServer // the box's WAN lease
}

// upgradeTunnel is the tunnel the box initiates to the strongSwan site.
const upgradeTunnel = "to-c"

func newUpgradeNet(t testing.TB) *upgradeNet {
	t.Helper()
	testnet.RequireRoot(t)
	p := testnet.Prefix()
	macSeed++
	n := &upgradeNet{lab: NewLab(t), wanTap: p + "w", lanTap: p + "l", mac: macSeed}
	n.port = forwardLoopback(t, n.lab.HostA, net.JoinHostPort(firstBootLAN.String(), "443"))
	n.dhcp = serveWANLease(t, n.lab.GwC, "wan0")
	return n
}

// serveWANLease runs netd's DHCP server in ns on link (gwC's WAN port,
// 10.10.0.3/24) with wanA as its only address, until the test ends.
func serveWANLease(t testing.TB, ns *testnet.NS, link string) *netd.DHCPServer {
	t.Helper()
	srv, err := netd.NewScopeServer(netd.DHCPScope{Link: link, Address: netip.PrefixFrom(wanC, 24),
		First: wanA, Last: wanA, LeaseTime: config.DefaultLeaseTime})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// Serve makes its socket in the namespace of the thread it runs on.
	go func() { done <- ns.Do(func() error { return srv.Serve(ctx) }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Logf("the WAN's DHCP server: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Logf("the WAN's DHCP server did not stop within 10 s")
		}
	})
	// It fails at once if it cannot open its port.
	select {
	case err := <-done:
		t.Fatalf("the WAN's DHCP server in %s: %v", ns.Name, err)
	case <-time.After(200 * time.Millisecond):
	}
	return srv
}

// start boots l's card in qemu inside the lab's switch namespace, its WAN
// port on brwan and its LAN port on brlana. Guest reboots (upgrades,
// panics) stay in this qemu, and so on these ports.
func (n *upgradeNet) start(l *upgradeLab) error {
	tap := func(name string) string { return "tap,ifname=" + name + ",script=no,downscript=no" }
	vm, err := images.StartVM(images.QEMUConfig{
		Board: l.board, Image: l.card, Netns: n.lab.Switch.Name,
		NetDevs: []string{tap(n.wanTap), tap(n.lanTap)}, MACSeed: n.mac,
	}, upgradeVMLimit)
	if err != nil {
		return fmt.Errorf("start the upgrade box in the lab: %w", err)
	}
	l.vm = vm
	n.lab.plug(l.tb, n.wanTap, "brwan")
	n.lab.plug(l.tb, n.lanTap, "brlana")
	return nil
}

// forwardLoopback listens on a free port of 127.0.0.1 in the test's own
// namespace and joins every connection to dst, dialled inside ns. It stops,
// with the connections it carries, when the test ends.
func forwardLoopback(t testing.TB, ns *testnet.NS, dst string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("loopback forward to %s in %s: %v", dst, ns.Name, err)
	}
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	track := func(c net.Conn, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			open[c] = true
		} else {
			delete(open, c)
		}
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed at cleanup
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				track(c, true)
				defer track(c, false)
				var up net.Conn
				if err := ns.Do(func() error {
					var err error
					up, err = net.DialTimeout("tcp", dst, 5*time.Second)
					return err
				}); err != nil {
					return // the client sees its connection closed, as from a box not answering yet
				}
				defer up.Close()
				track(up, true)
				defer track(up, false)
				done := make(chan struct{}, 2)
				go func() { io.Copy(up, c); done <- struct{}{} }()
				go func() { io.Copy(c, up); done <- struct{}{} }()
				// One direction ending ends both: a box that reboots
				// sends no FIN, and HTTP needs no half-closed stream.
				<-done
				c.Close()
				up.Close()
				<-done
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// configureTunnel gives the box its LAN address on the lab and a tunnel it
// initiates from its WAN lease to the strongSwan site, through the JSON API as an admin
// would, and starts that site's charon. charon checks the box with DPD
// every 5 s, so that the IKE_SA of a box that rebooted is gone from it
// before the box's new one comes (strongSwan here keeps duplicate SAs:
// unique = never).
func (n *upgradeNet) configureTunnel(t testing.TB, box *remote.Box) {
	t.Helper()
	n.charon = testnet.StartCharon(t, n.lab.GwC, testnet.CharonConn{
		Name: "to-box", LocalAddr: wanC, RemoteAddr: wanA, LocalID: "c.example", RemoteID: "a.example",
		PSK: pskAC, Proposals: "aes128-sha256-ecp256", ESPProposals: "aes128-sha256",
		LocalTS: []netip.Prefix{lanC}, RemoteTS: []netip.Prefix{lanA}, DPDDelay: 5 * time.Second,
	})
	ctx := context.Background()
	steps := []struct {
		path string
		body map[string]any
	}{
		{"/api/v1/interfaces/eth1", map[string]any{"addresses": []string{firstBootLAN.String() + "/24", "10.10.1.1/24"}}},
		{"/api/v1/tunnels/" + upgradeTunnel, map[string]any{
			"local_address": wanA.String(), "remote_address": wanC.String(),
			"local_id": "a.example", "remote_id": "c.example", "psk": pskAC,
			"local_subnets": []string{lanA.String()}, "remote_subnets": []string{lanC.String()},
			"ike_proposals": []string{"aes128-sha256-ecp256"}, "esp_proposals": []string{"aes128-sha256"},
			"start_action": "initiate",
		}},
	}
	for _, s := range steps {
		if err := box.Put(ctx, s.path, s.body); err != nil {
			t.Fatalf("PUT %s: %v", s.path, err)
		}
	}
	if err := box.Post(ctx, "/api/v1/commit", map[string]any{"message": "e2e: lab addresses and a tunnel to strongSwan"}); err != nil {
		t.Fatalf("commit the tunnel: %v", err)
	}
}

// tunnelPasses pings hostA, on the box's LAN, from hostC behind strongSwan:
// the only way between them is the tunnel (the box drops traffic of the
// tunnel's subnets that did not come out of it, and gwC has no route to
// the box's LAN but the tunnel's).
func (n *upgradeNet) tunnelPasses(count int) error {
	return testnet.Ping(n.lab.HostC, hostA, count)
}

// waitTunnelPasses waits up to timeout for a ping through the tunnel to be
// answered and returns about when the answer came: each try sends every
// 0.2 s until one is answered (the time returned) or, without an SA at
// strongSwan's end, gives up at once on "network unreachable" and is tried
// again 0.2 s later.
func (n *upgradeNet) waitTunnelPasses(timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		err := testnet.Ping(n.lab.HostC, hostA, 1)
		if err == nil {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("no ping hostC %v -> hostA %v through the tunnel answered within %v: %w", hostC, hostA, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitWebUI waits up to timeout for the box's web UI to answer an HTTPS
// request (any HTTP status: without a session the API says 401) from
// hostA, and returns when it answered.
func (n *upgradeNet) waitWebUI(timeout time.Duration) (time.Time, error) {
	api := NewAPI(n.lab.HostA, firstBootLAN.String())
	deadline := time.Now().Add(timeout)
	for {
		err := api.WaitListening(time.Until(deadline))
		if err == nil {
			err = api.Do("GET", "/api/v1/upgrade", nil, nil)
			var refused *APIError
			if err == nil || errors.As(err, &refused) {
				return time.Now(), nil
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("the box's web UI did not answer within %v: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tunnelState is the tunnel's state as the box's API says it.
func tunnelState(box *remote.Box) string {
	var v struct {
		Live struct {
			State  string `json:"state"`
			Reason string `json:"reason"`
		} `json:"live"`
	}
	if err := box.Get(context.Background(), "/api/v1/tunnels/"+upgradeTunnel, &v); err != nil {
		return fmt.Sprintf("GET /api/v1/tunnels/%s: %v", upgradeTunnel, err)
	}
	return v.Live.State + ": " + v.Live.Reason
}

// charonIKESAs describes strongSwan's IKE_SAs: which end initiated each
// and how long ago it was established, to tell who brought the tunnel
// back after the box rebooted (the box initiates; strongSwan re-initiates
// only after DPD declared the box dead, and gives up after one try).
func (n *upgradeNet) charonIKESAs() (string, error) {
	s, err := n.charon.Session()
	if err != nil {
		return "", err
	}
	defer s.Close()
	if err := s.Subscribe("list-sa"); err != nil {
		return "", fmt.Errorf("vici subscribe list-sa: %w", err)
	}
	// As testnet.Charon.SAs: events to a channel of our own, all in
	// before the command's response.
	events := make(chan vici.Event, 64)
	s.NotifyEvents(events)
	defer s.StopEvents(events)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Call(ctx, "list-sas", nil); err != nil {
		return "", fmt.Errorf("vici list-sas: %w", err)
	}
	var out []string
	for range len(events) {
		m := (<-events).Message
		for _, name := range m.Keys() {
			ike, ok := m.Get(name).(*vici.Message)
			if !ok {
				continue
			}
			state, _ := ike.Get("state").(string)
			established, _ := ike.Get("established").(string)
			by := "the box"
			if init, _ := ike.Get("initiator").(string); init == "yes" {
				by = "strongSwan"
			}
			children := 0
			if c, ok := ike.Get("child-sas").(*vici.Message); ok {
				children = len(c.Keys())
			}
			out = append(out, fmt.Sprintf("IKE_SA %s %s, initiated by %s, established %s s ago, %d CHILD_SA(s)", name, state, by, established, children))
		}
	}
	if len(out) == 0 {
		return "no IKE_SA", nil
	}
	return fmt.Sprint(out), nil
}
