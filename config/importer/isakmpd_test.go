package importer

import (
	"os"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/config"
)

// The flashboot gateway's isakmpd.conf from the field report imports to
// one tunnel equal to it field by field: AES-SHA is aes128-sha1 with
// isakmpd's default group 2 for main mode, QM-ESP-AES-SHA-SUITE is
// aes128-sha1 without PFS, the lifetimes are isakmpd's defaults, the IDs
// are the addresses (as isakmpd's are without ID/Remote-ID), and the
// Blowfish transform is listed as not imported, with the reason.
func TestImportFlashbootISAKMPD(t *testing.T) {
	data, err := os.ReadFile("testdata/isakmpd-flashboot-vpn.conf")
	if err != nil {
		t.Fatal(err)
	}
	if f, err := Detect(data); err != nil || f != ISAKMPD {
		t.Fatalf("Detect = %q, %v", f, err)
	}
	r, err := Import(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tunnels) != 1 {
		t.Fatalf("%d tunnels, want 1: %+v", len(r.Tunnels), r.Tunnels)
	}
	got := r.Tunnels[0]
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
	compareTunnels(t, got, want)

	// Every line is accounted for: the Blowfish transform is the only one
	// not imported.
	if len(r.Unmapped) != 1 {
		t.Fatalf("unmapped: %v", r.Unmapped)
	}
	u := r.Unmapped[0]
	if u.Line != 40 || u.Text != "Transforms=\t\tAES-SHA,BLF-SHA" ||
		!strings.Contains(u.Reason, "BLF-SHA: blowfish is refused") || !strings.Contains(u.Reason, "imported as aes128-sha1-modp1024") {
		t.Errorf("unmapped line: %+v", u)
	}

	// The imported tunnel passes config's checks in a default box.
	c, err := Apply(config.Default(), r.Tunnels)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("imported tunnel does not validate: %v", err)
	}
	if p := CheckTunnels(config.Default(), r.Tunnels); len(p) != 0 {
		t.Errorf("CheckTunnels: %v", p)
	}
	if _, err := Apply(c, r.Tunnels); err == nil || !strings.Contains(err.Error(), "already has tunnels called VPN-A-B") {
		t.Errorf("second Apply: %v", err)
	}
}

// compareTunnels compares every field, naming the ones that differ.
func compareTunnels(t *testing.T, got, want config.Tunnel) {
	t.Helper()
	check := func(field string, g, w any) {
		if g != w {
			t.Errorf("%s = %v, want %v", field, g, w)
		}
	}
	check("name", got.Name, want.Name)
	check("enabled", got.Enabled, want.Enabled)
	check("local_address", got.LocalAddress.String(), want.LocalAddress.String())
	check("remote_address", got.RemoteAddress.String(), want.RemoteAddress.String())
	check("local_id", got.LocalID, want.LocalID)
	check("remote_id", got.RemoteID, want.RemoteID)
	check("psk", got.PSK.Equal(want.PSK), true)
	check("ike_proposals", strings.Join(got.IKEProposals, " "), strings.Join(want.IKEProposals, " "))
	check("esp_proposals", strings.Join(got.ESPProposals, " "), strings.Join(want.ESPProposals, " "))
	ps := func(l []config.Prefix) string {
		var s []string
		for _, p := range l {
			s = append(s, p.String())
		}
		return strings.Join(s, " ")
	}
	check("local_subnets", ps(got.LocalSubnets), ps(want.LocalSubnets))
	check("remote_subnets", ps(got.RemoteSubnets), ps(want.RemoteSubnets))
	check("ike_lifetime", got.IKELifetime.String(), want.IKELifetime.String())
	check("child_lifetime", got.ChildLifetime.String(), want.ChildLifetime.String())
	check("dpd_interval", got.DPDInterval.String(), want.DPDInterval.String())
	check("dpd_timeout", got.DPDTimeout.String(), want.DPDTimeout.String())
	check("start_action", got.StartAction, want.StartAction)
	check("data_plane", got.DataPlane, want.DataPlane)
	check("ike_version", got.IKEVersion, want.IKEVersion)
	check("legacy_algorithms", got.LegacyAlgorithms, want.LegacyAlgorithms)
}

