package ike

import (
	"crypto"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/pki"
)

// testPKI is a CA with an intermediate, made fresh for each test.
type testPKI struct {
	t           testing.TB
	root        *x509.Certificate
	rootKey     crypto.Signer
	inter       *x509.Certificate
	interKey    crypto.Signer
	now         time.Time
	rootKeyType pki.KeyType
}

func newTestPKI(t testing.TB, kt pki.KeyType, now time.Time) *testPKI {
	p := &testPKI{t: t, now: now, rootKeyType: kt}
	var err error
	if p.rootKey, err = pki.NewKey(kt); err != nil {
		t.Fatal(err)
	}
	if p.root, err = pki.NewCA(pki.Template{CommonName: "Test Root CA", Organization: "flashgate tests", NotBefore: now.Add(-24 * time.Hour), PathLen: -1}, p.rootKey); err != nil {
		t.Fatal(err)
	}
	if p.interKey, err = pki.NewKey(kt); err != nil {
		t.Fatal(err)
	}
	if p.inter, err = pki.Issue(pki.Template{CommonName: "Test Intermediate CA", Organization: "flashgate tests", NotBefore: now.Add(-24 * time.Hour), PathLen: 0},
		p.interKey.Public(), p.root, p.rootKey, true); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue makes an end-entity credential signed by the root, or by the
// intermediate (then sent with its chain).
func (p *testPKI) issue(kt pki.KeyType, cn string, viaInter bool, names ...string) *Credential {
	p.t.Helper()
	key, err := pki.NewKey(kt)
	if err != nil {
		p.t.Fatal(err)
	}
	ca, caKey := p.root, p.rootKey
	if viaInter {
		ca, caKey = p.inter, p.interKey
	}
	c, err := pki.Issue(pki.Template{CommonName: cn, Names: names, NotBefore: p.now.Add(-time.Hour), Validity: 30 * 24 * time.Hour}, key.Public(), ca, caKey, false)
	if err != nil {
		p.t.Fatal(err)
	}
	cred := &Credential{Cert: c, Key: key}
	if viaInter {
		cred.Chain = []*x509.Certificate{p.inter}
	}
	return cred
}

// certPair makes two matching tunnel configurations authenticating with
// certificates of kt from one CA, identities @gwA.example and @gwB.example.
func certPair(t testing.TB, p *testPKI, kt pki.KeyType, viaInter bool) (*PeerConfig, *PeerConfig) {
	a, b := pairConfigs(fiveSuites[0].ike, fiveSuites[0].esp)
	a.PSK, b.PSK = nil, nil
	a.LocalID, a.RemoteID = mustID("gwA.example"), mustID("gwB.example")
	b.LocalID, b.RemoteID = mustID("gwB.example"), mustID("gwA.example")
	for _, c := range []*PeerConfig{a, b} {
		c.LocalAuth, c.RemoteAuth = AuthByCert, AuthByCert
		c.TrustedCAs = []*x509.Certificate{p.root}
	}
	a.LocalCert = p.issue(kt, "gwA", viaInter, "gwA.example")
	b.LocalCert = p.issue(kt, "gwB", viaInter, "gwB.example")
	return a, b
}

func TestCertificateAuth(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // the test network's clock
	for _, tc := range []struct {
		kt    pki.KeyType
		inter bool
		pss   bool
	}{
		{pki.ECDSAP256, false, false}, {pki.ECDSAP384, true, false}, {pki.RSA2048, false, false},
		{pki.RSA2048, true, true}, {pki.Ed25519, false, false},
	} {
		name := string(tc.kt)
		if tc.inter {
			name += "/chain"
		}
		if tc.pss {
			name += "/pss"
		}
		t.Run(name, func(t *testing.T) {
			p := newTestPKI(t, tc.kt, now)
			a, b := certPair(t, p, tc.kt, tc.inter)
			a.SignRSAPSS, b.SignRSAPSS = tc.pss, tc.pss
			_, ea, eb := establish(t, a, b)
			if f := ea.firstFailure(); f != nil {
				t.Fatal(f)
			}
			if f := eb.firstFailure(); f != nil {
				t.Fatal(f)
			}
			sa := ea.established()[0]
			if sa.sig == nil {
				t.Fatal("an SA that signed keeps no signature state")
			}
			if !strings.Contains(sa.sig.ourScheme, map[pki.KeyType]string{pki.ECDSAP256: "ecdsa-with-SHA256", pki.ECDSAP384: "ecdsa-with-SHA384",
				pki.RSA2048: map[bool]string{false: "sha256WithRSA", true: "RSASSA-PSS with sha256"}[tc.pss], pki.Ed25519: "Ed25519"}[tc.kt]) {
				t.Errorf("we signed with %q", sa.sig.ourScheme)
			}
		})
	}
}

// TestCertificateAuthMixed: one side a PSK, the other a certificate (strongSwan
// allows different local and remote auth).
func TestCertificateAuthMixed(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newTestPKI(t, pki.ECDSAP256, now)
	a, b := certPair(t, p, pki.ECDSAP256, false)
	a.RemoteAuth, b.LocalAuth = AuthByPSK, AuthByPSK
	a.PSK, b.PSK = []byte("correct horse battery staple"), []byte("correct horse battery staple")
	b.LocalCert = nil
	establish(t, a, b)
}

// TestCertificateRefusals: each refusal says what is wrong, on the side
// that decides it.
func TestCertificateRefusals(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newTestPKI(t, pki.ECDSAP256, now)
	for _, tc := range []struct {
		name  string
		tweak func(a, b *PeerConfig)
		says  string
	}{
		{"expired", func(a, b *PeerConfig) {
			a.LocalCert = issueAt(t, p, now.Add(-60*24*time.Hour), 30*24*time.Hour, "gwA.example")
		}, `the peer's certificate "CN=gwA" expired on 2025-12-02 00:00:00 UTC (valid from 2025-11-02 00:00:00 UTC); this box's clock says 2026-01-01 00:00:00 UTC`},
		{"not yet valid", func(a, b *PeerConfig) {
			a.LocalCert = issueAt(t, p, now.Add(48*time.Hour), 30*24*time.Hour, "gwA.example")
		}, `is not yet valid: valid from 2026-01-03 00:00:00 UTC to 2026-02-02 00:00:00 UTC; this box's clock says 2026-01-01 00:00:00 UTC`},
		{"unknown CA", func(a, b *PeerConfig) {
			other := newTestPKI(t, pki.ECDSAP256, now)
			a.LocalCert = other.issue(pki.ECDSAP256, "gwA", false, "gwA.example")
		}, `unknown CA: the peer's certificate "CN=gwA" is issued by "O=flashgate tests, CN=Test Root CA", which is not (and does not chain to) a CA this tunnel trusts`},
		{"identity not in certificate", func(a, b *PeerConfig) {
			a.LocalCert = p.issue(pki.ECDSAP256, "gwA", false, "other.example")
		}, `identity not in the certificate: the peer calls itself gwA.example, which its certificate "CN=gwA" does not contain (it has subject CN=gwA, DNS:other.example)`},
		{"revoked", func(a, b *PeerConfig) {
			der, err := pki.NewCRL(p.root, p.rootKey, 1, []pki.Revoked{{Serial: a.LocalCert.Cert.SerialNumber, At: now.Add(-time.Hour)}}, now.Add(-time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			crl, err := x509.ParseRevocationList(der)
			if err != nil {
				t.Fatal(err)
			}
			b.CRLs = []*x509.RevocationList{crl}
		}, `revoked: certificate "CN=gwA" (serial`},
		{"psk where a certificate is expected", func(a, b *PeerConfig) {
			a.LocalAuth, a.PSK = AuthByPSK, []byte("correct horse battery staple")
		}, "peer gwA.example authenticates with a pre-shared key, we expect a certificate"},
		{"no certificate", func(a, b *PeerConfig) {
			b.TrustedCAs = nil
		}, "no trusted CA is configured for this tunnel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := certPair(t, p, pki.ECDSAP256, false)
			tc.tweak(a, b)
			n, ea, eb := twoPeers(t, a, b)
			if _, err := ea.ep.Initiate(a); err != nil {
				t.Fatal(err)
			}
			n.run()
			f := eb.firstFailure()
			if f == nil || f.Reason != ReasonAuthenticationFailed || !strings.Contains(f.Error(), tc.says) {
				t.Fatalf("responder says %v, want AUTHENTICATION_FAILED saying %q", f, tc.says)
			}
			fa := ea.firstFailure()
			if fa == nil || !fa.ByPeer || fa.Reason != ReasonAuthenticationFailed {
				t.Fatalf("initiator says %v, want the peer's AUTHENTICATION_FAILED", fa)
			}
			if len(ea.established())+len(eb.established()) != 0 {
				t.Fatal("an SA came up")
			}
		})
	}
}

// TestCertificateRefusedByInitiator: the initiator checks the responder too.
func TestCertificateRefusedByInitiator(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newTestPKI(t, pki.ECDSAP256, now)
	a, b := certPair(t, p, pki.ECDSAP256, false)
	b.LocalCert = issueAt(t, p, now.Add(-60*24*time.Hour), 30*24*time.Hour, "gwB.example")
	n, ea, _ := twoPeers(t, a, b)
	ea.ep.Initiate(a)
	n.run()
	n.step(3*time.Second, 100*time.Millisecond)
	f := ea.firstFailure()
	if f == nil || f.ByPeer || !strings.Contains(f.Error(), `the peer's certificate "CN=gwB" expired on`) {
		t.Fatalf("initiator says %v", f)
	}
	if len(ea.ep.SAs()) != 0 {
		t.Fatalf("%d SAs left", len(ea.ep.SAs()))
	}
}

func issueAt(t testing.TB, p *testPKI, from time.Time, valid time.Duration, names ...string) *Credential {
	key, _ := pki.NewKey(pki.ECDSAP256)
	cn := "gw" + strings.ToUpper(names[0][2:3])
	c, err := pki.Issue(pki.Template{CommonName: cn, Names: names, NotBefore: from, Validity: valid}, key.Public(), p.root, p.rootKey, false)
	if err != nil {
		t.Fatal(err)
	}
	return &Credential{Cert: c, Key: key}
}

// TestClassicSignatureMethods: without SIGNATURE_HASH_ALGORITHMS we sign
// with method 1 (RSA) and 9/10 (ECDSA), and verify them; Ed25519 has none.
func TestClassicSignatureMethods(t *testing.T) {
	octets := []byte("the signed octets of some IKE_SA_INIT")
	for kt, want := range map[pki.KeyType]AuthMethod{pki.RSA2048: AuthRSA, pki.ECDSAP256: AuthECDSA256, pki.ECDSAP384: AuthECDSA384} {
		key, _ := pki.NewKey(kt)
		m, s, err := chooseSignature(key, nil, false, false)
		if err != nil || m != want {
			t.Fatalf("%s: method %d, %v; want %d", kt, m, err, want)
		}
		data, err := signAuth(key, m, s, octets)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := verifyAuth(key.Public(), m, data, octets); err != nil {
			t.Errorf("%s: %v", kt, err)
		}
		if _, err := verifyAuth(key.Public(), m, data, append(octets, 1)); err == nil {
			t.Errorf("%s: a signature over other octets verifies", kt)
		}
	}
	key, _ := pki.NewKey(pki.Ed25519)
	if _, _, err := chooseSignature(key, nil, false, false); err == nil || !strings.Contains(err.Error(), "signature scheme refused") {
		t.Errorf("Ed25519 without RFC 7427: %v", err)
	}
	// A peer that takes only SHA-1 signatures gets none from us.
	ec, _ := pki.NewKey(pki.ECDSAP256)
	if _, _, err := chooseSignature(ec, []uint16{hashSHA1}, true, false); err == nil || !strings.Contains(err.Error(), "the peer accepts the hashes sha1") {
		t.Errorf("SHA-1 only peer: %v", err)
	}
	// And we refuse an RFC 7427 signature with SHA-1.
	m, s := AuthDigitalSig, schemesByOID[4] // ecdsa-with-SHA1
	data, _ := signAuth(ec, m, s, octets)
	if _, err := verifyAuth(ec.Public(), m, data, octets); err == nil || !strings.Contains(err.Error(), "signature scheme refused: the peer signed with ecdsa-with-SHA1") {
		t.Errorf("SHA-1 signature: %v", err)
	}
}

func TestParseDNIdentity(t *testing.T) {
	id, err := ParseIdentity("C=CH, O=strongSwan, CN=moon.strongswan.org")
	if err != nil || id.Type != IDDERDN {
		t.Fatal(id, err)
	}
	if got := id.String(); got != "C=CH, O=strongSwan, CN=moon.strongswan.org" {
		t.Errorf("String() = %q", got)
	}
	for _, bad := range []string{"CN=", "CN=a, nonsense", "XX=1, CN=a"} {
		if _, err := ParseIdentity(bad); err == nil && looksLikeDN(bad) {
			t.Errorf("%q parsed", bad)
		}
	}
}
