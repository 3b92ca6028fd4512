package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec/hwcrypto/cryptobench"
)

const (
	adminPassword = "e2e-admin-password-0123"
	pskAB         = "e2e-psk-between-a-and-b-0123456789"
	pskAC         = "e2e-psk-between-a-and-c-0123456789"
)

// buildImage is the card image every test of the package boots copies of
// (built once per test binary, see cardImage).
func buildImage(t testing.TB) string { return cardImage(t) }

// tunnelView is the part of GET /api/v1/tunnels the test reads.
type tunnelView struct {
	Name   string `json:"name"`
	State  string `json:"state"`
	Reason string `json:"reason"`
	Status struct {
		DataPlane string `json:"data_plane"`
		Driver    string `json:"driver"`
		Children  []struct {
			Proposal   string `json:"proposal"`
			PacketsOut uint64 `json:"packets_out"`
		} `json:"child_sas"`
		Events []struct {
			Time    time.Time `json:"time"`
			Message string    `json:"message"`
		} `json:"events"`
	} `json:"status"`
}

// Proposal is the ESP proposal of the tunnel's newest CHILD_SA.
func (v tunnelView) Proposal() string {
	if n := len(v.Status.Children); n > 0 {
		return v.Status.Children[n-1].Proposal
	}
	return ""
}

func tunnels(t testing.TB, api *API) map[string]tunnelView {
	t.Helper()
	var ts []tunnelView
	if err := api.Do("GET", "/api/v1/tunnels", nil, &ts); err != nil {
		t.Logf("tunnels: %v", err)
		return nil
	}
	m := map[string]tunnelView{}
	for _, x := range ts {
		m[x.Name] = x
	}
	return m
}

// waitUp waits until every named tunnel of the appliance is up.
func waitUp(t testing.TB, a *Appliance, api *API, timeout time.Duration, names ...string) map[string]tunnelView {
	return waitUpOr(t, a, api, nil, timeout, names...)
}

// waitUpOr is waitUp that also describes other appliances when it fails.
func waitUpOr(t testing.TB, a *Appliance, api *API, others map[string]*API, timeout time.Duration, names ...string) map[string]tunnelView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last map[string]tunnelView
	for time.Now().Before(deadline) {
		last = tunnels(t, api)
		up := 0
		for _, n := range names {
			if last[n].State == "up" {
				up++
			}
		}
		if up == len(names) {
			return last
		}
		time.Sleep(time.Second)
	}
	more := consoleReport(t, a, api)
	for name, o := range others {
		more += fmt.Sprintf("\n===== appliance %s =====\n%s", name, diagnose(o))
	}
	t.Fatalf("appliance %s: tunnels %v not up after %v: %+v\n%s%s", a.Name, names, timeout, last, diagnose(api), more)
	return nil
}

// consoleReport is what an admin at appliance a's serial console would
// look at when a tunnel misbehaves: IPsec status and counters, addresses,
// routes, the kernel's XFRM tables and iked's log.
func consoleReport(t testing.TB, a *Appliance, api *API) string {
	t.Helper()
	cmds := []string{"flashgate status", "flashgate ipsec status", "flashgate ipsec stats", "ip -4 addr", "ip route", "ip route show table 220", "ip xfrm state", "ip xfrm policy"}
	var svcs []struct {
		Name string `json:"name"`
		PID  int    `json:"pid"`
	}
	if api.Do("GET", "/api/v1/services", nil, &svcs) == nil {
		for _, s := range svcs {
			if s.Name == "iked" && s.PID > 0 {
				cmds = append(cmds, "flashgate logs iked")
			}
		}
	}
	return "\n===== console of " + a.Name + " =====\n" + a.Shell(t, adminPassword, cmds...)
}

