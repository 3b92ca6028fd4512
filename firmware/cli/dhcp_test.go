package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/netd"
)

func TestWriteDHCPLeases(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	addr := netip.MustParseAddr
	lease := func(a, mac, host string, left time.Duration, offered bool) netdapi.ServerLease {
		return netdapi.ServerLease{Address: addr(a), MAC: mac, Hostname: host, Expires: now.Add(left), Offered: offered}
	}
	for _, tc := range []struct {
		name    string
		servers []netdapi.DHCPServerState
		want    []string // lines, in order
		notWant []string
	}{
		{
			name: "no server",
			want: []string{"No DHCP server runs: netd starts one on each enabled LAN interface"},
		},
		{
			name:    "server without leases",
			servers: []netdapi.DHCPServerState{{Link: "eth1", Pool: "192.168.1.128-192.168.1.254"}},
			want:    []string{"eth1: pool 192.168.1.128-192.168.1.254, 0 leases"},
			notWant: []string{"ADDRESS"},
		},
		{
			name: "bound, offered, expired, declined",
			servers: []netdapi.DHCPServerState{{Link: "eth1", Pool: "192.168.1.128-192.168.1.254", Leases: []netdapi.ServerLease{
				lease("192.168.1.128", "02:00:00:00:00:0a", "laptop", 11*time.Hour+59*time.Minute+30*time.Second, false),
				lease("192.168.1.129", "02:00:00:00:00:0b", "", 25*time.Second, true),
				lease("192.168.1.130", "02:00:00:00:00:0c", "printer", -time.Minute, false),
				lease("192.168.1.131", "declined:192.168.1.131", "", 12*time.Hour, false),
			}}},
			want: []string{
				"eth1: pool 192.168.1.128-192.168.1.254, 4 leases",
				"  ADDRESS          MAC                HOST NAME             EXPIRES",
				"  192.168.1.128    02:00:00:00:00:0a  laptop                in 11h59m30s",
				"  192.168.1.129    02:00:00:00:00:0b  -                     offered, 25s",
				"  192.168.1.130    02:00:00:00:00:0c  printer               expired",
				"  192.168.1.131    (declined)         -                     in 12h0m0s",
			},
		},
		{
			name: "host names from clients are made harmless",
			servers: []netdapi.DHCPServerState{{Link: "eth2", Pool: "10.0.0.128-10.0.0.254", Leases: []netdapi.ServerLease{
				lease("10.0.0.200", "02:00:00:00:00:01", "evil\x1b[2J\x07name", time.Hour, false),
				lease("10.0.0.201", "02:00:00:00:00:02", strings.Repeat("long", 16), time.Hour, false),
			}}},
			want: []string{
				"eth2: pool 10.0.0.128-10.0.0.254, 2 leases",
				"  10.0.0.200       02:00:00:00:00:01  evil?[2J?name         in 1h0m0s",
				"  10.0.0.201       02:00:00:00:00:02  longlonglonglongl...  in 1h0m0s",
			},
			notWant: []string{"\x1b", "\x07"},
		},
		{
			name: "two servers",
			servers: []netdapi.DHCPServerState{
				{Link: "eth1", Pool: "192.168.1.128-192.168.1.254", Leases: []netdapi.ServerLease{lease("192.168.1.128", "02:00:00:00:00:0a", "a", time.Hour, false)}},
				{Link: "eth2", Pool: "10.0.0.128-10.0.0.254"},
			},
			want: []string{"eth1: pool 192.168.1.128-192.168.1.254, 1 lease", "  192.168.1.128", "", "eth2: pool 10.0.0.128-10.0.0.254, 0 leases"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			writeDHCPLeases(&b, tc.servers, now)
			got := b.String()
			rest := got
			for _, w := range tc.want {
				i := strings.Index(rest, w+"\n")
				if w != "" && i < 0 {
					i = strings.Index(rest, w)
				}
				if i < 0 {
					t.Fatalf("output:\n%s\nlacks, after the lines before it, %q", got, w)
				}
				rest = rest[i+len(w):]
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("output:\n%q\nholds %q", got, w)
				}
			}
			for l := range strings.Lines(got) {
				if n := len(strings.TrimSuffix(l, "\n")); n > 80 {
					t.Errorf("line %q is %d columns, more than a console's 80", l, n)
				}
			}
		})
	}
}

