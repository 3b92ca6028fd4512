package bench

import (
	"crypto"
	"crypto/x509"
	"fmt"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/pki"
	"github.com/flashgate/flashgate/internal/testnet"
)

// benchCerts is a CA and a certificate per gateway (ECDSA P-256), with
// the gateways' IDs as subjectAltNames.
type benchCerts struct {
	ca    *x509.Certificate
	certs map[string]*x509.Certificate
	keys  map[string]crypto.Signer
}

func newBenchCerts(b *testing.B, ids ...string) *benchCerts {
	caKey, _ := pki.NewKey(pki.ECDSAP256)
	ca, err := pki.NewCA(pki.Template{CommonName: "bench CA", PathLen: -1}, caKey)
	if err != nil {
		b.Fatal(err)
	}
	c := &benchCerts{ca: ca, certs: map[string]*x509.Certificate{}, keys: map[string]crypto.Signer{}}
	for _, id := range ids {
		k, _ := pki.NewKey(pki.ECDSAP256)
		cert, err := pki.Issue(pki.Template{CommonName: id, Names: []string{id}}, k.Public(), ca, caKey, false)
		if err != nil {
			b.Fatal(err)
		}
		c.certs[id], c.keys[id] = cert, k
	}
	return c
}

func (c *benchCerts) keyPEM(b *testing.B, id string) string {
	k, err := pki.KeyPEM(c.keys[id])
	if err != nil {
		b.Fatal(err)
	}
	return string(k)
}

// store is the configuration's certificate store of gateway id.
func (c *benchCerts) store(b *testing.B, id string) []config.Certificate {
	return []config.Certificate{
		{Name: "ca", Cert: string(pki.CertPEM(c.ca)), CA: true},
		{Name: "box", Cert: string(pki.CertPEM(c.certs[id])), Key: config.NewSecret(c.keyPEM(b, id))},
	}
}

func certTunnel(t config.Tunnel) config.Tunnel {
	t.PSK = config.Secret{}
	t.Auth, t.LocalCert, t.TrustedCAs = config.AuthCert, "box", []string{"ca"}
	return t
}

// BenchmarkIKESetupCert is ike.setup_ms_cert: BenchmarkIKESetup with ECDSA
// P-256 certificates both ways instead of the PSK (IDs gwA.example and
// gwB.example in the certificates' subjectAltNames; each side sends its
// certificate and checks the other's chain to the one CA).
func BenchmarkIKESetupCert(b *testing.B) {
	const idA, idB = "gwA.example", "gwB.example"
	certs := newBenchCerts(b, idA, idB)
	b.Run("flashgate", func(b *testing.B) {
		s := testnet.NewSiteToSite(b)
		p := tunnelPair{ike: setupProposal, esp: "aes128gcm16"}
		resp := certTunnel(p.tunnel(s.GwBWAN, s.GwAWAN, idB, idA, s.LANB, s.LANA, config.StartRespond))
		d := startIked(b, s.GwB)
		if err := d.Apply(&config.Config{Tunnels: []config.Tunnel{resp}, Certificates: certs.store(b, idB)}); err != nil {
			b.Fatal(err)
		}
		a, w := startIkedWatched(b, s.GwA)
		store := certs.store(b, idA)
		var total time.Duration
		for i := 0; i < b.N; i++ {
			t := certTunnel(p.tunnel(s.GwAWAN, s.GwBWAN, idA, idB, s.LANA, s.LANB, config.StartInitiate))
			t.Name = fmt.Sprintf("t%d", i)
			up := w.expect(t.Name)
			start := time.Now()
			if err := a.Apply(&config.Config{Tunnels: []config.Tunnel{t}, Certificates: store}); err != nil {
				b.Fatal(err)
			}
			select {
			case <-up:
			case <-time.After(10 * time.Second):
				b.Fatalf("setup %d: not up after 10 s: %+v", i, a.Status())
			}
			total += time.Since(start)
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/setup")
		b.ReportMetric(0, "ns/op")
	})
	b.Run("strongswan", func(b *testing.B) {
		s := testnet.NewSiteToSite(b)
		caPEM := string(pki.CertPEM(certs.ca))
		conn := testnet.CharonConn{Name: "s2s", LocalAddr: s.GwAWAN, RemoteAddr: s.GwBWAN, LocalID: idA, RemoteID: idB,
			Proposals: setupProposal, ESPProposals: "aes128gcm16", LocalTS: s.LANANets(), RemoteTS: s.LANBNets(),
			CertPEM: string(pki.CertPEM(certs.certs[idA])), KeyPEM: certs.keyPEM(b, idA), CAPEM: caPEM}
		a := testnet.StartCharon(b, s.GwA, conn)
		peer := conn
		peer.LocalAddr, peer.RemoteAddr, peer.LocalID, peer.RemoteID = s.GwBWAN, s.GwAWAN, idB, idA
		peer.LocalTS, peer.RemoteTS = s.LANBNets(), s.LANANets()
		peer.CertPEM, peer.KeyPEM = string(pki.CertPEM(certs.certs[idB])), certs.keyPEM(b, idB)
		testnet.StartCharon(b, s.GwB, peer)
		sess, err := a.Session()
		if err != nil {
			b.Fatal(err)
		}
		defer sess.Close()
		var total time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			if err := charonInitiate(sess); err != nil {
				b.Fatalf("setup %d: %v", i, err)
			}
			total += time.Since(start)
			charonTerminate(sess)
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/setup")
		b.ReportMetric(0, "ns/op")
	})
}
