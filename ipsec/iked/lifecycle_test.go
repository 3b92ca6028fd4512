package iked

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
	"golang.org/x/sys/unix"
)

const (
	lifecycleIKE = "aes128gcm16-prfsha256-ecp256"
	lifecycleESP = "aes128gcm16"
)

// charonLogCount counts the lines of charon's log that match re.
func charonLogCount(t *testing.T, c *testnet.Charon, re *regexp.Regexp) int {
	t.Helper()
	b, err := os.ReadFile(c.Log)
	if err != nil {
		t.Fatalf("read charon's log: %v", err)
	}
	return len(re.FindAllIndex(b, -1))
}

// What charon logs (ike = 2) for each kind of rekey: "generating" when it
// initiates the exchange, "parsed" when we do. A CHILD_SA rekey carries
// N(REKEY_SA); an IKE_SA rekey is SA, nonce and KE without selectors.
var (
	charonRekeysChild = regexp.MustCompile(`generating CREATE_CHILD_SA request \d+ \[ N\(REKEY_SA\)`)
	oursRekeysChild   = regexp.MustCompile(`parsed CREATE_CHILD_SA request \d+ \[ N\(REKEY_SA\)`)
	charonRekeysIKE   = regexp.MustCompile(`generating CREATE_CHILD_SA request \d+ \[ SA No KE \]`)
	oursRekeysIKE     = regexp.MustCompile(`parsed CREATE_CHILD_SA request \d+ \[ SA No KE \]`)
)

// killCharon kills charon with SIGKILL, the way a crash or a power cut
// ends it: no DELETE reaches us. Its PID is in its private /run.
func killCharon(t *testing.T, c *testnet.Charon) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, "run", "charon.pid"))
	if err != nil {
		t.Fatalf("charon's PID file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("charon's PID file says %q", b)
	}
	if err := unix.Kill(pid, unix.SIGKILL); err != nil {
		t.Fatalf("kill charon (PID %d): %v", pid, err)
	}
	c.Stop() // reaps it
}

// routeTo reports whether ns has a route for prefix (the data plane's
// route into the tunnel).
func routeTo(t *testing.T, ns *testnet.NS, prefix string) bool {
	t.Helper()
	out, err := ns.Output("ip", "-4", "route", "show", prefix)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out) != ""
}

// waitFor polls cond every 100 ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tunnelStatus(d *Daemon, name string) ipsec.TunnelStatus {
	for _, s := range d.Status() {
		if s.Name == name {
			return s
		}
	}
	return ipsec.TunnelStatus{}
}

// TestRekeyUnderTraffic: short lifetimes against strongSwan with a TCP
// connection streaming through the tunnel the whole time. Our 10 s CHILD_SA
// lifetime and charon's 14 s IKE_SA rekey time drive rekeys from both
// sides' timers; a CHILD_SA rekey by charon (swanctl --rekey) and an
// IKE_SA rekey by us (the API's rekey) complete the four kinds. The stream
// must lose no byte and never reset.
func TestRekeyUnderTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	s := testnet.NewSiteToSite(t)
	peer := charonConn(s, lifecycleIKE, lifecycleESP, "none")
	peer.RekeyTime, peer.IKERekeyTime = 30*time.Second, 14*time.Second
	charon := testnet.StartCharon(t, s.GwB, peer)
	ours := tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, lifecycleIKE, lifecycleESP, config.StartInitiate)
	ours.ChildLifetime, ours.IKELifetime = config.Seconds(10), config.Seconds(30)
	validTunnels(t, ours)
	d := startIked(t, s.GwA, ours)
	waitState(t, d, "s2s", ipsec.StateUp, 10*time.Second)
	if err := charon.WaitChild("s2s-net", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	stream, err := startStream(s, 5202, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if out, err := charon.Swanctl("--rekey", "--child", "s2s-net"); err != nil {
		t.Fatalf("swanctl --rekey --child: %v: %s", err, out)
	}
	time.Sleep(3 * time.Second)
	if err := d.Rekey("s2s", true); err != nil {
		t.Fatalf("our IKE_SA rekey: %v", err)
	}
	kinds := []struct {
		what string
		re   *regexp.Regexp
	}{
		{"CHILD_SA rekey by charon", charonRekeysChild},
		{"CHILD_SA rekey by us (lifetime)", oursRekeysChild},
		{"IKE_SA rekey by charon (rekey_time)", charonRekeysIKE},
		{"IKE_SA rekey by us", oursRekeysIKE},
	}
	allSeen := func() bool {
		for _, k := range kinds {
			if charonLogCount(t, charon, k.re) == 0 {
				return false
			}
		}
		return true
	}
	seen := waitFor(30*time.Second, allSeen)
	// Let the last rekey's old SAs be deleted while the stream still runs.
	time.Sleep(2 * time.Second)
	streamErr := stream.Stop(10 * time.Second)
	t.Logf("streamed %d bytes across the rekeys in %v", stream.received.Load(), time.Since(begin).Round(time.Second))
	for _, k := range kinds {
		t.Logf("%s: %d", k.what, charonLogCount(t, charon, k.re))
	}
	if !seen {
		t.Errorf("not every kind of rekey happened within 30 s (counts above)")
	}
	if streamErr != nil {
		t.Fatalf("the TCP stream across the rekeys: %v", streamErr)
	}
	if stream.received.Load() < 10<<20 {
		t.Errorf("only %d bytes streamed: traffic stalled during the rekeys", stream.received.Load())
	}
	// Our 10 s lifetime rekeys the CHILD_SA every 9 s or so, so one may
	// complete just before this read with its old CHILD_SA's DELETE still a
	// round trip away (CI saw that): wait for the delete, a bounded time. A
	// rekey that never deletes its old CHILD_SA still fails here.
	var st ipsec.TunnelStatus
	if !waitFor(5*time.Second, func() bool {
		st = waitState(t, d, "s2s", ipsec.StateUp, time.Second)
		return len(st.Children) == 1
	}) {
		t.Errorf("after the rekeys we have %d CHILD_SAs for 5 s, want 1 (the old ones deleted): %+v", len(st.Children), st.Children)
	}
	var events []string
	for _, e := range st.Events {
		events = append(events, e.Message)
	}
	for _, want := range []string{"CHILD_SA rekeyed", "IKE_SA rekeyed"} {
		if !strings.Contains(strings.Join(events, "\n"), want) {
			t.Errorf("no %q in our events:\n%s", want, strings.Join(events, "\n"))
		}
	}
	if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
		t.Fatalf("after the rekeys: %v", err)
	}
}

