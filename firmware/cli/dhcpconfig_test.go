package cli

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/flashgate/flashgate/config"
)

func TestWriteDHCPSettings(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	addr := netip.MustParseAddr
	servers := []netdapi.DHCPServerState{{Link: "eth1", Pool: "192.168.1.100-192.168.1.199", LeaseTime: 12 * 3600,
		StaticLeases: []netdapi.StaticLease{
			{MAC: "02:00:5e:10:00:01", Address: addr("192.168.1.20"), Hostname: "printer"},
			{MAC: "02:00:5e:10:00:02", Address: addr("192.168.1.21")},
		},
		Leases: []netdapi.ServerLease{
			{MAC: "02:00:5e:10:00:01", Address: addr("192.168.1.20"), Hostname: "printer", Expires: now.Add(time.Hour), Static: true},
		}}}
	var b strings.Builder
	writeDHCPLeases(&b, servers, now)
	got := b.String()
	rest := got
	for _, w := range []string{
		"eth1: pool 192.168.1.100-192.168.1.199, 1 lease\n",
		"  leases last 12h; 2 static leases:\n",
		"    192.168.1.20     02:00:5e:10:00:01  printer\n",
		"    192.168.1.21     02:00:5e:10:00:02  -\n",
		"  192.168.1.20     02:00:5e:10:00:01  printer               static, in 1h0m0s\n",
	} {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("output:\n%s\nlacks, after the lines before it, %q", got, w)
		}
		rest = rest[i+len(w):]
	}

	c := config.Default()
	c.Interfaces = append(c.Interfaces, config.Interface{Name: "eth2", Role: config.RoleLAN, Enabled: true, Addressing: config.AddressingStatic,
		Addresses: []config.Prefix{config.MustPrefix("10.0.0.1/24")}, DHCPServer: config.DHCPServer{Enabled: config.Bool(false)}})
	opt := func(name string, s config.DHCPServer) config.Interface {
		return config.Interface{Name: name, Role: config.RoleOpt, Enabled: true, Addressing: config.AddressingStatic,
			Addresses: []config.Prefix{config.MustPrefix("10.3.0.1/24")}, DHCPServer: s}
	}
	c.Interfaces = append(c.Interfaces,
		opt("eth3", config.DHCPServer{}),                                // opt as ever: not named
		opt("eth4", config.DHCPServer{LeaseTime: config.Seconds(3600)}), // settings, never turned on
		opt("eth5", config.DHCPServer{Enabled: config.Bool(false)}),
		opt("eth6", config.DHCPServer{Enabled: config.Bool(true)})) // on: its server's absence is a fault, not a setting
	b.Reset()
	writeDHCPOff(&b, c, servers[:0])
	want := "eth2: DHCP server turned off (interfaces.eth2.dhcp_server.enabled false)\n" +
		"eth4: DHCP server not turned on (an opt interface serves only with interfaces.eth4.dhcp_server.enabled true)\n" +
		"eth5: DHCP server turned off (interfaces.eth5.dhcp_server.enabled false)\n"
	if got := b.String(); got != want {
		t.Errorf("writeDHCPOff:\n%s\nwant:\n%s(eth1 has no server running but is not turned off; eth3 is an opt interface without settings; eth6 is on)", got, want)
	}
}