// A file with what isakmpd can express and flashgate cannot: each such
// line is listed with its reason, and what can be imported is.
func TestImportISAKMPDUnmapped(t *testing.T) {
	conf := `[General]
Retransmits=		5
Default-phase-1-lifetime=	7200,60:86400

[Phase 1]
198.51.100.7=		east
203.0.113.9=		aggr

[Phase 2]
Connections=		east-a,east-b,aggr-c
Passive-connections=	east-c

[east]
Phase=			1
Address=		198.51.100.7
Local-address=		192.0.2.1
Configuration=		east-mm
Authentication=		a-long-enough-secret-key
ID=			my-id
Remote-ID=		east-id

[my-id]
ID-type=		FQDN
Name=			gw.example.org

[east-id]
ID-type=		USER_FQDN
Name=			vpn@east.example.org

[east-mm]
DOI=			IPSEC
EXCHANGE_TYPE=		ID_PROT
Transforms=		AES-256-SHA2-256-GRP14,3DES-MD5-GRP5,DES-SHA,CAST-SHA,AES-SHA-RSA_SIG,my-xf

[my-xf]
ENCRYPTION_ALGORITHM=	AES_CBC
KEY_LENGTH=		256
HASH_ALGORITHM=		SHA2_256
AUTHENTICATION_METHOD=	PRE_SHARED
GROUP_DESCRIPTION=	MODP_2048
Life=			life-mm

[life-mm]
LIFE_TYPE=		SECONDS
LIFE_DURATION=		28800

[east-a]
Phase=			2
ISAKMP-peer=		east
Configuration=		east-qm
Local-ID=		net-a
Remote-ID=		net-x

[east-b]
Phase=			2
ISAKMP-peer=		east
Configuration=		east-qm
Local-ID=		net-b
Remote-ID=		net-x

[east-c]
Phase=			2
ISAKMP-peer=		east
Configuration=		east-qm
Local-ID=		net-a
Remote-ID=		net-y
Flags=			Active-only

[net-a]
ID-type=		IPV4_ADDR_SUBNET
Network=		10.1.0.0
Netmask=		255.255.0.0

[net-b]
ID-type=		IPV4_ADDR_SUBNET
Network=		10.2.0.0
Netmask=		255.255.0.0

[net-x]
ID-type=		IPV4_ADDR_SUBNET
Network=		10.9.0.0
Netmask=		255.255.255.0

[net-y]
ID-type=		IPV4_ADDR_RANGE
Address=		10.8.0.1

[east-qm]
DOI=			IPSEC
EXCHANGE_TYPE=		QUICK_MODE
Suites=			QM-ESP-AES-256-SHA2-256-PFS-GRP14-SUITE,QM-ESP-3DES-SHA-PFS-SUITE,QM-AH-SHA-SUITE,QM-ESP-TRP-AES-SHA-SUITE,QM-ESP-BLF-SHA-SUITE

[aggr]
Phase=			1
Address=		203.0.113.9
Configuration=		aggr-mm
Authentication=		another-long-secret-key

[aggr-mm]
EXCHANGE_TYPE=		AGGRESSIVE
Transforms=		AES-SHA

[aggr-c]
Phase=			2
ISAKMP-peer=		aggr
Configuration=		east-qm
Local-ID=		net-a
Remote-ID=		net-x

[unused]
Foo=			bar
`
	r, err := ImportAs(ISAKMPD, []byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tunnels) != 1 {
		t.Fatalf("tunnels: %+v", r.Tunnels)
	}
	tun := r.Tunnels[0]
	want := config.NewTunnel("east-a")
	want.IKEVersion = config.IKEv1
	want.LegacyAlgorithms = true
	want.LocalAddress = config.Addr{Addr: mustAddr("192.0.2.1")}
	want.RemoteAddress = config.Addr{Addr: mustAddr("198.51.100.7")}
	want.LocalID, want.RemoteID = "@gw.example.org", "vpn@east.example.org"
	want.PSK = config.NewSecret("a-long-enough-secret-key")
	want.IKEProposals = []string{"aes256-sha256-modp2048", "3des-md5-modp1536"}
	want.ESPProposals = []string{"aes256-sha256-modp2048", "3des-sha1-modp1024"}
	// east-a and east-b (10.1/16 and 10.2/16 to 10.9.0/24) are every
	// local with every remote: one tunnel. east-c's remote is a range.
	want.LocalSubnets = []config.Prefix{config.MustPrefix("10.1.0.0/16"), config.MustPrefix("10.2.0.0/16")}
	want.RemoteSubnets = []config.Prefix{config.MustPrefix("10.9.0.0/24")}
	want.IKELifetime = config.Seconds(7200)
	want.ChildLifetime = config.Seconds(1200)
	compareTunnels(t, tun, want)

	reasons := map[int]string{}
	for _, u := range r.Unmapped {
		reasons[u.Line] = u.Reason
		if strings.Contains(u.Text, "secret-key") {
			t.Errorf("a PSK in the report: %+v", u)
		}
	}
	for _, c := range []struct{ line, want string }{
		{"Retransmits=", "isakmpd daemon setting"},
		{"203.0.113.9=", "this peer is not used"},
		{"Transforms=\t\tAES-256", "DES-SHA: des is refused"},
		{"Transforms=\t\tAES-256", "CAST-SHA: CAST is not supported"},
		{"Transforms=\t\tAES-256", "AES-SHA-RSA_SIG: authentication by RSA_SIG"},
		{"Transforms=\t\tAES-256", "imported as aes256-sha256-modp2048, 3des-md5-modp1536"},
		{"ID-type=\t\tIPV4_ADDR_RANGE", `ID-type "IPV4_ADDR_RANGE"`},
		{"Suites=", "QM-AH-SHA-SUITE: AH is not supported"},
		{"Suites=", "QM-ESP-TRP-AES-SHA-SUITE: transport mode"},
		{"Suites=", "QM-ESP-BLF-SHA-SUITE: blowfish is refused"},
		{"EXCHANGE_TYPE=\t\tAGGRESSIVE", "aggressive mode is refused"},
		{"[unused]", "section [unused] is not part of any imported tunnel"},
		{"Foo=", "in [unused]"},
		{"Flags=", "Active-only"},
		{"Authentication=\t\tanother", "in [aggr], which no imported connection uses"},
	} {
		n := lineOf(t, conf, c.line)
		if !strings.Contains(reasons[n], c.want) {
			t.Errorf("line %d (%s): reason %q, want one containing %q", n, c.line, reasons[n], c.want)
		}
	}
	// The aggressive peer's key line is reported, redacted.
	n := lineOf(t, conf, "Authentication=\t\tanother")
	for _, u := range r.Unmapped {
		if u.Line == n && u.Text != "Authentication= "+config.Redacted {
			t.Errorf("line %d shown as %q", n, u.Text)
		}
	}
	for _, u := range r.Unmapped {
		t.Log(u)
	}
}
