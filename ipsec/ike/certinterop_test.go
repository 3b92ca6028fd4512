package ike

import (
	"cmp"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/pki"
)

// charonCertSide is what charon gets for one certificate test: its own
// credential, the CA it trusts, its identities, and extra swanctl options.
type charonCertSide struct {
	cred          *Credential
	trust         []*x509.Certificate
	localID       string
	remoteID      string
	remoteAuth    string // "pubkey" by default; e.g. "ecdsa-sha512" to constrain the scheme
	crl           []byte
	localPSKSide  bool // charon authenticates itself with the PSK
	remotePSKSide bool // charon wants a PSK from us
	fragmentation string
}

// loadCharonCerts writes charon's certificates, key and CA into its
// swanctl directory and (re)loads the connection "s2s" with them.
func (l *interopLab) loadCharonCerts(s charonCertSide) {
	t := l.t
	for _, d := range []string{"x509", "x509ca", "private", "x509crl"} {
		os.RemoveAll(filepath.Join(l.dir, d))
		os.MkdirAll(filepath.Join(l.dir, d), 0o700)
	}
	write := func(rel string, b []byte) {
		if err := os.WriteFile(filepath.Join(l.dir, rel), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	local, remote := "auth = pubkey\n      certs = gw.pem", "auth = "+s.remoteAuth
	if s.remoteAuth == "" {
		remote = "auth = pubkey"
	}
	if s.cred != nil {
		write("x509/gw.pem", pki.CertPEM(s.cred.Cert))
		for i, c := range s.cred.Chain {
			write(fmt.Sprintf("x509ca/inter%d.pem", i), pki.CertPEM(c))
		}
		k, err := pki.KeyPEM(s.cred.Key)
		if err != nil {
			t.Fatal(err)
		}
		write("private/gw.pem", k)
	}
	for i, c := range s.trust {
		write(fmt.Sprintf("x509ca/ca%d.pem", i), pki.CertPEM(c))
	}
	if s.crl != nil {
		write("x509crl/ca.crl", pki.CRLPEM(s.crl))
	}
	if s.localPSKSide {
		local = "auth = psk"
	}
	if s.remotePSKSide {
		remote = "auth = psk"
	}
	conf := fmt.Sprintf(`connections {
  s2s {
    version = 2
    local_addrs = %s
    remote_addrs = %s
    proposals = aes128gcm16-prfsha256-ecp256
    encap = yes
    mobike = no
    dpd_delay = 0
    send_certreq = yes
    fragmentation = %s
    local { %s
      id = %s }
    remote { %s
      id = %s }
    children {
      net { local_ts = 10.10.2.0/24
        remote_ts = 10.10.1.0/24
        esp_proposals = aes128gcm16
        mode = tunnel
        start_action = none }
    }
  }
}
secrets {
  ike-s2s { id-a = %s
    id-b = %s
    secret = "interop secret 0123456789" }
}
`, addrB, addrA, cmp.Or(s.fragmentation, "yes"), local, s.localID, remote, s.remoteID, s.localID, s.remoteID)
	f := filepath.Join(l.dir, "swanctl.conf")
	if err := os.WriteFile(f, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	l.swanctl("--load-all", "--file", f) // also drops credentials no longer there
	if out, err := l.swanctl("--load-all", "--file", f); err != nil {
		t.Fatalf("swanctl --load-all: %v\n%s", err, out)
	}
}

// lastOurFailure waits for a Failure on our side and returns it.
func (l *interopLab) waitFailure(d time.Duration) *Failure {
	var f *Failure
	waitFor(d, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, e := range append(append([]error(nil), l.failures...), l.ikeDown...) {
			if errors.As(e, &f) {
				return true
			}
		}
		return false
	})
	return f
}

// TestStrongSwanCertificates: certificate authentication against charon,
// both roles, with ECDSA P-256, RSA 3072 (PKCS#1 v1.5 and PSS), Ed25519
// and a chain through an intermediate CA; then the refusals, each in the
// words our status shows.
func TestStrongSwanCertificates(t *testing.T) {
	if testing.Short() {
		t.Skip("needs root, namespaces and strongSwan")
	}
	l := newInteropLab(t)
	l.listen(500, 4500)
	now := time.Now()
	cur := &PeerConfig{}
	l.startEngine(cur)
	ours := func(p *testPKI, kt pki.KeyType, viaInter bool) (*PeerConfig, *Credential) {
		c := &PeerConfig{Name: "s2s", Local: netip.MustParseAddrPort(addrA + ":500"), Remote: netip.MustParseAddrPort(addrB + ":500"),
			LocalID: mustID("gwA.example"), RemoteID: mustID("gwB.example"),
			LocalAuth: AuthByCert, RemoteAuth: AuthByCert, TrustedCAs: []*x509.Certificate{p.root},
			IKEProposals: MustParseProposals(ProtoIKE, fiveSuites[0].ike), ESPProposals: MustParseProposals(ProtoESP, fiveSuites[0].esp),
			LocalTS: pfx("10.10.1.0/24"), RemoteTS: pfx("10.10.2.0/24"), RetransmitTimeout: 300 * time.Millisecond, RetransmitTries: 4}
		c.LocalCert = p.issue(kt, "gwA", viaInter, "gwA.example")
		return c, p.issue(kt, "gwB", viaInter, "gwB.example")
	}
	up := func(t *testing.T, weInitiate bool) {
		t.Helper()
		l.reset()
		if weInitiate {
			if _, err := l.ep.Initiate(cur); err != nil {
				t.Fatal(err)
			}
		} else if out, err := l.swanctl("--initiate", "--child", "net", "--ike", "s2s", "--timeout", "10"); err != nil {
			t.Fatalf("charon could not initiate: %v\n%s\nour failures: %v", err, out, l.failures)
		}
		if !waitFor(10*time.Second, func() bool { return l.childUps() == 1 }) {
			t.Fatalf("we-initiate=%v: no CHILD_SA on our side; failures %v", weInitiate, l.failures)
		}
		if sas := l.charonSAs(); !strings.Contains(sas, "ESTABLISHED") || !strings.Contains(sas, "INSTALLED") {
			t.Fatalf("we-initiate=%v: charon's view:\n%s", weInitiate, sas)
		}
		l.closeAll()
	}

	for _, tc := range []struct {
		name  string
		kt    pki.KeyType
		inter bool
		pss   bool
	}{
		{"ecdsa-p256", pki.ECDSAP256, false, false},
		{"rsa-3072", pki.RSA3072, false, false},
		{"rsa-3072-pss", pki.RSA3072, false, true},
		{"ed25519", pki.Ed25519, false, false},
		{"ecdsa-p384 via intermediate", pki.ECDSAP384, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l.t = t
			p := newTestPKI(t, tc.kt, now)
			c, theirs := ours(p, tc.kt, tc.inter)
			c.SignRSAPSS = tc.pss
			*cur = *c
			l.loadCharonCerts(charonCertSide{cred: theirs, trust: []*x509.Certificate{p.root}, localID: "gwB.example", remoteID: "gwA.example"})
			up(t, true)
			up(t, false)
			if tc.pss {
				// charon's "rsa/pss" constraint would apply to the CA's
				// signatures too; its log says which scheme it verified.
				log, _ := os.ReadFile(filepath.Join(l.dir, "charon.log"))
				if !strings.Contains(string(log), "authentication of 'gwA.example' with RSA_EMSA_PSS_SHA2_256") {
					t.Error("charon did not log verifying our RSASSA-PSS signature")
				}
			}
		})
	}

	// RFC 7383 with a 4096-bit RSA chain: we fragment to 576-byte
	// datagrams, charon (fragmentation = force) to its 1280.
	t.Run("fragmented rsa-4096 chain", func(t *testing.T) {
		l.t = t
		p := newTestPKI(t, pki.RSA4096, now)
		c, theirs := ours(p, pki.RSA4096, true)
		c.FragmentSize = MinFragmentSize
		*cur = *c
		l.loadCharonCerts(charonCertSide{cred: theirs, trust: []*x509.Certificate{p.root}, localID: "gwB.example", remoteID: "gwA.example", fragmentation: "force"})
		before := l.ep.Stats.Snapshot()
		up(t, true)
		up(t, false)
		after := l.ep.Stats.Snapshot()
		if after.FragmentsSent == before.FragmentsSent || after.Reassembled-before.Reassembled < 2 {
			t.Errorf("fragments sent %d, messages reassembled %d: not fragmented both ways",
				after.FragmentsSent-before.FragmentsSent, after.Reassembled-before.Reassembled)
		}
	})

	t.Run("psk one way, certificate the other", func(t *testing.T) {
		l.t = t
		p := newTestPKI(t, pki.ECDSAP256, now)
		c, theirs := ours(p, pki.ECDSAP256, false)
		c.RemoteAuth, c.PSK = AuthByPSK, []byte("interop secret 0123456789")
		*cur = *c
		l.loadCharonCerts(charonCertSide{cred: theirs, trust: []*x509.Certificate{p.root}, localID: "gwB.example", remoteID: "gwA.example", localPSKSide: true})
		up(t, true)
		up(t, false)
	})

	p := newTestPKI(t, pki.ECDSAP256, now)
	for _, tc := range []struct {
		name  string
		setup func(c *PeerConfig, s *charonCertSide)
		byUs  bool
		says  string
	}{
		{"charon's certificate expired", func(c *PeerConfig, s *charonCertSide) {
			s.cred = issueAt(t, p, now.Add(-60*24*time.Hour), 30*24*time.Hour, "gwB.example")
		}, true, `the peer's certificate "CN=gwB" expired on`},
		{"charon's CA unknown to us", func(c *PeerConfig, s *charonCertSide) {
			other := newTestPKI(t, pki.ECDSAP256, now)
			s.cred = other.issue(pki.ECDSAP256, "gwB", false, "gwB.example")
		}, true, `unknown CA: the peer's certificate "CN=gwB" is issued by "O=flashgate tests, CN=Test Root CA", which is not (and does not chain to) a CA this tunnel trusts`},
		{"charon's ID not in its certificate", func(c *PeerConfig, s *charonCertSide) {
			s.cred = p.issue(pki.ECDSAP256, "gwB", false, "other.example")
			s.localID = "gwB.example"
		}, true, `identity not in the certificate: the peer calls itself gwB.example`},
		{"charon refuses our signature scheme", func(c *PeerConfig, s *charonCertSide) {
			s.remoteAuth = "ecdsa-sha512"
		}, false, `answered AUTHENTICATION_FAILED: it rejected our certificate, its CA, our signature scheme or our identity (we are gwA.example, with certificate "CN=gwA" issued by "O=flashgate tests, CN=Test Root CA", signed with ecdsa-with-SHA256`},
		{"charon revoked us", func(c *PeerConfig, s *charonCertSide) {
			crl, err := pki.NewCRL(p.root, p.rootKey, 1, []pki.Revoked{{Serial: c.LocalCert.Cert.SerialNumber, At: now.Add(-time.Hour)}}, now.Add(-time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			s.crl = crl
		}, false, `answered AUTHENTICATION_FAILED: it rejected our certificate`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l.t = t
			c, theirs := ours(p, pki.ECDSAP256, false)
			s := charonCertSide{cred: theirs, trust: []*x509.Certificate{p.root}, localID: "gwB.example", remoteID: "gwA.example"}
			tc.setup(c, &s)
			*cur = *c
			l.loadCharonCerts(s)
			l.reset()
			if _, err := l.ep.Initiate(cur); err != nil {
				t.Fatal(err)
			}
			f := l.waitFailure(10 * time.Second)
			if f == nil {
				t.Fatalf("no failure; charon:\n%s", l.charonSAs())
			}
			if f.Reason != ReasonAuthenticationFailed || f.ByPeer == tc.byUs || !strings.Contains(f.Error(), tc.says) {
				t.Fatalf("got %q (by peer %v), want AUTHENTICATION_FAILED saying %q", f, f.ByPeer, tc.says)
			}
			if !waitFor(5*time.Second, func() bool { return len(l.ep.SAs()) == 0 }) {
				t.Errorf("%d IKE SAs left on our side", len(l.ep.SAs()))
			}
		})
	}
}