// diagnose collects what an admin would look at: services, interfaces and
// the logs of the daemons.
func diagnose(api *API) string {
	var b strings.Builder
	var services, ifaces, tunnels any
	api.Do("GET", "/api/v1/tunnels", nil, &tunnels)
	fmt.Fprintf(&b, "tunnels: %+v\n", tunnels)
	api.Do("GET", "/api/v1/services", nil, &services)
	fmt.Fprintf(&b, "services: %+v\n", services)
	api.Do("GET", "/api/v1/interfaces", nil, &ifaces)
	fmt.Fprintf(&b, "interfaces: %+v\n", ifaces)
	for _, svc := range []string{"iked", "netd", "configd", "kernel"} {
		var logs struct {
			Lines []struct{ Text string } `json:"lines"`
		}
		api.Do("GET", "/api/v1/logs/"+svc, nil, &logs)
		fmt.Fprintf(&b, "%s log:\n", svc)
		start := max(0, len(logs.Lines)-40)
		for _, l := range logs.Lines[start:] {
			fmt.Fprintf(&b, "  %s\n", l.Text)
		}
	}
	return b.String()
}

// site is what an admin sets on one appliance through the web UI's API.
type site struct {
	wan     netip.Addr
	lan     netip.Prefix // the appliance's address on its LAN, with the LAN's length
	tunnels map[string]map[string]any
	// Plain routing to the other appliance's routed network: this
	// appliance's own routed network (a second LAN address), the other's,
	// and the other appliance's WAN address as the gateway.
	routed, peerRouted netip.Prefix
	peerWAN            netip.Addr
}

