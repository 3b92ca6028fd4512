package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/ike"
)

// The WAN probe: a namespace on the appliance's WAN switch, configured on
// the appliance as the peer of tunnel "wan", so that its IKE is allowed in
// and nothing else is.
var (
	wanProbe    = netip.MustParseAddr("10.10.0.9")
	probeSubnet = netip.MustParsePrefix("10.10.9.0/24")
	// The appliance's LAN on first boot; the tunnel's local subnet.
	firstBootLANNet = netip.MustParsePrefix("192.168.1.0/24")
)

const (
	pskWAN       = "e2e-psk-of-the-wan-probe-0123456789"
	applianceID  = "flashgate.example"
	probeID      = "probe.example"
	ikeProposal  = "aes128-sha256-ecp256"
	espProposal  = "aes128-sha256"
	probeTimeout = 3 * time.Second
)

// newWANProbe puts a namespace with address wanProbe on the lab's WAN
// switch (brwan), next to the appliances' WAN ports.
func newWANProbe(t *testing.T, lab *Lab) *testnet.NS {
	t.Helper()
	ns := testnet.NewNS(t, testnet.Prefix()+"-wp")
	testnet.Link(t, lab.Switch, "pw", "", ns, "wan0", wanProbe.String()+"/24")
	mustRun(t, lab.Switch, "ip", "link", "set", "pw", "master", "brwan")
	return ns
}

