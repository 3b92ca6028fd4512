package importer

import (
	"os"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/config"
)

// fuzzImport checks what holds for any input of any format: no panic, the
// result bounded, every unmapped line a real line of the input with a
// reason, no secret shown, and every tunnel's proposals within what its
// own settings allow.
func fuzzImport(t *testing.T, f Format, data []byte) {
	r, err := ImportAs(f, data)
	if err != nil {
		return
	}
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	for _, u := range r.Unmapped {
		if u.Line < 1 || u.Line > len(lines) {
			t.Fatalf("unmapped line %d of %d", u.Line, len(lines))
		}
		if u.Reason == "" {
			t.Fatalf("line %d unmapped without a reason", u.Line)
		}
	}
	if len(r.Tunnels) > MaxTunnels {
		t.Fatalf("%d tunnels", len(r.Tunnels))
	}
	for _, tun := range r.Tunnels {
		psk := tun.PSK.Reveal()
		for _, u := range r.Unmapped {
			if len(psk) >= 4 && strings.Contains(u.Text, psk) && !strings.Contains(lines[u.Line-1], "#") {
				t.Fatalf("tunnel %s's PSK shown in unmapped line %d: %q", tun.Name, u.Line, u.Text)
			}
		}
		rules := tun.Rules()
		for _, p := range tun.IKEProposals {
			if err := rules.CheckIKE(p); err != nil {
				t.Fatalf("tunnel %s: %v", tun.Name, err)
			}
		}
		for _, p := range tun.ESPProposals {
			if err := rules.CheckESP(p); err != nil {
				t.Fatalf("tunnel %s: %v", tun.Name, err)
			}
		}
		if _, err := Apply(config.Default(), []config.Tunnel{tun}); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
}

func addSeeds(f *testing.F, files ...string) {
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzISAKMPD(f *testing.F) {
	addSeeds(f, "testdata/isakmpd-flashboot-vpn.conf")
	f.Add([]byte("[Phase 2]\nConnections=c\n[c]\nISAKMP-peer=p\nLocal-ID=a\nRemote-ID=b\n[p]\nAddress=1.2.3.4\nAuthentication=0123456789abcdef\nConfiguration=m\n[m]\nTransforms=AES-SHA2-256-GRP14\n[a]\nID-type=IPV4_ADDR\nAddress=10.0.0.1\n[b]\nID-type=IPV4_ADDR_SUBNET\nNetwork=10.1.0.0\nNetmask=255.255.0.0\n"))
	f.Add([]byte("[x\nTag\n=\\\n[]\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, ISAKMPD, data) })
}

func FuzzDetect(f *testing.F) {
	addSeeds(f, "testdata/isakmpd-flashboot-vpn.conf")
	f.Add([]byte("conn a\n\tleft=1.2.3.4\n"))
	f.Add([]byte("connections {\n a {\n }\n}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if fm, err := Detect(data); err == nil {
			fuzzImport(t, fm, data)
		}
	})
}

func FuzzSwanctl(f *testing.F) {
	addSeeds(f, "testdata/swanctl-site.conf")
	f.Add([]byte("connections {\n a {\n remote_addrs = 1.2.3.4\n children {\n c {\n local_ts = 10.0.0.0/8\n remote_ts = 11.0.0.0/8\n }\n }\n }\n}\nsecrets {\n ike {\n secret = 0123456789abcdef\n }\n}\n"))
	f.Add([]byte("}\n{\n= \na {{\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, Swanctl, data) })
}

func FuzzIPsecConf(f *testing.F) {
	addSeeds(f, "testdata/ipsec-site.conf")
	f.Add([]byte("conn a\n\talso=a\n\tright=1.2.3.4\n\trightsubnet=10.0.0.0/8\n\tleftsubnet=11.0.0.0/8\n: PSK \"0123456789abcdef\"\n"))
	f.Add([]byte("conn %default\n\talso=b\nconn b\n\talso=%default\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, IPsecConf, data) })
}
