package netd

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/waitfor"

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"

	"github.com/flashgate/flashgate/config"
)

// labConfig is the lab's router as an admin would configure it: WAN on
// DHCP, LAN static, a tunnel and a port forward. fgesp0 stands for the
// tunnel's decrypted side and is not in the configuration, so netd leaves
// it alone.
func labConfig() *config.Config {
	c := config.DefaultForNICs([]config.NIC{{Name: "wan0", Role: config.RoleWAN}, {Name: "lan0", Role: config.RoleLAN}})
	c.Interfaces[1].Addresses = []config.Prefix{config.MustPrefix("192.168.50.1/24")}
	t := config.NewTunnel("branch")
	t.RemoteAddress = config.MustAddr("10.99.0.2")
	t.PSK = config.NewSecret("not-used-by-netd-0123456789")
	t.LocalSubnets = []config.Prefix{config.MustPrefix("192.168.50.0/24")}
	t.RemoteSubnets = []config.Prefix{config.MustPrefix("172.16.9.0/24")}
	c.Tunnels = []config.Tunnel{t}
	c.Firewall.PortForwards = []config.PortForward{{Name: "web", Enabled: true, In: config.RoleWAN, Protocol: "tcp",
		ExternalPorts: config.Port(8080), Destination: config.MustAddr("192.168.50.2"), DestinationPort: 80}}
	return c
}

// TestDaemon runs netd's daemon on the lab's router from a configuration:
// the WAN gets its address from a DHCP server on the WAN side, the LAN host
// gets one from netd's DHCP server, LAN traffic leaves masqueraded behind
// the DHCP address, the local API reports it, and a bad configuration
// changes nothing.
func TestDaemon(t *testing.T) {
	l := newLab(t)
	cfg := labConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the lab's configuration is invalid for config: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The "ISP": netd's own DHCP server code, on the WAN host.
	isp, err := NewDHCPServer("eth0", netip.MustParsePrefix("10.99.0.2/24"))
	if err != nil {
		t.Fatal(err)
	}
	isp.SetDNS([]netip.Addr{netip.MustParseAddr("10.99.0.53")})
	go do(l.wan, func() error { return isp.Serve(ctx) })

	d := l.daemon(t, ctx)
	if err := d.SetConfig(cfg, 1, "test"); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}

	var lease netdapi.Lease
	waitfor.Cond(t, 20*time.Second, "a WAN lease", func() bool {
		st := d.Status()
		if len(st.Leases) == 1 {
			lease = st.Leases[0]
			return true
		}
		return false
	})
	if lease.Address != netip.MustParsePrefix("10.99.0.128/24") || lease.Router != wanPeer {
		t.Errorf("WAN lease %s via %s, want 10.99.0.128/24 via 10.99.0.2", lease.Address, lease.Router)
	}
	addrs, _ := l.rt.Output("ip", "-4", "-o", "addr", "show", "dev", "wan0")
	if !strings.Contains(addrs, "10.99.0.128/24") || strings.Contains(addrs, "10.99.0.1/") {
		t.Errorf("wan0 should hold only the leased address: %s", addrs)
	}
	if routes, _ := l.rt.Output("ip", "route", "show", "default"); !strings.Contains(routes, "via 10.99.0.2 dev wan0 proto static") {
		t.Errorf("no default route from the lease: %q", routes)
	}

	// The LAN host asks netd's DHCP server.
	leases := make(chan *netdapi.Lease, 4)
	lanClient := &DHCPClient{Link: "eth0", OnLease: func(l *netdapi.Lease) { leases <- l },
		Open: func(link string) (c *nclient4.Client, err error) {
			err = do(l.lan, func() (err error) { c, err = nclient4.New(link, nclient4.WithTimeout(2*time.Second)); return err })
			return c, err
		}}
	go lanClient.Run(ctx)
	select {
	case got := <-leases:
		if got == nil || got.Address != netip.MustParsePrefix("192.168.50.128/24") || got.Router != rtLAN {
			t.Errorf("LAN lease %+v, want 192.168.50.128/24 via 192.168.50.1", got)
		} else if len(got.DNS) != 1 || got.DNS[0] != netip.MustParseAddr("10.99.0.53") {
			t.Errorf("LAN lease DNS %v, want the WAN's 10.99.0.53", got.DNS)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the LAN host got no lease from netd's DHCP server in 20 s")
	}

	tcpWhoami(t, l.wan, "10.99.0.2:7000")
	if seen, err := probe(l.lan, "tcp4", netip.Addr{}, netip.AddrPortFrom(wanPeer, 7000)); err != nil || seen != "10.99.0.128" {
		t.Errorf("LAN to WAN: seen as %q (%v), want the leased address 10.99.0.128", seen, err)
	}

	h := d.Handler()
	get := func(path string, v any) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var st netdapi.Status
	get("/v1/status", &st)
	if len(st.Links) != 2 || st.Links[0].Name != "wan0" || !st.Links[0].Up || st.Links[0].RxPackets == 0 {
		t.Errorf("status links: %+v", st.Links)
	}
	if len(st.DHCPServers) != 1 || st.DHCPServers[0].Link != "lan0" || len(st.DHCPServers[0].Leases) != 1 {
		t.Errorf("status DHCP servers: %+v", st.DHCPServers)
	}
	var fw netdapi.FirewallStatus
	get("/v1/firewall", &fw)
	hits := map[string]uint64{}
	for _, hc := range fw.Hits {
		hits[hc.Rule] = hc.Packets
	}
	if hits["postrouting masquerade:lan-out-wan0"] == 0 || hits["input builtin:lan-dhcp"] == 0 || len(fw.Rules) != len(fw.Kernel) {
		t.Errorf("firewall status: hits %v, %d rules built, %d in the kernel", hits, len(fw.Rules), len(fw.Kernel))
	}

	// A bad configuration is refused with its path; nothing changes.
	before, _ := l.nft.Rules()
	bad := labConfig()
	bad.Firewall.Rules = []config.Rule{{Name: "typo", Enabled: true, Chain: config.ChainInput, In: "wan9", Protocol: "any", Action: config.ActionAccept}}
	err = d.SetConfig(bad, 2, "test")
	var ve *ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "firewall.rules[typo].in") {
		t.Errorf("bad configuration: want a validation error at firewall.rules[typo].in, got %v", err)
	}
	after, _ := l.nft.Rules()
	if len(before) != len(after) || before[0].Handle != after[0].Handle {
		t.Errorf("the ruleset changed after a refused configuration")
	}
	if addrs, _ := l.rt.Output("ip", "-4", "-o", "addr", "show", "dev", "wan0"); !strings.Contains(addrs, "10.99.0.128/24") {
		t.Errorf("the WAN lost its lease address after a refused configuration: %s", addrs)
	}
}