// setWANAddress gives the appliance's WAN port (eth0) a static address
// through the web UI's API, commits, and waits until the kernel has it.
func setWANAddress(t *testing.T, api *API, addr netip.Prefix) {
	t.Helper()
	if err := api.Do("PUT", "/api/v1/interfaces/eth0", map[string]any{"addressing": "static", "addresses": []string{addr.String()}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := api.Do("POST", "/api/v1/commit", map[string]any{"message": "e2e: static WAN address"}, nil); err != nil {
		t.Fatal(err)
	}
	var ifaces struct {
		Configured []struct {
			Config struct {
				Name string `json:"name"`
			} `json:"config"`
			Link *struct {
				Addresses []string `json:"addresses"`
			} `json:"link"`
		} `json:"configured"`
	}
	deadline := time.Now().Add(45 * time.Second)
	for {
		if err := api.Do("GET", "/api/v1/interfaces", nil, &ifaces); err == nil {
			for _, r := range ifaces.Configured {
				if r.Config.Name == "eth0" && r.Link != nil && slices.Contains(r.Link.Addresses, addr.String()) {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("eth0 does not have %s 45 s after the commit: interfaces %+v\n%s", addr, ifaces, diagnose(api))
		}
		time.Sleep(time.Second)
	}
}

// checkWANDefaults is issue 8's VM check of the default firewall, seen
// from the WAN probe: IKE from the configured peer is answered (a whole
// IKE_SA_INIT and IKE_AUTH, by our own IKE engine as the peer), while TCP to
// the web UI, HTTP and SSH ports and ICMP echo get no answer at all
// (dropped, not refused), and the LAN host still reaches the web UI and
// gets ping replies.
func checkWANDefaults(t *testing.T, lab *Lab, probe *testnet.NS, api *API, wan netip.Addr) {
	start := time.Now()
	up, err := negotiateIKE(probe, wan, 90*time.Second)
	if err != nil {
		t.Fatalf("IKE from the tunnel's peer %s to the appliance's WAN %s: %v\n%s", wanProbe, wan, err, diagnose(api))
	}
	t.Logf("IKE SA with the appliance established from the WAN in %.1f s (%s)", time.Since(start).Seconds(), up)

	var wg sync.WaitGroup
	for _, port := range []int{22, 80, 443} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := tcpProbe(probe, netip.AddrPortFrom(wan, uint16(port))); got != "" {
				t.Errorf("TCP %d from the WAN: %s; want no answer at all (the firewall drops it)", port, got)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := testnet.Ping(probe, wan, 2); err == nil {
			t.Errorf("ICMP echo from the WAN to %s was answered; want no reply", wan)
		}
	}()
	wg.Wait()

	// The other side of the same rules: from the LAN the box answers,
	// which also shows the probes above can see an answer.
	if got := tcpProbe(lab.HostA, netip.AddrPortFrom(firstBootLAN, 443)); got != "connected: the port is open" {
		t.Errorf("TCP 443 from the LAN host: %q; want connected (builtin:lan-webui)", got)
	}
	if err := testnet.Ping(lab.HostA, firstBootLAN, 2); err != nil {
		t.Errorf("ping from the LAN host to %s: %v; want replies (builtin:lan-ping)", firstBootLAN, err)
	}
	var sess struct {
		User string `json:"user"`
	}
	if err := api.Do("GET", "/api/v1/session", nil, &sess); err != nil || sess.User != "admin" {
		t.Errorf("web UI from the LAN host: session %+v, %v; want the admin's session", sess, err)
	}
}

// tcpProbe connects to dst from ns and says what answered: "" when nothing
// did within probeTimeout (a dropped SYN), otherwise what happened.
func tcpProbe(ns *testnet.NS, dst netip.AddrPort) string {
	var err error
	ns.Do(func() error {
		var c net.Conn
		c, err = net.DialTimeout("tcp", dst.String(), probeTimeout)
		if c != nil {
			c.Close()
		}
		return nil
	})
	switch {
	case err == nil:
		return "connected: the port is open"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused (a TCP RST: the box answered)"
	case errors.Is(err, os.ErrDeadlineExceeded) || isTimeout(err):
		return ""
	default:
		return fmt.Sprintf("answered with an error: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// negotiateIKE runs our IKE engine in ns as the appliance's peer and
// initiates an IKE SA with it; it returns once the IKE SA is up (the
// appliance answered IKE_SA_INIT and IKE_AUTH) or fails with why not.
func negotiateIKE(ns *testnet.NS, appliance netip.Addr, timeout time.Duration) (string, error) {
	local := netip.AddrPortFrom(wanProbe, 500)
	var conn *net.UDPConn
	if err := ns.Do(func() error {
		var err error
		conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(local))
		return err
	}); err != nil {
		return "", fmt.Errorf("IKE socket on %s: %w", local, err)
	}
	defer conn.Close()

	up := make(chan string, 1)
	failed := make(chan error, 4)
	ep, err := ike.NewEndpoint(ike.EndpointConfig{
		Send: func(pkt []byte, _, remote netip.AddrPort) error {
			_, err := conn.WriteToUDPAddrPort(pkt, remote)
			return err
		},
		// Only we initiate; anything the appliance starts is dropped.
		PeerFor: func(local, remote netip.AddrPort) *ike.PeerConfig { return nil },
		Events: ike.Events{
			IKEUp: func(sa *ike.IKESA) {
				select {
				case up <- fmt.Sprintf("%s, %s <-> %s", sa.Status().Proposal, sa.Status().Local, sa.Status().Remote):
				default:
				}
			},
			// The CHILD_SA's keys are not needed: zero them at once.
			ChildUp: func(c ike.ChildUp) { zeroChild(c.In, c.Out) },
			IKEDown: func(_ *ike.IKESA, reason error) {
				if reason != nil {
					failed <- reason
				}
			},
			Failure: func(_ *ike.PeerConfig, reason error) { failed <- reason },
		},
	})
	if err != nil {
		return "", err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return // closed
			}
			ep.HandleMessage(slices.Clone(buf[:n]), local, from)
		}
	}()
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				ep.Tick()
			}
		}
	}()

	ikeProps, err := ike.ParseProposals(ike.ProtoIKE, ikeProposal)
	if err != nil {
		return "", err
	}
	espProps, err := ike.ParseProposals(ike.ProtoESP, espProposal)
	if err != nil {
		return "", err
	}
	lid, err := ike.ParseIdentity(probeID)
	if err != nil {
		return "", err
	}
	rid, err := ike.ParseIdentity(applianceID)
	if err != nil {
		return "", err
	}
	cfg := &ike.PeerConfig{
		Name: "appliance", Local: local, Remote: netip.AddrPortFrom(appliance, 500),
		LocalID: lid, RemoteID: rid, PSK: []byte(pskWAN),
		IKEProposals: ikeProps, ESPProposals: espProps,
		LocalTS: []netip.Prefix{probeSubnet}, RemoteTS: []netip.Prefix{firstBootLANNet},
		// The appliance is emulated and slow: its first ECDH and the
		// kernel's ARP may take seconds.
		RetransmitTimeout: 2 * time.Second, RetransmitTries: 6,
	}
	sa, err := ep.Initiate(cfg)
	if err != nil {
		return "", err
	}
	select {
	case s := <-up:
		return s, nil
	case err := <-failed:
		// A refusal is an answer too, but not the one the configured
		// peer must get: report it.
		return "", fmt.Errorf("%w (IKE messages received from the appliance: %d)", err, ep.Stats.Received.Load())
	case <-time.After(timeout):
		sa.Delete()
		return "", fmt.Errorf("no IKE SA after %s (IKE messages received from the appliance: %d)", timeout, ep.Stats.Received.Load())
	}
}

func zeroChild(sas ...*ipsec.ChildSA) {
	for _, c := range sas {
		if c != nil {
			c.Zero()
		}
	}
}

// consoleTunnelLines are the CLI commands that configure tunnel "wan" to
// the WAN probe, responding only.
func consoleTunnelLines() []string {
	var lines []string
	for _, kv := range [][2]string{
		{"remote_address", wanProbe.String()},
		{"local_id", applianceID},
		{"remote_id", probeID},
		{"psk", pskWAN},
		{"local_subnets", firstBootLANNet.String()},
		{"remote_subnets", probeSubnet.String()},
		{"ike_proposals", ikeProposal},
		{"esp_proposals", espProposal},
		{"start_action", "respond"},
	} {
		lines = append(lines, "set tunnels.wan."+kv[0]+" "+kv[1])
	}
	return lines
}