// TestPeerRestart: strongSwan killed (no DELETE) is found dead by DPD and
// the status says so; a new charon with the same configuration gets the
// tunnel back without anyone touching our side. Then our daemon restarts
// (Close deletes the SAs, a new one initiates) and the tunnel comes back.
func TestPeerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	s := testnet.NewSiteToSite(t)
	peer := charonConn(s, lifecycleIKE, lifecycleESP, "none")
	charon := testnet.StartCharon(t, s.GwB, peer)
	ours := tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, lifecycleIKE, lifecycleESP, config.StartInitiate)
	ours.DPDInterval, ours.DPDTimeout = config.Seconds(2), config.Seconds(4)
	validTunnels(t, ours)
	d := startIked(t, s.GwA, ours)
	waitState(t, d, "s2s", ipsec.StateUp, 10*time.Second)
	if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
		t.Fatal(err)
	}

	killed := time.Now()
	killCharon(t, charon)
	waitEvent(t, d, "s2s", "dead peer detection", 12*time.Second)
	st := tunnelStatus(d, "s2s")
	t.Logf("%v after the kill: %s: %s", time.Since(killed).Round(100*time.Millisecond), st.State, st.Reason)
	if st.State == ipsec.StateUp {
		t.Errorf("state is still up after DPD found the peer dead")
	}
	if !strings.Contains(st.Reason, "no answer from peer 10.10.0.2") {
		t.Errorf("reason %q does not say the peer 10.10.0.2 stopped answering", st.Reason)
	}
	if len(st.Children) != 0 || routeTo(t, s.GwA, s.LANB.String()) {
		t.Errorf("the dead tunnel's CHILD_SAs or route are still installed: %+v", st.Children)
	}

	restarted := time.Now()
	testnet.StartCharon(t, s.GwB, peer)
	st = waitState(t, d, "s2s", ipsec.StateUp, 20*time.Second)
	t.Logf("tunnel back %v after charon restarted", time.Since(restarted).Round(100*time.Millisecond))
	if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
		t.Fatalf("after the peer came back: %v", err)
	}

	// Our daemon restarts: Close deletes the SAs, the new one initiates.
	if err := d.Close(); err != nil {
		t.Fatalf("close iked: %v", err)
	}
	if routeTo(t, s.GwA, s.LANB.String()) {
		t.Errorf("route into the tunnel left behind after Close")
	}
	d = startIked(t, s.GwA, ours)
	waitState(t, d, "s2s", ipsec.StateUp, 10*time.Second)
	if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
		t.Fatalf("after our daemon restarted: %v", err)
	}
}