// TestSetDHCPServer sets the DHCP server's fields with the console's path
// set, commits, and reads back what show dhcp says of a server turned off.
func TestSetDHCPServer(t *testing.T) {
	cd := startConfigd(t)
	netdSock := serveJSON(t, cd.dir, "netd", map[string]any{"GET /v1/status": netdapi.Status{
		Links: []netdapi.LinkStatus{}, Leases: []netdapi.Lease{}, DHCPServers: []netdapi.DHCPServerState{}}})
	term := startCLI(t, Options{User: "admin", Hostname: "fg", ConfigdSocket: cd.socket,
		SupervisorSocket: cd.dir + "/none.sock", IkedSocket: cd.dir + "/none.sock", NetdSocket: netdSock}, runCLI)
	term.expect(prompt)

	for _, l := range []string{
		"set interfaces.eth1.dhcp_server.range_start 192.168.1.100",
		"set interfaces.eth1.dhcp_server.range_end 192.168.1.199",
		"set interfaces.eth1.dhcp_server.lease_time 1h",
		"set interfaces.eth1.dhcp_server.static_leases 02:00:5e:10:00:01,192.168.1.20,printer",
		"set interfaces.eth1.dhcp_server.enabled false",
	} {
		term.send(l + "\r")
		term.expect(prompt)
	}
	term.send("set interfaces.eth1.dhcp_server.static_leases 02:00:5e:10:00:01\r")
	if got := term.expect(prompt); !strings.Contains(got, "write it as MAC,ADDRESS") {
		t.Errorf("a malformed static lease:\n%s\nwant the form it takes", got)
	}
	term.send("commit dhcp server settings\r")
	if got := term.expect(prompt); !strings.Contains(got, "Committed revision 2.") {
		t.Fatalf("commit said:\n%s\nwant Committed revision 2.", got)
	}
	running, _ := cd.store.Running()
	s := running.Interface("eth1").DHCPServer
	if s.Enabled.Or(true) || s.RangeStart.String() != "192.168.1.100" || s.RangeEnd.String() != "192.168.1.199" ||
		s.LeaseTime.String() != "1h0m0s" || len(s.StaticLeases) != 1 || s.StaticLeases[0].Hostname != "printer" {
		t.Errorf("running dhcp_server %+v, want it off with the range, 1h and the printer", s)
	}

	term.send("show dhcp\r")
	if got := term.expect(prompt); !strings.Contains(got, "eth1: DHCP server turned off") {
		t.Errorf("show dhcp:\n%s\nwant eth1's server reported turned off", got)
	}
	term.send("show dhcp eth1\r")
	if got := term.expect(prompt); !strings.Contains(got, "the DHCP server on eth1 is turned off") {
		t.Errorf("show dhcp eth1:\n%s\nwant that it is turned off", got)
	}

	// The same port as an opt network, its settings kept but enabled left
	// out: an opt interface serves only when turned on, and show dhcp says so.
	for _, l := range []string{"set interfaces.eth1.role opt", "delete interfaces.eth1.dhcp_server.enabled", "commit eth1 becomes opt"} {
		term.send(l + "\r")
		if got := term.expect(prompt); strings.Contains(got, "rror") {
			t.Fatalf("%s:\n%s", l, got)
		}
	}
	if opt, _ := cd.store.Running(); opt.Interface("eth1").Role != config.RoleOpt || opt.Interface("eth1").DHCPServer.Enabled.IsSet() {
		t.Fatalf("running eth1 %+v, want opt with enabled unset", opt.Interface("eth1"))
	}
	term.send("show dhcp\r")
	if got := term.expect(prompt); !strings.Contains(got, "eth1: DHCP server not turned on (an opt interface serves only with interfaces.eth1.dhcp_server.enabled true)") {
		t.Errorf("show dhcp:\n%s\nwant eth1's server reported not turned on", got)
	}
	term.send("show dhcp eth1\r")
	if got := term.expect(prompt); !strings.Contains(got, "the DHCP server on eth1 is off: opt interfaces serve only when turned on") {
		t.Errorf("show dhcp eth1:\n%s\nwant that an opt interface serves only when turned on", got)
	}

	// Completion knows the block's fields and that enabled is a switch.
	c := running.Clone()
	fields := completePath(c, "interfaces.eth1.dhcp_server.")
	for _, f := range []string{"enabled", "range_start", "range_end", "lease_time", "static_leases"} {
		if !slices.Contains(fields, "interfaces.eth1.dhcp_server."+f) {
			t.Errorf("completion of interfaces.eth1.dhcp_server.: %q, want %s among them", fields, f)
		}
	}
	if got := completeValue(c, "interfaces.eth1.dhcp_server.enabled"); !slices.Equal(got, []string{"true", "false"}) {
		t.Errorf("values for dhcp_server.enabled: %q, want true, false", got)
	}
}
