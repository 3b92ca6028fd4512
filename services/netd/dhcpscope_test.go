package netd

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"

	"github.com/flashgate/flashgate/config"
)

func TestFromConfigDHCPScope(t *testing.T) {
	const path = "interfaces[lan0].dhcp_server"
	lan := netip.MustParsePrefix("192.168.50.1/24")
	tests := []struct {
		name  string
		edit  func(ifc *config.Interface)
		want  []DHCPScope
		rules bool // the firewall opens UDP 67 on the link
	}{
		{"no block: the automatic pool, as before the block existed", func(*config.Interface) {},
			[]DHCPScope{{Link: "lan0", Address: lan, First: netip.MustParseAddr("192.168.50.128"), Last: netip.MustParseAddr("192.168.50.254"),
				LeaseTime: 12 * time.Hour, Path: path}}, true},
		{"turned off", func(ifc *config.Interface) { ifc.DHCPServer.Enabled = config.Bool(false) }, nil, false},
		{"interface disabled", func(ifc *config.Interface) { ifc.Enabled = false }, nil, false},
		{"/30 without a block: none, as before", func(ifc *config.Interface) {
			ifc.Addresses = []config.Prefix{config.MustPrefix("192.168.50.1/30")}
		}, nil, false},
		{"opt without a block: none (only a LAN serves by default)", func(ifc *config.Interface) { ifc.Role = config.RoleOpt }, nil, false},
		{"opt with settings but enabled unset: none", func(ifc *config.Interface) {
			ifc.Role, ifc.DHCPServer = config.RoleOpt, config.DHCPServer{LeaseTime: config.Seconds(600)}
		}, nil, false},
		{"opt enabled: the automatic pool", func(ifc *config.Interface) {
			ifc.Role, ifc.DHCPServer = config.RoleOpt, config.DHCPServer{Enabled: config.Bool(true)}
		}, []DHCPScope{{Link: "lan0", Address: lan, First: netip.MustParseAddr("192.168.50.128"), Last: netip.MustParseAddr("192.168.50.254"),
			LeaseTime: 12 * time.Hour, Path: path}}, true},
		{"range, lease time and static leases", func(ifc *config.Interface) {
			ifc.DHCPServer = config.DHCPServer{RangeStart: config.MustAddr("192.168.50.100"), RangeEnd: config.MustAddr("192.168.50.110"),
				LeaseTime: config.Seconds(600), StaticLeases: []config.StaticLease{
					{MAC: "02:00:5E:10:00:01", Address: config.MustAddr("192.168.50.5"), Hostname: "printer"}}}
		}, []DHCPScope{{Link: "lan0", Address: lan, First: netip.MustParseAddr("192.168.50.100"), Last: netip.MustParseAddr("192.168.50.110"),
			LeaseTime: 10 * time.Minute, Path: path,
			Reservations: []Reservation{{MAC: "02:00:5e:10:00:01", Address: netip.MustParseAddr("192.168.50.5"), Hostname: "printer"}}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := labConfig()
			tt.edit(c.Interface("lan0"))
			if err := c.Validate(); err != nil {
				t.Fatalf("the test's configuration is invalid: %v", err)
			}
			d := FromConfig(c)
			if !slices.EqualFunc(d.DHCPServers, tt.want, DHCPScope.Equal) || (len(tt.want) > 0 && d.DHCPServers[0].Path != path) {
				t.Errorf("DHCP servers %+v, want %+v", d.DHCPServers, tt.want)
			}
			if serves := slices.Contains(d.Firewall.DHCPServers, "lan0"); serves != tt.rules {
				t.Errorf("firewall opens DHCP on lan0: %v, want %v", serves, tt.rules)
			}
			if err := d.Validate(); err != nil {
				t.Errorf("netd refuses the desired state: %v", err)
			}
		})
	}
}

// TestDHCPServerStaticLeases walks clients through a configured scope: a
// range of three addresses, one of them reserved for a static lease, and a
// second static lease outside the range.
func TestDHCPServerStaticLeases(t *testing.T) {
	const a, b, c, printer, nas = "02:00:00:00:00:0a", "02:00:00:00:00:0b", "02:00:00:00:00:0c", "02:00:5e:10:00:01", "02:00:5e:10:00:02"
	s, err := NewScopeServer(DHCPScope{Link: "lan0", Address: netip.MustParsePrefix("192.168.7.1/24"),
		First: netip.MustParseAddr("192.168.7.10"), Last: netip.MustParseAddr("192.168.7.12"), LeaseTime: 10 * time.Minute,
		Reservations: []Reservation{
			{MAC: printer, Address: netip.MustParseAddr("192.168.7.11"), Hostname: "printer"},
			{MAC: nas, Address: netip.MustParseAddr("192.168.7.50")},
		}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.Now = func() time.Time { return now }
	reqIP := func(ip string) dhcpv4.Modifier {
		return dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP(ip)))
	}
	server := dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP("192.168.7.1")))
	steps := []struct {
		name     string
		msg      *dhcpv4.DHCPv4
		want     dhcpv4.MessageType // MessageTypeNone: no answer
		yiaddr   string
		hostname string // option 12 in the answer
	}{
		{"a gets the first address of the range", dhcpMsg(t, a, dhcpv4.MessageTypeDiscover), dhcpv4.MessageTypeOffer, "192.168.7.10", ""},
		{"a requests it", dhcpMsg(t, a, dhcpv4.MessageTypeRequest, reqIP("192.168.7.10"), server), dhcpv4.MessageTypeAck, "192.168.7.10", ""},
		{"b skips the printer's address", dhcpMsg(t, b, dhcpv4.MessageTypeDiscover), dhcpv4.MessageTypeOffer, "192.168.7.12", ""},
		{"b may not request the printer's address", dhcpMsg(t, b, dhcpv4.MessageTypeRequest, reqIP("192.168.7.11"), server), dhcpv4.MessageTypeNak, "", ""},
		{"b takes its offer", dhcpMsg(t, b, dhcpv4.MessageTypeRequest, reqIP("192.168.7.12"), server), dhcpv4.MessageTypeAck, "192.168.7.12", ""},
		{"c finds the pool exhausted (the reserved address is not in it)", dhcpMsg(t, c, dhcpv4.MessageTypeDiscover), dhcpv4.MessageTypeNone, "", ""},
		{"the printer gets its address whatever it asks for", dhcpMsg(t, printer, dhcpv4.MessageTypeDiscover, reqIP("192.168.7.10")), dhcpv4.MessageTypeOffer, "192.168.7.11", "printer"},
		{"the printer may not request another", dhcpMsg(t, printer, dhcpv4.MessageTypeRequest, reqIP("192.168.7.12"), server), dhcpv4.MessageTypeNak, "", ""},
		{"the printer requests its own", dhcpMsg(t, printer, dhcpv4.MessageTypeRequest, reqIP("192.168.7.11"), server), dhcpv4.MessageTypeAck, "192.168.7.11", "printer"},
		{"the NAS gets its address outside the range", dhcpMsg(t, nas, dhcpv4.MessageTypeDiscover), dhcpv4.MessageTypeOffer, "192.168.7.50", ""},
		{"the NAS requests it", dhcpMsg(t, nas, dhcpv4.MessageTypeRequest, reqIP("192.168.7.50"), server), dhcpv4.MessageTypeAck, "192.168.7.50", ""},
		{"a may not take the NAS's address", dhcpMsg(t, a, dhcpv4.MessageTypeRequest, reqIP("192.168.7.50"), server), dhcpv4.MessageTypeNak, "", ""},
	}
	for _, st := range steps {
		got := s.Reply(st.msg)
		if st.want == dhcpv4.MessageTypeNone {
			if got != nil {
				t.Fatalf("%s: want no answer, got %s %s", st.name, got.MessageType(), got.YourIPAddr)
			}
			continue
		}
		if got == nil || got.MessageType() != st.want {
			t.Fatalf("%s: want %s, got %v", st.name, st.want, got)
		}
		if st.yiaddr != "" && got.YourIPAddr.String() != st.yiaddr {
			t.Fatalf("%s: want address %s, got %s", st.name, st.yiaddr, got.YourIPAddr)
		}
		if h := got.HostName(); st.want != dhcpv4.MessageTypeNak && h != st.hostname {
			t.Errorf("%s: host name option %q, want %q", st.name, h, st.hostname)
		}
		if st.want == dhcpv4.MessageTypeAck {
			if lt := got.IPAddressLeaseTime(0); lt != 10*time.Minute {
				t.Errorf("%s: lease time %s, want the configured 10m", st.name, lt)
			}
		}
	}
	var static []string
	for _, l := range s.Leases() {
		if l.Static {
			static = append(static, l.Address.String()+" "+l.Hostname)
		}
	}
	if want := []string{"192.168.7.11 printer", "192.168.7.50 "}; !slices.Equal(static, want) {
		t.Errorf("static leases in the lease list: %q, want %q", static, want)
	}
}