// configure sets an appliance's WAN and LAN addresses, its tunnels, and
// plain routing to the other site's routed network (a static route, a NAT
// exemption so the hosts keep their addresses, and a forward rule letting
// the other site's routed network in from the WAN), as an admin would in
// the web UI, and commits.
func configure(t testing.TB, api *API, s site) {
	t.Helper()
	ownRouter := netip.PrefixFrom(s.routed.Addr().Next(), s.routed.Bits())
	steps := []struct {
		path string
		body map[string]any
	}{
		{"/api/v1/interfaces/eth0", map[string]any{"addressing": "static", "addresses": []string{s.wan.String() + "/24"}}},
		{"/api/v1/interfaces/eth1", map[string]any{"addresses": []string{"192.168.1.1/24", s.lan.String(), ownRouter.String()}}},
		{"/api/v1/routes/routed-peer", map[string]any{"destination": s.peerRouted.String(), "gateway": s.peerWAN.String()}},
		{"/api/v1/nat-exemptions/routed-peer", map[string]any{"sources": []string{s.routed.String()}, "destinations": []string{s.peerRouted.String()}}},
		{"/api/v1/rules/routed-peer-in", map[string]any{"chain": "forward", "in": "wan", "out": "lan", "protocol": "any", "action": "accept",
			"sources": []string{s.peerRouted.String()}, "destinations": []string{s.routed.String()}}},
	}
	for name, body := range s.tunnels {
		steps = append(steps, struct {
			path string
			body map[string]any
		}{"/api/v1/tunnels/" + name, body})
	}
	for _, st := range steps {
		if err := api.Do("PUT", st.path, st.body, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := api.Do("POST", "/api/v1/commit", map[string]any{"message": "e2e: addresses, tunnels and plain routing"}, nil); err != nil {
		t.Fatal(err)
	}
}

// sitePair is two configured appliances on a lab network.
type sitePair struct {
	lab        *Lab
	a, b       *Appliance
	apiA, apiB *API
	start      time.Time
}

// newSitePair boots two fresh appliances, sets their admin password on the
// serial console, and configures them through the web UI's API: A
// initiates a tunnel to B and answers one from the strongSwan site.
func newSitePair(t testing.TB) *sitePair {
	t.Helper()
	testnet.RequireRoot(t)
	image := buildImage(t)
	p := &sitePair{lab: NewLab(t)}
	p.start = time.Now()
	p.a = NewAppliance(t, p.lab, "A", image, "brlana", p.lab.HostA)
	p.b = NewAppliance(t, p.lab, "B", image, "brlanb", p.lab.HostB)
	var wg sync.WaitGroup
	for _, x := range []*Appliance{p.a, p.b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			el := x.WaitLogin(t, adminPassword, true)
			t.Logf("appliance %s: login prompt %.1f s after qemu started", x.Name, el.Seconds())
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	p.apiA = NewAPI(p.lab.HostA, firstBootLAN.String())
	p.apiB = NewAPI(p.lab.HostB, firstBootLAN.String())
	for _, x := range []*API{p.apiA, p.apiB} {
		if err := x.WaitLogin("admin", adminPassword, 90*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	tunnel := func(local, remote netip.Addr, lid, rid, psk string, localNet, remoteNet netip.Prefix, start string) map[string]any {
		return map[string]any{
			"local_address": local.String(), "remote_address": remote.String(),
			"local_id": lid, "remote_id": rid, "psk": psk,
			"local_subnets": []string{localNet.String()}, "remote_subnets": []string{remoteNet.String()},
			"ike_proposals": []string{"aes128-sha256-ecp256"}, "esp_proposals": []string{"aes128-sha256"},
			"start_action": start,
		}
	}
	configure(t, p.apiA, site{
		wan: wanA, lan: netip.MustParsePrefix("10.10.1.1/24"),
		tunnels: map[string]map[string]any{
			"to-b": tunnel(wanA, wanB, "a.example", "b.example", pskAB, lanA, lanB, "initiate"),
			"to-c": tunnel(wanA, wanC, "a.example", "c.example", pskAC, lanA, lanC, "respond"),
		},
		routed: routedA, peerRouted: routedB, peerWAN: wanB,
	})
	configure(t, p.apiB, site{
		wan: wanB, lan: netip.MustParsePrefix("10.10.2.1/24"),
		tunnels: map[string]map[string]any{
			"to-a": tunnel(wanB, wanA, "b.example", "a.example", pskAB, lanB, lanA, "respond"),
		},
		routed: routedB, peerRouted: routedA, peerWAN: wanA,
	})
	return p
}

// TestTwoAppliancesAndStrongSwan is issue 11's scenario.
func TestTwoAppliancesAndStrongSwan(t *testing.T) {
	if testing.Short() {
		t.Skip("boots two appliances in qemu")
	}
	p := newSitePair(t)
	lab, a, b, apiA, apiB, start := p.lab, p.a, p.b, p.apiA, p.apiB, p.start

	// A to B: kernel IPsec on both appliances.
	st := waitUpOr(t, a, apiA, map[string]*API{"B": apiB}, 2*time.Minute, "to-b")
	t.Logf("qemu start to tunnel A-B up: %.1f s (first boot and configuration included)", time.Since(start).Seconds())
	if st["to-b"].Status.DataPlane != "xfrm" {
		t.Errorf("tunnel to-b uses data plane %q, want xfrm (the appliance kernel has ESP)", st["to-b"].Status.DataPlane)
	}
	if err := testnet.Ping(lab.HostA, hostB, 3); err != nil {
		t.Fatalf("hostA -> hostB through the A-B tunnel: %v", err)
	}
	if r, err := testnet.Iperf(lab.HostB, lab.HostA, hostB, 1, 3*time.Second); err != nil {
		t.Errorf("iperf3 hostA -> hostB: %v", err)
	} else {
		t.Logf("iperf3 hostA -> hostB through two emulated appliances: %.1f Mbit/s", r.Mbps)
	}
	// The routed networks reach each other without the tunnel: the static
	// routes, NAT exemptions and forward rules set through the API.
	if err := testnet.Ping(lab.HostA, routedHostB, 3); err != nil {
		t.Fatalf("hostA %v -> hostB %v by static routes through A and B: %v", routedHostA, routedHostB, err)
	}
	var routes []struct {
		Name        string `json:"name"`
		Destination string `json:"destination"`
	}
	if err := apiA.Do("GET", "/api/v1/routes", nil, &routes); err != nil {
		t.Fatal(err)
	}
	if len(routes) != 1 || routes[0].Destination != routedB.String() {
		t.Errorf("GET /api/v1/routes on A = %+v, want the one route to %v", routes, routedB)
	}
	// The status names the kernel driver doing the ESP work.
	if d := tunnels(t, apiA)["to-b"].Status.Driver; d == "" {
		t.Errorf("tunnel to-b is up on kernel IPsec but its status names no crypto driver")
	} else {
		t.Logf("tunnel to-b: ESP crypto by the kernel driver %s", d)
	}
	// cryptobench runs against the kernel's drivers over AF_ALG: its table
	// must have an aes-128-cbc row of a kernel driver with a throughput at
	// both sizes (the echoed command names cbc too, so a substring says
	// nothing; cryptobench's TestMeasuredFailsWithoutARow holds the check
	// to the outputs it must refuse).
	out := a.Shell(t, adminPassword, "flashgate cryptobench -t 50ms -sizes 64,1024 -alg aes-128-cbc")
	bench, err := cryptobench.ParseTable(out)
	if err == nil {
		var row cryptobench.Result
		if row, err = bench.Measured("aes-128-cbc"); err == nil {
			t.Logf("flashgate cryptobench in appliance A: aes-128-cbc by the kernel's %s at %v MB/s (64 and 1024 B):\n%s", row.Driver, row.MBps, out)
		}
	}
	if err != nil {
		t.Errorf("flashgate cryptobench in the appliance did not measure the kernel's drivers: %v\n%s", err, out)
	}

	// The other proposals of issue 5, through both appliances' kernel ESP.
	for _, suite := range []struct{ ike, esp string }{
		{"aes128gcm16-prfsha256-ecp256", "aes128gcm16"},
		{"aes256gcm16-prfsha384-ecp384", "aes256gcm16"},
		{"aes256-sha256-modp2048", "aes256-sha256"},
		{"aes128-sha1-modp2048", "aes128-sha1"},
		{"chacha20poly1305-prfsha256-curve25519", "chacha20poly1305"},
	} {
		began := time.Now()
		for _, side := range []struct {
			api    *API
			tunnel string
		}{{apiB, "to-a"}, {apiA, "to-b"}} {
			body := map[string]any{"ike_proposals": []string{suite.ike}, "esp_proposals": []string{suite.esp}}
			if err := side.api.Do("PUT", "/api/v1/tunnels/"+side.tunnel, body, nil); err != nil {
				t.Fatal(err)
			}
			if err := side.api.Do("POST", "/api/v1/commit", map[string]any{"message": "e2e: " + suite.ike}, nil); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			st := tunnels(t, apiA)["to-b"]
			if st.State == "up" && st.Proposal() == suite.esp {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("tunnel to-b with %s/%s not up after 2 min: %+v\n%s", suite.ike, suite.esp, st, diagnose(apiA))
			}
			time.Sleep(time.Second)
		}
		if err := testnet.Ping(lab.HostA, hostB, 3); err != nil {
			t.Fatalf("hostA -> hostB through kernel ESP with %s: %v", suite.esp, err)
		}
		t.Logf("kernel ESP %s between the appliances: up and passing traffic %.1f s after the commit", suite.esp, time.Since(began).Seconds())
	}

	// Start action on-traffic through both appliances' kernel IPsec.
	checkOnTraffic(t, p)

	// The strongSwan site joins A, with UDP encapsulation.
	charon := testnet.StartCharon(t, lab.GwC, testnet.CharonConn{
		Name: "to-a", LocalAddr: wanC, RemoteAddr: wanA, LocalID: "c.example", RemoteID: "a.example",
		PSK: pskAC, Proposals: "aes128-sha256-ecp256", ESPProposals: "aes128-sha256",
		LocalTS: []netip.Prefix{lanC}, RemoteTS: []netip.Prefix{lanA},
	})
	if err := charon.Initiate("to-a-net"); err != nil {
		t.Fatal(err)
	}
	waitUp(t, a, apiA, time.Minute, "to-c")
	if err := testnet.Ping(lab.HostA, hostC, 3); err != nil {
		t.Fatalf("hostA -> hostC through the A-strongSwan tunnel: %v", err)
	}

	// Reboot B: the tunnel comes back by itself, the configuration intact.
	if err := apiB.Do("POST", "/api/v1/system/reboot", nil, nil); err != nil {
		t.Fatal(err)
	}
	rebootAt := len(b.VM.Log())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	if _, _, err := b.VM.WaitFor(ctx, rebootAt, "flashgate init: pid 1"); err != nil {
		cancel()
		t.Fatalf("B did not come back after reboot: %v", err)
	}
	cancel()
	// Usually back within seconds of B's boot. But when A's new
	// IKE_SA_INIT, sent on B's DELETE, is still answered by B's iked as it
	// shuts down, A's IKE_AUTH goes to a B that no longer knows the SA,
	// and A gives it up only after its retransmissions (0.5 s doubling,
	// 8 tries: 128 s), then starts over: the wait allows for that.
	waitUp(t, a, apiA, 180*time.Second, "to-b")
	if err := testnet.Ping(lab.HostA, hostB, 3); err != nil {
		t.Fatalf("after B rebooted, hostA -> hostB: %v", err)
	}

	// A power cut on A in the middle of a commit: A boots with a valid
	// configuration (the old or the new one), and the tunnels come back.
	go apiA.Do("PUT", "/api/v1/system", map[string]any{"hostname": "cut-during-commit"}, nil)
	time.Sleep(200 * time.Millisecond)
	go apiA.Do("POST", "/api/v1/commit", map[string]any{"message": "interrupted"}, nil)
	time.Sleep(300 * time.Millisecond)
	a.PowerCut()
	a.Start(t)
	a.WaitLogin(t, adminPassword, false)
	apiA = NewAPI(lab.HostA, "10.10.1.1")
	if err := apiA.WaitLogin("admin", adminPassword, 90*time.Second); err != nil {
		t.Fatalf("after the power cut: %v", err)
	}
	var sys struct {
		Settings struct {
			Hostname []string `json:"hostname"` // form fields are lists of strings
		} `json:"settings"`
	}
	if err := apiA.Do("GET", "/api/v1/system", nil, &sys); err != nil {
		t.Fatal(err)
	}
	if h := strings.Join(sys.Settings.Hostname, ","); h != "flashgate" && h != "cut-during-commit" {
		t.Errorf("after the power cut the hostname is %q: neither the old (flashgate) nor the new (cut-during-commit) configuration", h)
	} else {
		t.Logf("after the power cut A runs the %s configuration (hostname %q)", map[bool]string{true: "new", false: "old"}[h == "cut-during-commit"], h)
	}
	waitUp(t, a, apiA, 120*time.Second, "to-b")
}

// BenchmarkE2ETunnelUp: two configured appliances lose power and boot
// again together; the figure is qemu start to A's API status saying the
// tunnel between them is up (e2e.tunnel_up_s), with a log of where that
// time went. Then the TCP throughput hostA -> hostB through the tunnel and,
// side by side, by plain routing through the same two appliances.
func BenchmarkE2ETunnelUp(b *testing.B) {
	p := newSitePair(b)
	waitUpOr(b, p.a, p.apiA, map[string]*API{"B": p.apiB}, 2*time.Minute, "to-b")
	var total time.Duration
	var tl *Timeline
	var up time.Time
	for i := 0; i < b.N; i++ {
		p.a.PowerCut()
		p.b.PowerCut()
		tl = &Timeline{}
		start := time.Now()
		up = p.restartUntilUp(b, tl)
		total += up.Sub(start)
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "tunnel_up_s")
	// What the appliances know about their boots, read once the figure is
	// taken (logging in to B earlier would take B's CPU during it).
	p.apiB = NewAPI(p.lab.HostB, "10.10.2.1")
	if err := p.apiB.WaitLogin("admin", adminPassword, time.Minute); err != nil {
		b.Fatal(err)
	}
	for _, x := range []struct {
		a      *Appliance
		api    *API
		tunnel string
	}{{p.a, p.apiA, "to-b"}, {p.b, p.apiB, "to-a"}} {
		if err := tl.ReadAppliance(x.a, x.api, x.tunnel, up); err != nil {
			b.Logf("timeline: %v", err)
		}
	}
	// A benchmark's log keeps only 10 lines: the timeline goes to the
	// output (make bench keeps it in out/bench/raw-e2e.txt).
	fmt.Printf("qemu start to tunnel A-B up, %.1f s; where the time went (seconds after each appliance's qemu started):\n%s",
		up.Sub(p.a.started).Seconds(), tl)

	// Throughput, tunnel and plain routing alternating, so that both see
	// the same state of a shared machine.
	const rounds, each = 2, 5 * time.Second
	var tunnelMbps, plainMbps float64
	for r := 0; r < rounds; r++ {
		for _, path := range []struct {
			dst  netip.Addr
			sum  *float64
			what string
		}{{hostB, &tunnelMbps, "through the A-B tunnel"}, {routedHostB, &plainMbps, "by plain routing through A and B"}} {
			res, err := testnet.Iperf(p.lab.HostB, p.lab.HostA, path.dst, 1, each)
			if err != nil {
				b.Fatalf("iperf3 hostA -> hostB %s: %v", path.what, err)
			}
			b.Logf("iperf3 hostA -> %v %s, round %d: %.1f Mbit/s", path.dst, path.what, r+1, res.Mbps)
			*path.sum += res.Mbps
		}
	}
	b.ReportMetric(tunnelMbps/rounds, "Mbit/s")
	b.ReportMetric(plainMbps/rounds, "plain_Mbit/s")
	b.ReportMetric(0, "ns/op")
}

// restartUntilUp boots both appliances of p from their cards and returns
// when A's API status says the A-B tunnel is up, marking on tl what the
// host sees on the way.
func (p *sitePair) restartUntilUp(b *testing.B, tl *Timeline) time.Time {
	b.Helper()
	p.a.Start(b)
	p.b.Start(b)
	tl.Add(p.a, p.a.started, "qemu started")
	tl.Add(p.b, p.b.started, "qemu started")
	for _, x := range []*Appliance{p.a, p.b} {
		go func() {
			// The console's prompt, for the record: the API is polled
			// meanwhile, not after it.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if _, el, err := x.VM.WaitFor(ctx, 0, "login: "); err == nil {
				tl.Add(x, x.started.Add(el), "console login prompt")
			}
		}()
	}
	if wire, err := p.lab.WatchIKE(p.a.wanTap); err != nil {
		b.Logf("no IKE messages on the timeline: %v", err)
	} else {
		defer func() {
			for _, m := range wire.Stop() {
				tl.Add(p.a, m.at, m.String())
			}
		}()
	}
	p.apiA = NewAPI(p.lab.HostA, "10.10.1.1")
	// Wait for A's web UI as WaitListening does, marking each new reason
	// it is not reachable yet.
	lastErr := ""
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		err := p.apiA.listening()
		if err == nil {
			break
		}
		if msg := err.Error(); msg != lastErr {
			tl.Add(p.a, time.Now(), "web UI not reachable yet: "+msg)
			lastErr = msg
		}
		if time.Now().After(deadline) {
			b.Fatalf("A's web UI is not reachable 3 min after the restart: %v", err)
		}
	}
	tl.Add(p.a, time.Now(), "web UI port open: API login sent")
	if err := p.apiA.Login("admin", adminPassword); err != nil {
		if err := p.apiA.WaitLogin("admin", adminPassword, 3*time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	tl.Add(p.a, time.Now(), "API login answered")
	deadline := time.Now().Add(3 * time.Minute)
	last := ""
	for {
		asked := time.Now()
		st := tunnels(b, p.apiA)["to-b"]
		now := time.Now()
		if seen := st.State + ": " + st.Reason; seen != last {
			tl.Add(p.a, now, fmt.Sprintf("API status of to-b (asked %.2f s earlier): %s", now.Sub(asked).Seconds(), seen))
			last = seen
		}
		if st.State == "up" {
			return now
		}
		if now.After(deadline) {
			b.Fatalf("tunnel A-B not up 3 min after the restart: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