// serveNetdDHCP serves netd's GET /v1/status for one real DHCP server, its
// leases read at each request as netd's handler does.
func serveNetdDHCP(t *testing.T, dir string, srv *netd.DHCPServer) string {
	t.Helper()
	sock := filepath.Join(dir, "netd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	first, last, _ := config.DefaultDHCPRange(srv.Address)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		st := netdapi.Status{Links: []netdapi.LinkStatus{}, Leases: []netdapi.Lease{}, DHCPServers: []netdapi.DHCPServerState{
			{Link: srv.Link, Pool: fmt.Sprintf("%s-%s", first, last), Leases: srv.Leases()}}}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st)
	})
	hs := &http.Server{Handler: mux}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return sock
}

// leaseFor runs a client's DISCOVER and REQUEST through the server.
func leaseFor(t *testing.T, srv *netd.DHCPServer, mac, host string) net.IP {
	t.Helper()
	hw, err := net.ParseMAC(mac)
	if err != nil {
		t.Fatal(err)
	}
	msg := func(typ dhcpv4.MessageType, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
		mods = append([]dhcpv4.Modifier{dhcpv4.WithHwAddr(hw), dhcpv4.WithMessageType(typ)}, mods...)
		if host != "" {
			mods = append(mods, dhcpv4.WithOption(dhcpv4.OptHostName(host)))
		}
		m, err := dhcpv4.New(mods...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	offer := srv.Reply(msg(dhcpv4.MessageTypeDiscover))
	if offer == nil || offer.MessageType() != dhcpv4.MessageTypeOffer {
		t.Fatalf("DISCOVER from %s: answer %v, want an offer", mac, offer)
	}
	ack := srv.Reply(msg(dhcpv4.MessageTypeRequest,
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(offer.YourIPAddr)),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IP(srv.Address.Addr().AsSlice())))))
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
		t.Fatalf("REQUEST from %s: answer %v, want an ACK", mac, ack)
	}
	return ack.YourIPAddr
}

// TestShowDHCP shows the leases a real netd DHCP server gave out, served
// as netd's API serves them (the daemon itself needs the kernel's links).
func TestShowDHCP(t *testing.T) {
	cd := startConfigd(t)
	srv, err := netd.NewDHCPServer("eth1", netip.MustParsePrefix("192.168.1.1/24"))
	if err != nil {
		t.Fatal(err)
	}
	// The server's clock runs 90 minutes behind, so the leases are 10.5
	// hours from their end as the console sees it.
	srv.Now = func() time.Time { return time.Now().Add(-90 * time.Minute) }
	laptop := leaseFor(t, srv, "02:00:00:00:00:0a", "laptop")
	netdSock := serveNetdDHCP(t, cd.dir, srv)
	term := startCLI(t, Options{User: "admin", Hostname: "fg", ConfigdSocket: cd.socket,
		SupervisorSocket: cd.dir + "/none.sock", IkedSocket: cd.dir + "/none.sock", NetdSocket: netdSock}, runCLI)
	term.expect(prompt)

	term.send("show dhcp\r")
	got := term.expect(prompt)
	for _, w := range []string{"eth1: pool 192.168.1.128-192.168.1.254, 1 lease", "HOST NAME",
		laptop.String(), "02:00:00:00:00:0a", "laptop", "in 10h"} {
		if !strings.Contains(got, w) {
			t.Errorf("show dhcp:\n%s\nwant %q", got, w)
		}
	}

	// A lease taken while the session runs shows at the next look.
	phone := leaseFor(t, srv, "02:00:00:00:00:0b", "")
	term.send("show dhcp eth1\r")
	got = term.expect(prompt)
	if !strings.Contains(got, "2 leases") || !strings.Contains(got, phone.String()+" ") || !strings.Contains(got, "02:00:00:00:00:0b") {
		t.Errorf("show dhcp eth1 after a second client:\n%s\nwant its lease %s", got, phone)
	}
	term.send("show dhcp eth9\r")
	if got := term.expect(prompt); !strings.Contains(got, `no DHCP server runs on "eth9" (it runs on eth1)`) {
		t.Errorf("show dhcp eth9:\n%s\nwant that there is no server there", got)
	}

	// Completion: the topic, then the interfaces netd serves.
	term.send("show dh\t")
	term.expect(prompt + "show dhcp ")
	term.send("e\t")
	term.expect(prompt + "show dhcp eth1 ")
	term.send("\x03\r")
	term.expect(prompt)
}

func TestShowDHCPWithoutNetd(t *testing.T) {
	term, _ := newCLI(t)
	term.send("show dhcp\r")
	if got := term.expect(prompt); !strings.Contains(got, "netd is not answering") {
		t.Errorf("show dhcp with netd down:\n%s\nwant that netd is not answering", got)
	}
}
