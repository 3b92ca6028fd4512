package pki

import (
	"bytes"
	"crypto/x509"
	"testing"
	"time"
)

// TestCAIssueRevoke: a CA of each key type issues a certificate that
// chains to it with the names as SANs, and a CRL it signs lists the
// revoked serial; the PEM forms read back.
func TestCAIssueRevoke(t *testing.T) {
	for _, kt := range []KeyType{ECDSAP256, Ed25519, RSA2048} {
		caKey, err := NewKey(kt)
		if err != nil {
			t.Fatal(err)
		}
		ca, err := NewCA(Template{CommonName: "CA " + string(kt), PathLen: -1}, caKey)
		if err != nil {
			t.Fatal(err)
		}
		key, _ := NewKey(ECDSAP256)
		c, err := Issue(Template{CommonName: "gw", Names: []string{"gw.example", "198.51.100.1", "vpn@example.net"}}, key.Public(), ca, caKey, false)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AddCert(ca)
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Errorf("%s: %v", kt, err)
		}
		if len(c.DNSNames) != 1 || len(c.IPAddresses) != 1 || len(c.EmailAddresses) != 1 {
			t.Errorf("%s: SANs %v %v %v", kt, c.DNSNames, c.IPAddresses, c.EmailAddresses)
		}
		crl, err := NewCRL(ca, caKey, 1, []Revoked{{Serial: c.SerialNumber, At: time.Now()}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		kp, _ := KeyPEM(key)
		certs, k, crls, err := ParsePEM(bytes.Join([][]byte{CertPEM(c, ca), kp, CRLPEM(crl)}, nil))
		if err != nil || len(certs) != 2 || !MatchesKey(certs[0], k) || len(crls) != 1 ||
			crls[0].RevokedCertificateEntries[0].SerialNumber.Cmp(c.SerialNumber) != 0 || crls[0].CheckSignatureFrom(ca) != nil {
			t.Errorf("%s: read back: %d certs, %d CRLs, %v", kt, len(certs), len(crls), err)
		}
	}
	if _, _, _, err := ParsePEM([]byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n")); err == nil {
		t.Error("an encrypted key was accepted")
	}
}

// FuzzParsePEM: what an admin uploads is parsed here first; nothing may
// panic, and a key that is returned must be usable.
func FuzzParsePEM(f *testing.F) {
	caKey, _ := NewKey(ECDSAP256)
	ca, _ := NewCA(Template{CommonName: "seed CA", PathLen: -1}, caKey)
	kp, _ := KeyPEM(caKey)
	crl, _ := NewCRL(ca, caKey, 1, nil, time.Now())
	f.Add(CertPEM(ca))
	f.Add(append(CertPEM(ca), kp...))
	f.Add(CRLPEM(crl))
	f.Add([]byte("-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		certs, key, _, err := ParsePEM(b)
		if err != nil {
			return
		}
		if key != nil && key.Public() == nil {
			t.Fatal("a key without a public half")
		}
		for _, c := range certs {
			_ = Describe(c.PublicKey)
		}
	})
}
