package cli

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/hwcrypto"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
)

// TestShowAndOperateServices runs the show and operate commands against a
// real supervisor, and against iked's and netd's API documents served from
// a socket (their daemons need IPsec and netlink set up).
func TestShowAndOperateServices(t *testing.T) {
	cd := startConfigd(t)
	var mu sync.Mutex
	var power []supervisor.PowerAction
	supSock := startSupervisor(t, cd.dir, func(a supervisor.PowerAction) error {
		mu.Lock()
		defer mu.Unlock()
		power = append(power, a)
		return nil
	})
	now := time.Now()
	tunnels := []ipsec.TunnelStatus{
		{Name: "branch", State: ipsec.StateFailed, Reason: "peer answered NO_PROPOSAL_CHOSEN: it accepts none of aes128gcm16-prfsha256-ecp256",
			Since: now.Add(-time.Minute), DataPlane: "userspace", Events: []ipsec.TunnelEvent{{Time: now, Message: "IKE_SA_INIT refused"}}},
		{Name: "hq", State: ipsec.StateUp, Since: now.Add(-time.Hour), DataPlane: "xfrm",
			Events: []ipsec.TunnelEvent{{Time: now, Message: "CHILD_SA rekeyed"}}, EventsTotal: 57,
			IKE: &ipsec.IKESAStatus{InitiatorSPI: "0011223344556677", ResponderSPI: "8899aabbccddeeff", Initiator: true, Proposal: "aes128gcm16-prfsha256-ecp256"}},
	}
	ikedSock := serveJSON(t, cd.dir, "iked", map[string]any{
		"GET /v1/tunnels": ikedapi.ServeTunnels(func() []ipsec.TunnelStatus { return tunnels }),
		"GET /v1/tunnels/{name}": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			page, _ := ikedapi.TunnelQuery{Name: r.PathValue("name")}.Page(tunnels)
			if len(page) == 0 {
				w.WriteHeader(http.StatusNotFound)
				json.NewEncoder(w).Encode(ikedapi.Reply{Error: "no tunnel named " + r.PathValue("name")})
				return
			}
			json.NewEncoder(w).Encode(page[0])
		}),
		"POST /v1/tunnels/{name}/up": map[string]string{"result": "initiating"},
	})
	netdSock := serveJSON(t, cd.dir, "netd", map[string]any{
		"GET /v1/status": netdapi.Status{Links: []netdapi.LinkStatus{
			{Name: "eth0", Role: "wan", Present: true, Up: true, Operstate: "up", MTU: 1500, Addresses: []string{"198.51.100.7/24"}, RxBytes: 1234},
			{Name: "eth1", Role: "lan", Present: false},
		}},
		"GET /v1/firewall": netdapi.FirewallStatus{Table: "inet flashgate", Rules: []string{"a", "b"},
			Hits: []netdapi.HitCounter{{Rule: "input builtin:drop", Packets: 42, Bytes: 4200}}},
	})
	term := startCLI(t, Options{User: "admin", Hostname: "fg", Board: "alix2d13", ConfigdSocket: cd.socket,
		SupervisorSocket: supSock, IkedSocket: ikedSock, NetdSocket: netdSock}, runCLI)
	term.expect(prompt)

	// The service has to be up before status shows it running.
	deadline := time.Now().Add(10 * time.Second)
	for {
		term.send("show log svc\r")
		if got := term.expect(prompt); strings.Contains(got, "hello from svc") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("show log svc never showed the service's output")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"show status", []string{"configuration: revision 1", "svc", "running", "tunnels: 1 of 2 up",
			"branch failed: peer answered NO_PROPOSAL_CHOSEN"}},
		{"show tunnels", []string{"branch: FAILED", "hq: UP", "IKE_SA 0011223344556677_i*"}},
		{"show tunnels failed", []string{"branch: FAILED", "reason: peer answered NO_PROPOSAL_CHOSEN"}},
		{"show tunnels nosuch", []string{"no tunnel of 2 is nosuch"}},
		{"show tunnel branch", []string{"reason: peer answered NO_PROPOSAL_CHOSEN", "recent events:", "IKE_SA_INIT refused"}},
		{"show tunnel hq", []string{"recent events (the last 1 of 57):", "CHILD_SA rekeyed"}},
		{"show tunnel nosuch", []string{`no tunnel named "nosuch" (tunnels: branch, hq)`}},
		{"show interfaces", []string{"eth0 (wan): up, mtu 1500", "addresses 198.51.100.7/24", "rx 1234 bytes", "eth1 (lan): missing"}},
		{"show firewall", []string{"table inet flashgate, 2 rules", "42", "input builtin:drop"}},
		{"show board", []string{"alix2d13", "console ttyS0 at 38400 baud"}},
		{"show log nosuch", []string{"log nosuch:"}},
		{"restart svc", []string{"svc restarted."}},
		{"restart nosuch", []string{"restart nosuch:", "nosuch"}},
		{"ipsec up nosuch", []string{`no tunnel named "nosuch"`}},
	} {
		term.send(tc.line + "\r")
		got := term.expect(prompt)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s:\n%s\nwant %q", tc.line, got, w)
			}
		}
	}

	// Completion of service names comes from the supervisor.
	term.send("restart s\t")
	term.expect(prompt + "restart svc ")
	term.send("\x03\r")
	term.expect(prompt)

	// reboot asks first; no means no.
	term.send("reboot\r")
	term.expect("Type yes to go on")
	term.send("no\r")
	term.expect("Cancelled.")
	term.expect(prompt)
	term.send("poweroff\r")
	term.expect("Type yes to go on")
	term.send("yes\r")
	term.expect("poweroff: the services are stopping.")
	if err := term.wait(); err != nil {
		t.Errorf("Run after poweroff: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(power) != 1 || power[0] != supervisor.PowerOff {
		t.Errorf("power requests %v, want one poweroff", power)
	}
}

func TestShowCrypto(t *testing.T) {
	// An ALIX's /proc and /sys as captured for hwcrypto's tests: the Geode
	// LX AES engine with its driver loaded.
	root := "../../ipsec/hwcrypto/testdata/alix"
	r, err := hwcrypto.Detect(root)
	if err != nil {
		t.Fatalf("hwcrypto on %s: %v", root, err)
	}
	if len(r.Engines) == 0 {
		t.Fatalf("hwcrypto finds no engine in %s; the test needs one", root)
	}
	cd := startConfigd(t)
	term := startCLI(t, Options{Hostname: "fg", ConfigdSocket: cd.socket, Root: root}, runCLI)
	term.expect(prompt)
	term.send("show crypto\r")
	got := term.expect(prompt)
	if !strings.Contains(got, "cpu: "+r.CPU.ModelName) {
		t.Errorf("show crypto:\n%s\nwant the CPU %q", got, r.CPU.ModelName)
	}
	for _, e := range r.Engines {
		if !strings.Contains(got, e.Name+": "+e.State.String()) || !strings.Contains(got, e.Evidence) {
			t.Errorf("show crypto:\n%s\nwant engine %s, %s, found by %s", got, e.Name, e.State, e.Evidence)
		}
	}
}
