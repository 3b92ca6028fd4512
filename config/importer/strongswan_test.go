package importer

import (
	"os"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/config"
)

func flashbootTunnel() config.Tunnel {
	want := config.NewTunnel("VPN-A-B")
	want.IKEVersion = config.IKEv1
	want.LegacyAlgorithms = true
	want.RemoteAddress = config.Addr{Addr: mustAddr("192.168.3.198")}
	want.PSK = config.NewSecret("yoursharedsecret")
	want.IKEProposals = []string{"aes128-sha1-modp1024"}
	want.ESPProposals = []string{"aes128-sha1"}
	want.LocalSubnets = []config.Prefix{config.MustPrefix("192.168.2.0/24")}
	want.RemoteSubnets = []config.Prefix{config.MustPrefix("192.168.4.0/24")}
	want.IKELifetime = config.Seconds(3600)
	want.ChildLifetime = config.Seconds(1200)
	want.StartAction = config.StartInitiate
	return want
}

func reasonsByLine(r *Result) map[int]string {
	m := map[int]string{}
	for _, u := range r.Unmapped {
		m[u.Line] = u.Reason
	}
	return m
}

func TestImportSwanctl(t *testing.T) {
	data, err := os.ReadFile("testdata/swanctl-site.conf")
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := Detect(data); f != Swanctl {
		t.Fatalf("Detect = %q", f)
	}
	r, err := Import(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tunnels) != 1 {
		t.Fatalf("tunnels: %+v", r.Tunnels)
	}
	compareTunnels(t, r.Tunnels[0], flashbootTunnel())
	reasons := reasonsByLine(r)
	text := string(data)
	for _, c := range []struct{ line, want string }{
		{"        mobike = no", "mobike has no flashgate equivalent"},
		{"            other {", "child other has other proposals or lifetimes than child net"},
		{"    cert-based {", "connection cert-based is not imported"},
		{"            auth = pubkey", "authentication by pubkey"},
		{"        secret = 0x", "a binary key"},
	} {
		n := lineOf(t, text, c.line)
		if !strings.Contains(reasons[n], c.want) {
			t.Errorf("line %d (%s): %q, want %q", n, c.line, reasons[n], c.want)
		}
	}
	for _, u := range r.Unmapped {
		if strings.Contains(u.Text, "0123456789abcdef") || strings.Contains(u.Text, "yoursharedsecret") {
			t.Errorf("secret shown: %+v", u)
		}
	}
}

func TestImportIPsecConf(t *testing.T) {
	data, err := os.ReadFile("testdata/ipsec-site.conf")
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := Detect(data); f != IPsecConf {
		t.Fatalf("Detect = %q", f)
	}
	r, err := Import(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tunnels) != 2 {
		t.Fatalf("tunnels: %+v", r.Tunnels)
	}
	compareTunnels(t, r.Tunnels[0], flashbootTunnel())

	libre := config.NewTunnel("libre")
	libre.IKEVersion = config.IKEv1
	libre.LegacyAlgorithms = true // modp1536 in PFS
	libre.LocalAddress = config.Addr{Addr: mustAddr("192.0.2.1")}
	libre.RemoteAddress = config.Addr{Addr: mustAddr("198.51.100.30")}
	libre.PSK = config.NewSecret("libreswan-long-secret")
	libre.IKEProposals = []string{"aes256-sha256-modp2048"}
	libre.ESPProposals = []string{"aes128-sha1-modp1536"}
	libre.LocalSubnets = []config.Prefix{config.MustPrefix("10.1.0.0/16")}
	libre.RemoteSubnets = []config.Prefix{config.MustPrefix("10.30.0.0/16")}
	libre.IKELifetime = config.Seconds(8 * 3600)
	libre.ChildLifetime = config.Seconds(8 * 3600)
	libre.StartAction = config.StartOnTraffic
	compareTunnels(t, r.Tunnels[1], libre)

	reasons := reasonsByLine(r)
	text := string(data)
	for _, c := range []struct{ line, want string }{
		{"\tcharondebug", "config setup"},
		{"\tdpdaction=restart", "dpdaction has no flashgate equivalent"},
		{"conn old-des", "conn old-des is not imported"},
		{"\tesp=des-md5", "des-md5: des is refused"},
		{"\tike=des-md5-modp768", "des is refused"},
	} {
		n := lineOf(t, text, c.line)
		if !strings.Contains(reasons[n], c.want) {
			t.Errorf("line %d (%s): %q, want %q", n, c.line, reasons[n], c.want)
		}
	}
	for _, u := range r.Unmapped {
		if strings.Contains(u.Text, "secret\"") && !strings.Contains(u.Text, config.Redacted) {
			t.Errorf("secret shown: %+v", u)
		}
	}
	for _, tun := range r.Tunnels {
		if p := CheckTunnels(config.Default(), []config.Tunnel{tun}); len(p) > 0 {
			t.Errorf("%s: %v", tun.Name, p)
		}
	}
}