// TestDeleteEitherSide: a delete from strongSwan (swanctl --terminate) and
// one from us (Down) each remove the SAs at both ends and our route into
// the tunnel; strongSwan deleting only the CHILD_SA leaves the tunnel down
// with the reason, not up with nothing in it.
func TestDeleteEitherSide(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	s := testnet.NewSiteToSite(t)
	charon := testnet.StartCharon(t, s.GwB, charonConn(s, lifecycleIKE, lifecycleESP, "none"))
	// Respond only, so nothing re-initiates behind the checks.
	d := startIked(t, s.GwA, tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, lifecycleIKE, lifecycleESP, config.StartRespond))

	charonSAs := func() int {
		sas, err := charon.SAs()
		if err != nil {
			t.Fatal(err)
		}
		return len(sas)
	}
	up := func() {
		t.Helper()
		if err := charon.Initiate("s2s-net"); err != nil {
			t.Fatal(err)
		}
		waitState(t, d, "s2s", ipsec.StateUp, 5*time.Second)
		if !routeTo(t, s.GwA, s.LANB.String()) {
			t.Fatalf("no route to %v on gwA while the tunnel is up", s.LANB)
		}
		if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(who string) {
		t.Helper()
		if !waitFor(5*time.Second, func() bool {
			st := tunnelStatus(d, "s2s")
			return st.IKE == nil && len(st.Children) == 0 && !routeTo(t, s.GwA, s.LANB.String()) && charonSAs() == 0
		}) {
			st := tunnelStatus(d, "s2s")
			t.Fatalf("after the delete by %s: ours %s %+v %+v, route %v; charon has %d IKE_SAs", who, st.State, st.IKE, st.Children,
				routeTo(t, s.GwA, s.LANB.String()), charonSAs())
		}
		if err := testnet.Ping(s.HostA, s.HostBIP, 1); err == nil {
			t.Errorf("hostA still reaches hostB after the delete by %s", who)
		}
	}

	up()
	if out, err := charon.Swanctl("--terminate", "--ike", "s2s", "--timeout", "5"); err != nil {
		t.Fatalf("swanctl --terminate: %v: %s", err, out)
	}
	gone("strongSwan")
	st := tunnelStatus(d, "s2s")
	t.Logf("after strongSwan's delete: %s: %s", st.State, st.Reason)
	if !strings.Contains(st.Reason, "deleted") {
		t.Errorf("reason %q does not say the peer deleted the tunnel", st.Reason)
	}

	// Only the CHILD_SA: the IKE SA stays, carrying nothing, and the
	// status must not say up.
	up()
	if out, err := charon.Swanctl("--terminate", "--child", "s2s-net", "--timeout", "5"); err != nil {
		t.Fatalf("swanctl --terminate --child: %v: %s", err, out)
	}
	if !waitFor(5*time.Second, func() bool {
		st := tunnelStatus(d, "s2s")
		return st.State == ipsec.StateDown && len(st.Children) == 0 && !routeTo(t, s.GwA, s.LANB.String())
	}) {
		st := tunnelStatus(d, "s2s")
		t.Fatalf("after strongSwan deleted the CHILD_SA: %s %q, children %+v, route %v", st.State, st.Reason, st.Children, routeTo(t, s.GwA, s.LANB.String()))
	}
	st = tunnelStatus(d, "s2s")
	t.Logf("after strongSwan's CHILD_SA delete: %s: %s", st.State, st.Reason)
	if !strings.Contains(st.Reason, "deleted the CHILD_SA") || st.IKE == nil {
		t.Errorf("reason %q (IKE_SA %+v): want the CHILD_SA deleted, the IKE_SA still there", st.Reason, st.IKE)
	}

	// strongSwan (reuse_ikesa = no) negotiates a new IKE SA for it; we
	// delete the old one, which carries nothing.
	up()
	if !waitFor(3*time.Second, func() bool { return charonSAs() == 1 }) {
		t.Errorf("strongSwan has %d IKE_SAs, want 1: the childless one should have been deleted", charonSAs())
	}
	if err := d.Down("s2s"); err != nil {
		t.Fatal(err)
	}
	gone("us")
	st = tunnelStatus(d, "s2s")
	t.Logf("after our delete: %s: %s", st.State, st.Reason)
	if st.State == ipsec.StateUp {
		t.Errorf("state %s after our delete", st.State)
	}
}

// validTunnels checks tunnels the way configd would before a commit: the
// test's short lifetimes and DPD timers must be ones a user can set.
func validTunnels(t testing.TB, tunnels ...config.Tunnel) {
	t.Helper()
	c := config.Default()
	c.Tunnels = tunnels
	if err := c.Validate(); err != nil {
		t.Fatalf("the test's tunnel does not validate: %v", err)
	}
}

