package e2e

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
)

// quietWindow is how long a tunnel waiting for traffic is watched for IKE
// it should not send.
const quietWindow = 4 * time.Second

// checkOnTraffic switches A's tunnel to B to start action on-traffic and
// shows, through both appliances' kernel IPsec, what the start action
// promises (docs/tunnels.md): the tunnel waits without sending IKE, the
// first packet for B's LAN makes A's kernel send an acquire and iked
// initiate (that packet is lost), the next ones pass through the xfrm data
// plane; taken down, or deleted by the peer, it waits for traffic again
// and comes back the same way. Then A's tunnel goes back to start action
// initiate, which the rest of the scenario relies on.
func checkOnTraffic(t *testing.T, p *sitePair) {
	began := time.Now()
	wire, err := p.lab.WatchIKE(p.a.wanTap)
	if err != nil {
		t.Fatalf("on-traffic: %v", err)
	}
	defer wire.Stop()

	// The commit restarts the tunnel (its IKE SA is deleted) in its new
	// start action; it is waiting once the kernel trap is in.
	setStartAction(t, p.apiA, "to-b", "on-traffic")
	waitWaiting(t, p, "after the commit", func(v tunnelView) bool {
		return hasEvent(v, "waiting for traffic to", lanB.String())
	})
	checkQuiet(t, p, wire, "after the commit")
	firstUp := upOnTraffic(t, p, wire, "after the commit")

	// Taken down by the admin: the trap takes the traffic again.
	if err := p.apiA.Do("POST", "/api/v1/tunnels/to-b/down", nil, nil); err != nil {
		t.Fatalf("on-traffic: take to-b down on A: %v", err)
	}
	waitWaiting(t, p, "after POST /api/v1/tunnels/to-b/down", func(v tunnelView) bool { return true })
	checkQuiet(t, p, wire, "after the tunnel was taken down")
	againUp := upOnTraffic(t, p, wire, "after the down")

	// Deleted by the peer (B taken down at its end): the same.
	if err := p.apiB.Do("POST", "/api/v1/tunnels/to-a/down", nil, nil); err != nil {
		t.Fatalf("on-traffic: take to-a down on B: %v", err)
	}
	waitWaiting(t, p, "after B deleted the IKE SA", func(v tunnelView) bool { return true })
	checkQuiet(t, p, wire, "after B deleted the IKE SA")
	peerUp := upOnTraffic(t, p, wire, "after B's delete")

	setStartAction(t, p.apiA, "to-b", "initiate")
	waitUpOr(t, p.a, p.apiA, map[string]*API{"B": p.apiB}, time.Minute, "to-b")
	t.Logf("start action on-traffic over kernel IPsec: first packet to up %.1f s, after a down %.1f s, after the peer's delete %.1f s; the whole step with the switch back to initiate %.1f s",
		firstUp.Seconds(), againUp.Seconds(), peerUp.Seconds(), time.Since(began).Seconds())
}

// setStartAction changes a tunnel's start action through the API and
// commits, as an admin would in the web UI.
func setStartAction(t *testing.T, api *API, tunnel, action string) {
	t.Helper()
	if err := api.Do("PUT", "/api/v1/tunnels/"+tunnel, map[string]any{"start_action": action}, nil); err != nil {
		t.Fatalf("set start action %s on %s: %v", action, tunnel, err)
	}
	if err := api.Do("POST", "/api/v1/commit", map[string]any{"message": "e2e: start action " + action}, nil); err != nil {
		t.Fatalf("commit start action %s on %s: %v", action, tunnel, err)
	}
}

