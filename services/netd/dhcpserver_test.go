package netd

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/flashgate/flashgate/config"
)

func dhcpMsg(t *testing.T, mac string, typ dhcpv4.MessageType, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	t.Helper()
	hw, _ := net.ParseMAC(mac)
	m, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithHwAddr(hw), dhcpv4.WithMessageType(typ)}, mods...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDHCPServerReply walks clients through the exchanges a LAN sees, in
// order, on a /29 whose pool is three addresses.
func TestDHCPServerReply(t *testing.T) {
	s, err := NewDHCPServer("lan0", netip.MustParsePrefix("192.168.7.1/29"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.Now = func() time.Time { return now }
	s.SetDNS([]netip.Addr{netip.MustParseAddr("9.9.9.9")})
	reqIP := func(ip string) dhcpv4.Modifier {
		return dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP(ip)))
	}
	server := dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP("192.168.7.1")))
	other := dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP("192.168.7.99")))
	const a, b, c, d = "02:00:00:00:00:0a", "02:00:00:00:00:0b", "02:00:00:00:00:0c", "02:00:00:00:00:0d"
	steps := []struct {
		name    string
		msg     *dhcpv4.DHCPv4
		advance time.Duration
		want    dhcpv4.MessageType // MessageTypeNone: no answer
		yiaddr  string
	}{
		{"a discovers and gets the first address", dhcpMsg(t, a, dhcpv4.MessageTypeDiscover), 0, dhcpv4.MessageTypeOffer, "192.168.7.4"},
		{"a requests it", dhcpMsg(t, a, dhcpv4.MessageTypeRequest, reqIP("192.168.7.4"), server), 0, dhcpv4.MessageTypeAck, "192.168.7.4"},
		{"b asks for a's address and gets another", dhcpMsg(t, b, dhcpv4.MessageTypeDiscover, reqIP("192.168.7.4")), 0, dhcpv4.MessageTypeOffer, "192.168.7.5"},
		{"b requesting a's address is refused", dhcpMsg(t, b, dhcpv4.MessageTypeRequest, reqIP("192.168.7.4"), server), 0, dhcpv4.MessageTypeNak, ""},
		{"b requests its offer", dhcpMsg(t, b, dhcpv4.MessageTypeRequest, reqIP("192.168.7.5"), server), 0, dhcpv4.MessageTypeAck, "192.168.7.5"},
		{"c asks for a free address and gets it", dhcpMsg(t, c, dhcpv4.MessageTypeDiscover, reqIP("192.168.7.6")), 0, dhcpv4.MessageTypeOffer, "192.168.7.6"},
		{"c picks another server's offer", dhcpMsg(t, c, dhcpv4.MessageTypeRequest, reqIP("192.168.7.6"), other), 0, dhcpv4.MessageTypeNone, ""},
		{"d gets the address c turned down", dhcpMsg(t, d, dhcpv4.MessageTypeDiscover), 0, dhcpv4.MessageTypeOffer, "192.168.7.6"},
		{"c finds the pool exhausted", dhcpMsg(t, c, dhcpv4.MessageTypeDiscover), 0, dhcpv4.MessageTypeNone, ""},
		{"an address outside the pool is refused", dhcpMsg(t, c, dhcpv4.MessageTypeRequest, reqIP("192.168.7.2"), server), 0, dhcpv4.MessageTypeNak, ""},
		{"a renews (ciaddr, no requested address)", dhcpMsg(t, a, dhcpv4.MessageTypeRequest, dhcpv4.WithClientIP(net.ParseIP("192.168.7.4"))), 6 * time.Hour, dhcpv4.MessageTypeAck, "192.168.7.4"},
		{"b releases", dhcpMsg(t, b, dhcpv4.MessageTypeRelease, dhcpv4.WithClientIP(net.ParseIP("192.168.7.5"))), 0, dhcpv4.MessageTypeNone, ""},
		{"c gets b's released address", dhcpMsg(t, c, dhcpv4.MessageTypeDiscover), 0, dhcpv4.MessageTypeOffer, "192.168.7.5"},
		{"after d's offer lapsed and a's lease ended, b gets one", dhcpMsg(t, b, dhcpv4.MessageTypeDiscover), 13 * time.Hour, dhcpv4.MessageTypeOffer, "192.168.7.4"},
	}
	for _, st := range steps {
		now = now.Add(st.advance)
		got := s.Reply(st.msg)
		if st.want == dhcpv4.MessageTypeNone {
			if got != nil {
				t.Fatalf("%s: want no answer, got %s", st.name, got.MessageType())
			}
			continue
		}
		if got == nil {
			t.Fatalf("%s: want %s, got no answer", st.name, st.want)
		}
		if got.MessageType() != st.want {
			t.Fatalf("%s: want %s, got %s", st.name, st.want, got.MessageType())
		}
		if st.yiaddr != "" && got.YourIPAddr.String() != st.yiaddr {
			t.Fatalf("%s: want address %s, got %s", st.name, st.yiaddr, got.YourIPAddr)
		}
		if st.want == dhcpv4.MessageTypeAck {
			if r := got.Router(); len(r) != 1 || !r[0].Equal(net.ParseIP("192.168.7.1")) {
				t.Errorf("%s: router option %v, want 192.168.7.1", st.name, r)
			}
			if m, _ := got.SubnetMask().Size(); m != 29 {
				t.Errorf("%s: mask /%d, want /29", st.name, m)
			}
			if dns := got.DNS(); len(dns) != 1 || !dns[0].Equal(net.ParseIP("9.9.9.9")) {
				t.Errorf("%s: DNS %v, want the WAN's 9.9.9.9", st.name, dns)
			}
			if lt := got.IPAddressLeaseTime(0); lt != 12*time.Hour {
				t.Errorf("%s: lease time %s, want 12h", st.name, lt)
			}
		}
	}
}

// FuzzDHCPServerReply feeds arbitrary packets from the LAN to the server
// logic: it must never panic, and whatever it offers is in its pool.
func FuzzDHCPServerReply(f *testing.F) {
	for _, typ := range []dhcpv4.MessageType{dhcpv4.MessageTypeDiscover, dhcpv4.MessageTypeRequest, dhcpv4.MessageTypeRelease, dhcpv4.MessageTypeDecline} {
		hw, _ := net.ParseMAC("02:00:00:00:00:01")
		m, _ := dhcpv4.New(dhcpv4.WithHwAddr(hw), dhcpv4.WithMessageType(typ),
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("192.168.1.130"))))
		f.Add(m.ToBytes())
	}
	s, err := NewDHCPServer("lan0", netip.MustParsePrefix("192.168.1.1/24"))
	if err != nil {
		f.Fatal(err)
	}
	first, last, _ := config.DefaultDHCPRange(s.Address)
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
		if !ok || a.Less(first) || last.Less(a) || a == s.Address.Addr() {
			t.Fatalf("answered %s with address %v, outside the pool %s-%s", r.MessageType(), r.YourIPAddr, first, last)
		}
	})
}