// TestPeerDeletesChild: with start action initiate, a CHILD_SA the peer
// deletes is negotiated again on the same IKE SA.
func TestPeerDeletesChild(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	s := testnet.NewSiteToSite(t)
	charon := testnet.StartCharon(t, s.GwB, charonConn(s, lifecycleIKE, lifecycleESP, "none"))
	d := startIked(t, s.GwA, tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, lifecycleIKE, lifecycleESP, config.StartInitiate))
	before := waitState(t, d, "s2s", ipsec.StateUp, 10*time.Second)
	if out, err := charon.Swanctl("--terminate", "--child", "s2s-net", "--timeout", "5"); err != nil {
		t.Fatalf("swanctl --terminate --child: %v: %s", err, out)
	}
	waitEvent(t, d, "s2s", "deleted the CHILD_SA", 5*time.Second)
	after := waitState(t, d, "s2s", ipsec.StateUp, 10*time.Second)
	if after.IKE == nil || after.IKE.InitiatorSPI != before.IKE.InitiatorSPI {
		t.Errorf("IKE SA changed: before %+v, after %+v; want the new CHILD_SA on the same one", before.IKE, after.IKE)
	}
	if len(after.Children) != 1 || after.Children[0].InboundSPI == before.Children[0].InboundSPI {
		t.Errorf("CHILD_SAs after: %+v, want one new one", after.Children)
	}
	if err := charon.WaitChild("s2s-net", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
		t.Fatalf("through the new CHILD_SA: %v", err)
	}
}

// TestLocalAddressFollowsWAN: a tunnel without a local address uses the
// kernel's source address for the peer. Configured before the WAN has an
// address it says why it waits, and starts once the WAN is up; when the
// WAN's address changes (a new DHCP lease), the next attempt uses the new
// one.
func TestLocalAddressFollowsWAN(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	ns := testnet.NewNS(t, testnet.Prefix()+"-gw")
	// The far end exists only so that wan0 has a carrier; nobody there
	// speaks IKE.
	testnet.Link(t, ns, "wan0", "", testnet.NewNS(t, testnet.Prefix()+"-isp"), "wan0", "")
	tun := config.NewTunnel("hq")
	tun.RemoteAddress = config.MustAddr("192.0.2.77") // nobody answers
	tun.PSK = config.NewSecret(testPSK)
	tun.LocalSubnets = []config.Prefix{config.MustPrefix("10.1.0.0/24")}
	tun.RemoteSubnets = []config.Prefix{config.MustPrefix("10.2.0.0/24")}
	tun.DPDInterval, tun.DPDTimeout = config.Seconds(1), config.Seconds(2) // two tries in 1.5 s
	validTunnels(t, tun)

	var d *Daemon
	err := ns.Do(func() error {
		var err error
		if d, err = Open(Options{DataPlane: "userspace", Logf: t.Logf}); err != nil {
			return err
		}
		d.Run()
		return d.Apply(&config.Config{Tunnels: []config.Tunnel{tun}})
	})
	if d == nil {
		t.Fatalf("start iked: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	if err == nil || !strings.Contains(err.Error(), "no route to the peer") {
		t.Errorf("Apply before the WAN is up: %v, want a no-route error", err)
	}
	st := waitState(t, d, "hq", ipsec.StateFailed, time.Second)
	t.Logf("before the WAN is up: %s", st.Reason)

	if err := ns.Run("ip", "addr", "add", "192.0.2.1/24", "dev", "wan0"); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool {
		st = tunnelStatus(d, "hq")
		return st.LocalAddr == "192.0.2.1" && (st.State == ipsec.StateConnecting || strings.Contains(st.Reason, "no answer"))
	}) {
		t.Fatalf("after the WAN came up: %s %q from %q, want connecting from 192.0.2.1", st.State, st.Reason, st.LocalAddr)
	}

	// A new lease: the address changes under the tunnel.
	for _, c := range [][]string{{"ip", "addr", "del", "192.0.2.1/24", "dev", "wan0"}, {"ip", "addr", "add", "192.0.2.9/24", "dev", "wan0"}} {
		if err := ns.Run(c...); err != nil {
			t.Fatal(err)
		}
	}
	if !waitFor(10*time.Second, func() bool { return tunnelStatus(d, "hq").LocalAddr == "192.0.2.9" }) {
		st = tunnelStatus(d, "hq")
		t.Fatalf("after the WAN address changed: local %q, state %s %q", st.LocalAddr, st.State, st.Reason)
	}
	waitEvent(t, d, "hq", "local address is now 192.0.2.9 (was 192.0.2.1)", time.Second)
}