// waitWaiting waits until A's API says to-b is down and waiting for
// traffic, and ready(status) holds.
func waitWaiting(t *testing.T, p *sitePair, when string, ready func(tunnelView) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v := tunnels(t, p.apiA)["to-b"]
		if isWaiting(v) && ready(v) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("on-traffic, %s: A's tunnel to-b is not waiting for traffic after 30 s: state %q, reason %q, events %+v\n%s%s",
				when, v.State, v.Reason, v.Status.Events, diagnose(p.apiA), consoleReport(t, p.a, p.apiA))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func isWaiting(v tunnelView) bool {
	return v.State == string(ipsec.StateDown) && strings.HasPrefix(v.Reason, ipsec.WaitingForTraffic)
}

// hasEvent reports whether one of the tunnel's events holds every substr.
func hasEvent(v tunnelView, substr ...string) bool {
	for _, e := range v.Status.Events {
		all := true
		for _, s := range substr {
			all = all && strings.Contains(e.Message, s)
		}
		if all {
			return true
		}
	}
	return false
}

// checkQuiet watches A's WAN port for quietWindow while nothing is sent to
// B's LAN: a tunnel waiting for traffic sends no IKE at all, and stays
// waiting. The window opens a second after the status says waiting, so
// that a DELETE exchange of the SA that just went is over.
func checkQuiet(t *testing.T, p *sitePair, wire *IKEWire, when string) {
	t.Helper()
	time.Sleep(time.Second)
	from := len(wire.Seen())
	end := time.Now().Add(quietWindow)
	for time.Now().Before(end) {
		if v := tunnels(t, p.apiA)["to-b"]; !isWaiting(v) {
			t.Fatalf("on-traffic, %s: with no traffic A's tunnel to-b left waiting: state %q, reason %q", when, v.State, v.Reason)
		}
		time.Sleep(500 * time.Millisecond)
	}
	var sent []string
	for _, m := range wire.Seen()[from:] {
		if m.src.Addr() == wanA {
			sent = append(sent, m.String())
		}
	}
	if len(sent) > 0 {
		t.Fatalf("on-traffic, %s: A sent IKE while waiting for traffic, with none sent to B's LAN:\n%s", when, strings.Join(sent, "\n"))
	}
}

// upOnTraffic sends one ping from hostA to hostB and returns how long A's
// tunnel to-b took to come up from it. That first packet may be lost (it
// is the kernel's acquire); the tunnel must then be up on the xfrm data
// plane, with an IKE_SA_INIT from A on the wire and the acquire in the
// tunnel's events, and the next pings must all pass.
func upOnTraffic(t *testing.T, p *sitePair, wire *IKEWire, round string) time.Duration {
	t.Helper()
	from := len(wire.Seen())
	acquires := countEvents(tunnels(t, p.apiA)["to-b"], "kernel acquire")
	sent := time.Now()
	_, firstErr := p.lab.HostA.Output("ping", "-n", "-c", "1", "-W", "1", hostB.String())
	var v tunnelView
	for deadline := sent.Add(45 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		v = tunnels(t, p.apiA)["to-b"]
		if v.State == string(ipsec.StateUp) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("on-traffic, %s: A's tunnel to-b is not up 45 s after a ping from hostA to hostB: state %q, reason %q, events %+v\nIKE on A's WAN since the ping: %v\n%s%s",
				round, v.State, v.Reason, v.Status.Events, wire.Seen()[from:], diagnose(p.apiA), consoleReport(t, p.a, p.apiA))
		}
	}
	took := time.Since(sent)
	if v.Status.DataPlane != "xfrm" {
		t.Errorf("on-traffic, %s: to-b is up on data plane %q, want xfrm", round, v.Status.DataPlane)
	}
	if n := countEvents(v, "kernel acquire"); n != acquires+1 {
		t.Errorf("on-traffic, %s: to-b is up with %d kernel acquires in its events, %d before the ping, want one more: %+v", round, n, acquires, v.Status.Events)
	}
	initiated := false
	for _, m := range wire.Seen()[from:] {
		if m.src.Addr() == wanA && m.exchange == 34 && !m.response {
			initiated = true
		}
	}
	if !initiated {
		t.Errorf("on-traffic, %s: to-b came up without an IKE_SA_INIT from A on the wire: %v", round, wire.Seen()[from:])
	}
	first := "lost, as documented"
	if firstErr == nil {
		first = "answered"
	}
	if err := pingAll(p.lab.HostA, hostB, 5); err != nil {
		t.Fatalf("on-traffic, %s: to-b is up but hostA -> hostB: %v", round, err)
	}
	t.Logf("on-traffic, %s: to-b up on %s %.1f s after the first ping (which was %s); the next 5 pings all answered", round, v.Status.DataPlane, took.Seconds(), first)
	return took
}

// countEvents counts the tunnel's events that hold substr.
func countEvents(v tunnelView, substr string) int {
	n := 0
	for _, e := range v.Status.Events {
		if strings.Contains(e.Message, substr) {
			n++
		}
	}
	return n
}

// received is ping's summary line.
var received = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)

// pingAll pings dst from ns count times and wants every one answered
// (testnet.Ping tolerates losses).
func pingAll(ns *testnet.NS, dst netip.Addr, count int) error {
	out, err := ns.Output("ping", "-n", "-q", "-c", strconv.Itoa(count), "-i", "0.2", "-W", "1", dst.String())
	m := received.FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("ping %v: no summary (%v): %q", dst, err, out)
	}
	if m[2] != strconv.Itoa(count) {
		return fmt.Errorf("ping %v: %s of %s answered, want all", dst, m[2], m[1])
	}
	return nil
}