// TestDHCPServerAdopt: a server restarted with other settings keeps the
// leases that still fit and drops the others.
func TestDHCPServerAdopt(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lan := netip.MustParsePrefix("192.168.7.1/24")
	exp := now.Add(time.Hour)
	old := []netdapi.ServerLease{
		{MAC: "02:00:00:00:00:0a", Address: netip.MustParseAddr("192.168.7.20"), Expires: exp},                // still in the range
		{MAC: "02:00:00:00:00:0b", Address: netip.MustParseAddr("192.168.7.40"), Expires: exp},                // now outside it
		{MAC: "02:00:00:00:00:0c", Address: netip.MustParseAddr("192.168.7.21"), Expires: exp},                // its address is now reserved
		{MAC: "02:00:00:00:00:0d", Address: netip.MustParseAddr("192.168.7.22"), Expires: exp, Offered: true}, // only offered
		{MAC: "02:00:00:00:00:0e", Address: netip.MustParseAddr("192.168.7.23"), Expires: now.Add(-time.Second)},
	}
	s, err := NewScopeServer(DHCPScope{Link: "lan0", Address: lan, First: netip.MustParseAddr("192.168.7.20"), Last: netip.MustParseAddr("192.168.7.30"),
		LeaseTime: time.Hour, Reservations: []Reservation{{MAC: "02:00:5e:10:00:01", Address: netip.MustParseAddr("192.168.7.21")}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Now = func() time.Time { return now }
	s.Adopt(old)
	var got []string
	for _, l := range s.Leases() {
		got = append(got, l.MAC+" "+l.Address.String())
	}
	if want := []string{"02:00:00:00:00:0a 192.168.7.20"}; !slices.Equal(got, want) {
		t.Errorf("adopted %q, want %q", got, want)
	}
}

// lanRequest runs one DHCP exchange from the lab's LAN host and returns
// the ACK, or the error when no server answers within the client's two
// tries.
func lanRequest(l *lab) (*dhcpv4.DHCPv4, error) {
	var ack *dhcpv4.DHCPv4
	err := do(l.lan, func() error {
		c, err := nclient4.New("eth0", nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(2))
		if err != nil {
			return err
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		lease, err := c.Request(ctx)
		if err != nil {
			return err
		}
		ack = lease.ACK
		return nil
	})
	return ack, err
}

// TestDaemonDHCPServerSettings drives netd's LAN DHCP server through the
// configuration with a real client on the LAN host: a static lease for the
// host, then a new range (the server restarts on it), then the server
// turned off (nothing answers, and the firewall closes UDP 67).
func TestDaemonDHCPServerSettings(t *testing.T) {
	l := newLab(t)
	var hostMAC string
	if err := do(l.lan, func() error {
		ifc, err := net.InterfaceByName("eth0")
		if err == nil {
			hostMAC = ifc.HardwareAddr.String()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := l.daemon(t, ctx)

	apply := func(rev uint64, edit func(s *config.DHCPServer)) {
		t.Helper()
		c := labConfig()
		wan := c.Interface("wan0") // static: no DHCP client looking for an ISP
		wan.Addressing, wan.Addresses = config.AddressingStatic, []config.Prefix{config.MustPrefix("10.99.0.1/24")}
		edit(&c.Interface("lan0").DHCPServer)
		if err := c.Validate(); err != nil {
			t.Fatalf("revision %d is invalid for config: %v", rev, err)
		}
		if err := d.SetConfig(c, rev, "test"); err != nil {
			t.Fatalf("revision %d: SetConfig: %v", rev, err)
		}
	}
	servers := func() []netdapi.DHCPServerState { return d.Status().DHCPServers }
	dhcpRule := func() bool {
		rules, err := l.nft.Rules()
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(rules, func(r netdapi.RuleCounter) bool { return r.Comment == "builtin:lan-dhcp" })
	}

	// 1. A static lease for the host, inside a small range.
	apply(1, func(s *config.DHCPServer) {
		*s = config.DHCPServer{Enabled: config.Bool(true), RangeStart: config.MustAddr("192.168.50.10"), RangeEnd: config.MustAddr("192.168.50.19"),
			LeaseTime: config.Seconds(600), StaticLeases: []config.StaticLease{{MAC: hostMAC, Address: config.MustAddr("192.168.50.15"), Hostname: "printer"}}}
	})
	ack, err := lanRequest(l)
	if err != nil {
		t.Fatalf("static lease: the LAN host got no lease: %v", err)
	}
	if ack.YourIPAddr.String() != "192.168.50.15" || ack.IPAddressLeaseTime(0) != 10*time.Minute || ack.HostName() != "printer" {
		t.Errorf("static lease: got %s for %s named %q, want 192.168.50.15 for 10m named printer",
			ack.YourIPAddr, ack.IPAddressLeaseTime(0), ack.HostName())
	}
	if st := servers(); len(st) != 1 || st[0].Pool != "192.168.50.10-192.168.50.19" || st[0].LeaseTime != 600 ||
		len(st[0].StaticLeases) != 1 || len(st[0].Leases) != 1 || !st[0].Leases[0].Static {
		t.Errorf("status after the static lease: %+v", st)
	}
	if !dhcpRule() {
		t.Errorf("the firewall does not open UDP 67 on the LAN while the server runs")
	}

	// 2. A new range, no static lease: the server restarts on it.
	apply(2, func(s *config.DHCPServer) {
		*s = config.DHCPServer{RangeStart: config.MustAddr("192.168.50.20"), RangeEnd: config.MustAddr("192.168.50.29")}
	})
	if st := servers(); len(st) != 1 || st[0].Pool != "192.168.50.20-192.168.50.29" || st[0].LeaseTime != 12*3600 || len(st[0].StaticLeases) != 0 {
		t.Errorf("status after the range change: %+v", st)
	}
	ack, err = lanRequest(l)
	if err != nil {
		t.Fatalf("new range: the LAN host got no lease from the restarted server: %v", err)
	}
	if ack.YourIPAddr.String() != "192.168.50.20" || ack.IPAddressLeaseTime(0) != 12*time.Hour {
		t.Errorf("new range: got %s for %s, want 192.168.50.20 for the default 12h", ack.YourIPAddr, ack.IPAddressLeaseTime(0))
	}

	// 3. Turned off: nothing answers, and the firewall closes the port.
	apply(3, func(s *config.DHCPServer) { s.Enabled = config.Bool(false) })
	if st := servers(); len(st) != 0 {
		t.Errorf("status after turning the server off: %+v, want no server", st)
	}
	if ack, err := lanRequest(l); err == nil {
		t.Errorf("the server is off, yet the LAN host got %s", ack.YourIPAddr)
	}
	if dhcpRule() {
		t.Errorf("the server is off, yet the firewall still opens UDP 67 on the LAN")
	}

	// 4. The block removed: the automatic pool, as before the block existed.
	apply(4, func(s *config.DHCPServer) { *s = config.DHCPServer{} })
	ack, err = lanRequest(l)
	if err != nil {
		t.Fatalf("automatic pool: the LAN host got no lease: %v", err)
	}
	if ack.YourIPAddr.String() != "192.168.50.128" {
		t.Errorf("automatic pool: got %s, want 192.168.50.128", ack.YourIPAddr)
	}
}

// TestDaemonDHCPServerOnOpt makes the lab's LAN link an opt network (a
// guest Wi-Fi) and drives its DHCP server through the configuration with
// a real client on the host there: without a block nothing serves and the
// firewall keeps UDP 67 closed; enabled, the host gets a lease through the
// opt-dhcp rule while its connections to the web UI stay dropped, as they
// would not be from a LAN; turned off again, the port closes.
func TestDaemonDHCPServerOnOpt(t *testing.T) {
	l := newLab(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := l.daemon(t, ctx)

	apply := func(rev uint64, s config.DHCPServer) {
		t.Helper()
		c := labConfig()
		wan := c.Interface("wan0") // static: no DHCP client looking for an ISP
		wan.Addressing, wan.Addresses = config.AddressingStatic, []config.Prefix{config.MustPrefix("10.99.0.1/24")}
		opt := c.Interface("lan0")
		opt.Role, opt.DHCPServer = config.RoleOpt, s
		if err := c.Validate(); err != nil {
			t.Fatalf("revision %d is invalid for config: %v", rev, err)
		}
		if err := d.SetConfig(c, rev, "test"); err != nil {
			t.Fatalf("revision %d: SetConfig: %v", rev, err)
		}
	}
	// optDHCP is the firewall's opt-dhcp rule, if it has one.
	optDHCP := func() (netdapi.RuleCounter, bool) {
		rs, err := l.nft.Rules()
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(rs, func(r netdapi.RuleCounter) bool { return r.Comment == "builtin:opt-dhcp" })
		if i < 0 {
			return netdapi.RuleCounter{}, false
		}
		return rs[i], true
	}
	// webUIDropped reports whether a connection from the opt host to the
	// box's web UI port is dropped: nothing listens there, so a firewall
	// that let the SYN in would have it refused at once instead.
	webUIDropped := func() bool {
		var err error
		if e := do(l.lan, func() error {
			var c net.Conn
			if c, err = net.DialTimeout("tcp", netip.AddrPortFrom(rtLAN, 443).String(), time.Second); err == nil {
				c.Close()
			}
			return nil
		}); e != nil {
			t.Fatal(e)
		}
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	}

	// 1. No block: an opt link does not serve, as before opt could.
	apply(1, config.DHCPServer{})
	if st := d.Status().DHCPServers; len(st) != 0 {
		t.Errorf("opt without a dhcp_server block runs a server: %+v", st)
	}
	if r, ok := optDHCP(); ok {
		t.Errorf("opt without a server, yet the firewall opens UDP 67: %+v", r)
	}
	if ack, err := lanRequest(l); err == nil {
		t.Errorf("opt without a server, yet its host got %s", ack.YourIPAddr)
	}

	// 2. Enabled: a lease from the range, through the opt-dhcp rule only.
	apply(2, config.DHCPServer{Enabled: config.Bool(true), RangeStart: config.MustAddr("192.168.50.40"),
		RangeEnd: config.MustAddr("192.168.50.49"), LeaseTime: config.Seconds(900)})
	ack, err := lanRequest(l)
	if err != nil {
		t.Fatalf("opt server enabled: the host got no lease: %v", err)
	}
	if ack.YourIPAddr.String() != "192.168.50.40" || ack.IPAddressLeaseTime(0) != 15*time.Minute ||
		len(ack.Router()) != 1 || ack.Router()[0].String() != "192.168.50.1" {
		t.Errorf("opt lease: got %s for %s via %v, want 192.168.50.40 for 15m via 192.168.50.1",
			ack.YourIPAddr, ack.IPAddressLeaseTime(0), ack.Router())
	}
	if st := d.Status().DHCPServers; len(st) != 1 || st[0].Link != "lan0" || len(st[0].Leases) != 1 {
		t.Errorf("status with the opt server: %+v", st)
	}
	if r, ok := optDHCP(); !ok || r.Packets == 0 {
		t.Errorf("the host's requests did not pass the opt-dhcp rule (%+v, present %v)", r, ok)
	}
	if !webUIDropped() {
		t.Errorf("the opt host's connection to the web UI port was not dropped: serving DHCP opened more than UDP 67")
	}

	// 3. Turned off: nothing answers, and the firewall closes the port.
	apply(3, config.DHCPServer{Enabled: config.Bool(false), RangeStart: config.MustAddr("192.168.50.40"),
		RangeEnd: config.MustAddr("192.168.50.49")})
	if st := d.Status().DHCPServers; len(st) != 0 {
		t.Errorf("status after turning the opt server off: %+v, want no server", st)
	}
	if r, ok := optDHCP(); ok {
		t.Errorf("the opt server is off, yet the firewall still opens UDP 67: %+v", r)
	}
	if ack, err := lanRequest(l); err == nil {
		t.Errorf("the opt server is off, yet its host got %s", ack.YourIPAddr)
	}
}

// FuzzScopeReply feeds arbitrary packets to a server with a configured
// range and static leases: it must never panic, and whatever it offers or
// acknowledges is the client's static lease, or else an address of the
// range that is neither the box's own nor reserved for another client.
func FuzzScopeReply(f *testing.F) {
	const printer = "02:00:5e:10:00:01"
	for _, mac := range []string{printer, "02:00:00:00:00:0a"} {
		for _, typ := range []dhcpv4.MessageType{dhcpv4.MessageTypeDiscover, dhcpv4.MessageTypeRequest, dhcpv4.MessageTypeRelease, dhcpv4.MessageTypeDecline} {
			hw, _ := net.ParseMAC(mac)
			m, _ := dhcpv4.New(dhcpv4.WithHwAddr(hw), dhcpv4.WithMessageType(typ),
				dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("192.168.1.20"))))
			f.Add(m.ToBytes())
		}
	}
	sc := DHCPScope{Link: "lan0", Address: netip.MustParsePrefix("192.168.1.1/24"),
		First: netip.MustParseAddr("192.168.1.1"), Last: netip.MustParseAddr("192.168.1.30"), LeaseTime: time.Hour,
		Reservations: []Reservation{{MAC: printer, Address: netip.MustParseAddr("192.168.1.20"), Hostname: "printer"},
			{MAC: "02:00:5e:10:00:02", Address: netip.MustParseAddr("192.168.1.200")}}}
	s, err := NewScopeServer(sc)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := dhcpv4.FromBytes(b)
		if err != nil {
			return
		}
		r := s.Reply(m)
		if r == nil || r.MessageType() == dhcpv4.MessageTypeNak {
			return
		}
		a, ok := netip.AddrFromSlice(r.YourIPAddr.To4())
		mac := m.ClientHWAddr.String()
		for _, res := range sc.Reservations {
			if res.MAC == mac {
				if a != res.Address {
					t.Fatalf("answered %s with %v, want its static lease %s", mac, r.YourIPAddr, res.Address)
				}
				return
			}
			if a == res.Address {
				t.Fatalf("answered %s with %s, the static lease of %s", mac, a, res.MAC)
			}
		}
		if !ok || a.Less(sc.First) || sc.Last.Less(a) || a == sc.Address.Addr() {
			t.Fatalf("answered %s with address %v, outside the pool %s-%s or the box's own", r.MessageType(), r.YourIPAddr, sc.First, sc.Last)
		}
	})
}
