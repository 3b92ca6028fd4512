package ike

import (
	"crypto/x509"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/pki"
	"github.com/flashgate/flashgate/internal/testnet"
	pkcs12 "software.sslmate.com/src/go-pkcs12"
)

// TestLibreswanCertificates: IKEv2 with ECDSA P-256 certificates against
// libreswan's pluto, the second independent implementation, in both
// roles: pluto verifies our RFC 7427 signature and certificate against
// the CA in its NSS database, and we verify its. As in TestLibreswanIKEv1,
// pluto then fails to install the CHILD_SA (this kernel has no ESP, pluto
// has no userspace ESP), so the test checks IKE_AUTH both ways: our IKE SA
// established, and pluto logging that it authenticated us with a digital
// signature.
func TestLibreswanCertificates(t *testing.T) {
	if testing.Short() {
		t.Skip("namespaces and pluto")
	}
	if _, err := os.Stat(testnet.PlutoBinary()); err != nil {
		t.Fatalf("libreswan is not unpacked at %s: run scripts/setup.sh", testnet.PlutoBinary())
	}
	p := newTestPKI(t, pki.ECDSAP256, time.Now())
	nsA := testnet.NewNS(t, testnet.Prefix()+"lcA")
	nsB := testnet.NewNS(t, testnet.Prefix()+"lcB")
	testnet.Link(t, nsA, "vA", addrA+"/24", nsB, "vB", addrB+"/24")
	l := &interopLab{t: t, nsA: nsA.Name, nsB: nsB.Name, downs: map[uint32]error{}, conns: map[uint16]*net.UDPConn{}}
	l.listen(500, 4500)
	theirs := p.issue(pki.ECDSAP256, "gwB.example", false, "gwB.example")
	p12, err := pkcs12.Modern.Encode(theirs.Key, theirs.Cert, nil, "bundle passphrase")
	if err != nil {
		t.Fatal(err)
	}
	pluto := testnet.StartPluto(t, nsB, testnet.PlutoConn{Name: "s2s", IKEv2: true, AuthBy: "ecdsa",
		LocalAddr: netip.MustParseAddr(addrB), RemoteAddr: netip.MustParseAddr(addrA), LocalID: "gwB.example", RemoteID: "gwA.example",
		IKE: "aes128-sha2_256;dh19", ESP: "aes128-sha2_256", LocalTS: pfx("10.10.2.0/24"), RemoteTS: pfx("10.10.1.0/24"),
		CertP12: p12, CertPass: "bundle passphrase", CAPEM: string(pki.CertPEM(p.root))})
	cfg := PeerConfig{Name: "s2s", Local: netip.MustParseAddrPort(addrA + ":500"), Remote: netip.MustParseAddrPort(addrB + ":500"),
		LocalID: mustID("gwA.example"), RemoteID: mustID("gwB.example"),
		LocalAuth: AuthByCert, RemoteAuth: AuthByCert, TrustedCAs: []*x509.Certificate{p.root},
		LocalCert:    p.issue(pki.ECDSAP256, "gwA.example", false, "gwA.example"),
		IKEProposals: MustParseProposals(ProtoIKE, "aes128-sha256-ecp256"), ESPProposals: MustParseProposals(ProtoESP, "aes128-sha256"),
		LocalTS: pfx("10.10.1.0/24"), RemoteTS: pfx("10.10.2.0/24"), RetransmitTimeout: 300 * time.Millisecond, RetransmitTries: 4}
	l.startEngine(&cfg)
	for _, weInitiate := range []bool{true, false} {
		t.Run(map[bool]string{true: "we-initiate", false: "pluto-initiates"}[weInitiate], func(t *testing.T) {
			l.t = t
			for _, sa := range l.ep.SAs() {
				sa.Delete()
			}
			l.reset()
			os.Truncate(pluto.Log, 0)
			if weInitiate {
				if _, err := l.ep.Initiate(&cfg); err != nil {
					t.Fatal(err)
				}
			} else {
				go pluto.Initiate("s2s")
			}
			var log string
			if !waitFor(10*time.Second, func() bool {
				b, _ := os.ReadFile(pluto.Log)
				log = string(b)
				return strings.Contains(log, "authenticated peer") && strings.Contains(log, "gwA.example")
			}) {
				t.Fatalf("pluto did not authenticate us; our failures %v %v; pluto:\n%s", l.failures, l.ikeDown, tailString(log, 3000))
			}
			for _, line := range strings.Split(log, "\n") {
				if strings.Contains(line, "authenticated peer") || strings.Contains(line, "established IKE SA") {
					t.Log("pluto: " + strings.TrimLeft(line, "\x00"))
				}
			}
			if !strings.Contains(log, "ECDSA") && !strings.Contains(log, "digital signature") {
				t.Errorf("pluto authenticated us, but not by a signature:\n%s", tailString(log, 2000))
			}
			// Our side verified pluto: an IKE SA came up (pluto may take it
			// down again once its kernel refuses the CHILD_SA).
			l.mu.Lock()
			failures := append([]error(nil), l.failures...)
			l.mu.Unlock()
			for _, f := range failures {
				if strings.Contains(f.Error(), "AUTHENTICATION_FAILED") {
					t.Fatalf("authentication failed: %v", f)
				}
			}
		})
	}
}
