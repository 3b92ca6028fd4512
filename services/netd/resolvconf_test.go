package netd

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/insomniacslk/dhcp/rfc1035label"

	"github.com/flashgate/flashgate/config"
)

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestResolvConf(t *testing.T) {
	cases := []struct {
		name   string
		leases []*netdapi.Lease
		want   string
	}{
		{"no lease", nil,
			"# Written by netd: no DHCP lease on a WAN link gives DNS servers.\n"},
		{"a lease without DNS servers", []*netdapi.Lease{{Link: "eth0", Search: []string{"example.net"}}},
			"# Written by netd: no DHCP lease on a WAN link gives DNS servers.\n"},
		{"servers and a search domain", []*netdapi.Lease{{Link: "eth0", DNS: addrs("192.0.2.53", "2001:db8::53"), Search: []string{"example.net"}}},
			"# Written by netd from the DHCP lease on eth0; rewritten when it changes.\n" +
				"search example.net\nnameserver 192.0.2.53\nnameserver 2001:db8::53\n"},
		{"at most three servers, the first lease's first, without duplicates", []*netdapi.Lease{
			{Link: "eth0", DNS: addrs("192.0.2.53", "192.0.2.54"), Search: []string{"a.example"}},
			{Link: "eth2", DNS: addrs("192.0.2.54", "198.51.100.53", "198.51.100.54"), Search: []string{"b.example", "a.example"}},
		}, "# Written by netd from the DHCP lease on eth0, eth2; rewritten when it changes.\n" +
			"search a.example b.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nnameserver 198.51.100.53\n"},
	}
	for _, c := range cases {
		if got := string(resolvConf(c.leases)); got != c.want {
			t.Errorf("%s: resolv.conf\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
}

// TestLeaseSearchDomains: the search list (option 119) wins over the
// domain name (option 15), and a name that could smuggle a line into
// resolv.conf is dropped.
func TestLeaseSearchDomains(t *testing.T) {
	search := func(names ...string) dhcpv4.Modifier {
		return dhcpv4.WithOption(dhcpv4.OptDomainSearch(&rfc1035label.Labels{Labels: names}))
	}
	cases := []struct {
		name string
		mods []dhcpv4.Modifier
		want []string
	}{
		{"none", nil, nil},
		{"domain name", []dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptDomainName("corp.example."))}, []string{"corp.example"}},
		{"search list over domain name", []dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptDomainName("corp.example")),
			search("a.example", "b.example")}, []string{"a.example", "b.example"}},
		{"a newline is no DNS name", []dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptDomainName("evil.example\nnameserver 203.0.113.66"))}, nil},
		{"spaces are not either", []dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptDomainName("a.example b.example"))}, nil},
	}
	for _, c := range cases {
		mods := append([]dhcpv4.Modifier{dhcpv4.WithMessageType(dhcpv4.MessageTypeAck),
			dhcpv4.WithYourIP(net.IPv4(192, 0, 2, 10)), dhcpv4.WithDNS(net.IPv4(192, 0, 2, 53))}, c.mods...)
		ack, err := dhcpv4.New(mods...)
		if err != nil {
			t.Fatal(err)
		}
		l, err := leaseFrom("eth0", &nclient4.Lease{ACK: ack, CreationTime: time.Now()})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !slices.Equal(l.Search, c.want) || !slices.Equal(l.DNS, addrs("192.0.2.53")) {
			t.Errorf("%s: search %q, DNS %v; want search %q, DNS [192.0.2.53]", c.name, l.Search, l.DNS, c.want)
		}
	}
}

// TestResolvConfFollowsLease runs the daemon on the lab's router against a
// DHCP server on the WAN side offering DNS servers (option 6) with a short
// lease: resolv.conf gets the first three, is rewritten when a renewal
// brings others, and loses them when the WAN stops using DHCP.
func TestResolvConfFollowsLease(t *testing.T) {
	l := newLab(t)
	path := filepath.Join(t.TempDir(), "resolv.conf")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	isp, err := NewDHCPServer("eth0", netip.MustParsePrefix("10.99.0.2/24"))
	if err != nil {
		t.Fatal(err)
	}
	isp.LeaseTime = 4 * time.Second
	isp.SetDNS(addrs("10.99.0.53", "10.99.0.54", "10.99.0.55", "10.99.0.56"))
	go do(l.wan, func() error { return isp.Serve(ctx) })

	d := l.daemon(t, ctx)
	d.ResolvConf = path
	cfg := labConfig()
	if err := d.SetConfig(cfg, 1, "test"); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}

	nameservers := func() []string {
		b, _ := os.ReadFile(path)
		var out []string
		for _, line := range strings.Split(string(b), "\n") {
			if a, ok := strings.CutPrefix(line, "nameserver "); ok {
				out = append(out, a)
			}
		}
		return out
	}
	expect := func(within time.Duration, what string, want ...string) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !slices.Equal(nameservers(), want) {
			if time.Now().After(deadline) {
				b, err := os.ReadFile(path)
				t.Fatalf("%s: after %s resolv.conf holds\n%s(%v)\nwant nameservers %v", what, within, b, err, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	expect(20*time.Second, "the first lease", "10.99.0.53", "10.99.0.54", "10.99.0.55")

	// The next renewal (T1 = 2 s) brings the new servers.
	isp.SetDNS(addrs("10.99.0.99"))
	expect(10*time.Second, "a renewal with other DNS servers", "10.99.0.99")

	// A static WAN has no lease, so no servers.
	static := labConfig()
	static.Interfaces[0].Addressing = config.AddressingStatic
	static.Interfaces[0].Addresses = []config.Prefix{config.MustPrefix("10.99.0.1/24")}
	if err := static.Validate(); err != nil {
		t.Fatalf("the static configuration is invalid for config: %v", err)
	}
	if err := d.SetConfig(static, 2, "test"); err != nil {
		t.Fatalf("SetConfig (static WAN): %v", err)
	}
	expect(time.Second, "a static WAN")
}
