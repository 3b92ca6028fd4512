package netd

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/config"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/vishvananda/netns"
)

func TestFromConfigDHCPScope(t *testing.T) {
	const path = "interfaces[lan0].dhcp_server"
	lan := netip.MustParsePrefix("192.168.50.1/24")
	tests := []struct {
		name  string
		edit  func(ifc *config.Interface)
		want  []DHCPScope
		rules bool // the firewall opens UDP 67 on the LAN
	}{
		{"no block: the automatic pool, as before the block existed", func(*config.Interface) {},
			[]DHCPScope{{Link: "lan0", Address: lan, First: netip.MustParseAddr("192.168.50.128"), Last: netip.MustParseAddr("192.168.50.254"),
				LeaseTime: 12 * time.Hour, Path: path}}, true},
		{"turned off", func(ifc *config.Interface) { ifc.DHCPServer.Enabled = config.Bool(false) }, nil, false},
		{"interface disabled", func(ifc *config.Interface) { ifc.Enabled = false }, nil, false},
		{"/30 without a block: none, as before", func(ifc *config.Interface) {
			ifc.Addresses = []config.Prefix{config.MustPrefix("192.168.50.1/30")}
		}, nil, false},
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
	old := []ServerLease{
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
	rtNS, err := netns.GetFromName(l.rt.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer rtNS.Close()
	d := NewDaemon(ctx, boards.Board{Name: "lab"}, &Reconciler{NFT: l.nft, Netlink: l.nl})
	d.InNS = func(f func() error) error { return inNetNS(rtNS, f) }

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
	servers := func() []DHCPServerState { return d.Status().DHCPServers }
	dhcpRule := func() bool {
		rules, err := l.nft.Rules()
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(rules, func(r RuleCounter) bool { return r.Comment == "builtin:lan-dhcp" })
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
