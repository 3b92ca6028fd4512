package iked

import (
	"crypto"
	"crypto/x509"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/pki"
	"github.com/flashgate/flashgate/ipsec"
)

// storeEntry is a certificate store entry as configd makes it.
func storeEntry(t *testing.T, name string, c *x509.Certificate, key crypto.Signer, ca bool) config.Certificate {
	t.Helper()
	e := config.Certificate{Name: name, Cert: string(pki.CertPEM(c)), CA: ca}
	if key != nil {
		k, err := pki.KeyPEM(key)
		if err != nil {
			t.Fatal(err)
		}
		e.Key = config.NewSecret(string(k))
	}
	return e
}

// certGateway is memNet.gateway with a certificate store.
func (n *memNet) certGateway(t *testing.T, addr netip.Addr, cfg *config.Config) *memGateway {
	t.Helper()
	g := n.gateway(addr)
	if err := g.Apply(cfg); err != nil {
		t.Fatalf("apply: %v", err)
	}
	return g
}

// TestMemCertificateTunnel: two daemons whose tunnels authenticate with
// certificates from the store (the box's own with its key, the CA to
// trust) come up; the subject DN is the identity when local_id is empty; a
// CRL revoking A's certificate, committed at B, takes B's tunnel down
// and refuses A with "revoked".
func TestMemCertificateTunnel(t *testing.T) {
	caKey, _ := pki.NewKey(pki.ECDSAP256)
	ca, err := pki.NewCA(pki.Template{CommonName: "Box CA", NotBefore: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), PathLen: -1}, caKey)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(cn string) (*x509.Certificate, crypto.Signer) {
		k, _ := pki.NewKey(pki.ECDSAP256)
		c, err := pki.Issue(pki.Template{CommonName: cn, NotBefore: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)}, k.Public(), ca, caKey, false)
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	certA, keyA := issue("gwA")
	certB, keyB := issue("gwB")
	tun := func(local, remote netip.Addr, lan, far netip.Prefix, start, cert string) config.Tunnel {
		tt := memTunnel(local, remote, lan, far, start)
		tt.PSK = config.Secret{}
		tt.LocalID, tt.RemoteID = "", ""
		tt.Auth, tt.LocalCert, tt.TrustedCAs = config.AuthCert, cert, []string{"ca"}
		return tt
	}
	cfgA := &config.Config{Tunnels: []config.Tunnel{tun(memA, memB, memLANA, memLANB, config.StartInitiate, "box")},
		Certificates: []config.Certificate{storeEntry(t, "ca", ca, nil, true), storeEntry(t, "box", certA, keyA, false)}}
	cfgB := &config.Config{Tunnels: []config.Tunnel{tun(memB, memA, memLANB, memLANA, config.StartRespond, "box")},
		Certificates: []config.Certificate{storeEntry(t, "ca", ca, nil, true), storeEntry(t, "box", certB, keyB, false)}}
	n := newMemNet(t)
	b := n.certGateway(t, memB, cfgB)
	a := n.certGateway(t, memA, cfgA)
	n.run()
	a.want(t, "s2s", ipsec.StateUp, "")
	b.want(t, "s2s", ipsec.StateUp, "")

	// B's CA revokes A.
	crl, err := pki.NewCRL(ca, caKey, 1, []pki.Revoked{{Serial: certA.SerialNumber, At: n.net.Clock.Now().Add(-time.Minute)}}, n.net.Clock.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	cfgB.Certificates[0].CRL = string(pki.CRLPEM(crl))
	if err := b.Apply(cfgB); err != nil {
		t.Fatal(err)
	}
	n.run()
	n.step(3*time.Second, 100*time.Millisecond)
	st := b.st("s2s")
	if st.State == ipsec.StateUp || !strings.Contains(st.Reason+eventLines(st), `revoked: certificate "CN=gwA"`) {
		t.Fatalf("B after revoking A: %s %q\n%s", st.State, st.Reason, eventLines(st))
	}
}
