package iked

import (
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/pki"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
)

// TestCertificatesStrongSwan: iked on gwA with a tunnel that takes its
// certificate, key and trusted CA from the configuration's store (as
// configd makes them: a CA with its key, this box's certificate, a peer's
// bundle), against charon on gwB using the peer's bundle; both roles,
// hostA reaches hostB through the tunnel. Then charon's certificate is
// revoked in the store and the tunnel is refused with the word.
func TestCertificatesStrongSwan(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	caKey, _ := pki.NewKey(pki.ECDSAP256)
	ca, err := pki.NewCA(pki.Template{CommonName: "Office VPN CA", PathLen: -1}, caKey)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(id string) (string, string, string) {
		k, _ := pki.NewKey(pki.ECDSAP256)
		c, err := pki.Issue(pki.Template{CommonName: id, Names: []string{id}}, k.Public(), ca, caKey, false)
		if err != nil {
			t.Fatal(err)
		}
		kp, _ := pki.KeyPEM(k)
		return string(pki.CertPEM(c)), string(kp), c.SerialNumber.String()
	}
	boxCert, boxKey, _ := issue("gwA.example")
	peerCert, peerKey, _ := issue("gwB.example")
	caKeyPEM, _ := pki.KeyPEM(caKey)
	store := []config.Certificate{
		{Name: "office-ca", Cert: string(pki.CertPEM(ca)), Key: config.NewSecret(string(caKeyPEM)), CA: true},
		{Name: "box", Cert: boxCert, Key: config.NewSecret(boxKey), Issuer: "office-ca"},
		{Name: "hq", Cert: peerCert, Issuer: "office-ca"},
	}
	for _, weInitiate := range []bool{true, false} {
		role := map[bool]string{true: "initiator", false: "responder"}[weInitiate]
		t.Run(role, func(t *testing.T) {
			s := testnet.NewSiteToSite(t)
			start, peerStart := config.StartRespond, "none"
			if weInitiate {
				start = config.StartInitiate
			}
			conn := charonConn(s, memIKE, memESP, peerStart)
			conn.PSK, conn.LocalID, conn.RemoteID = "", "gwB.example", "gwA.example"
			conn.CertPEM, conn.KeyPEM, conn.CAPEM = peerCert, peerKey, string(pki.CertPEM(ca))
			charon := testnet.StartCharon(t, s.GwB, conn)
			tun := tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA.example", "gwB.example", s.LANA, s.LANB, memIKE, memESP, start)
			tun.PSK = config.Secret{}
			tun.Auth, tun.LocalCert, tun.TrustedCAs = config.AuthCert, "box", []string{"office-ca"}
			cfg := &config.Config{Tunnels: []config.Tunnel{tun}, Certificates: store}
			d := startIkedConfig(t, s.GwA, cfg)
			if !weInitiate {
				if err := charon.Initiate("s2s-net"); err != nil {
					t.Fatal(err)
				}
			}
			waitState(t, d, "s2s", ipsec.StateUp, 15*time.Second)
			if err := testnet.Ping(s.HostA, s.HostBIP, 3); err != nil {
				t.Fatalf("hostA -> hostB through the certificate tunnel: %v", err)
			}
			if weInitiate {
				return
			}
			// Revoke the peer in the store (what configd's revoke does)
			// and apply: the tunnel restarts and charon's next attempt is
			// refused as revoked.
			certs, _, _, _ := pki.ParsePEM([]byte(peerCert))
			crl, err := pki.NewCRL(ca, caKey, 1, []pki.Revoked{{Serial: certs[0].SerialNumber, At: time.Now().Add(-time.Minute)}}, time.Now().Add(-time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			revoked := *cfg
			revoked.Certificates = append([]config.Certificate(nil), store...)
			revoked.Certificates[0].CRL = string(pki.CRLPEM(crl))
			revoked.Certificates[2].Revoked = time.Now().UTC().Format(time.RFC3339)
			if err := d.Apply(&revoked); err != nil {
				t.Fatal(err)
			}
			charon.Initiate("s2s-net") // fails: we refuse it
			waitEvent(t, d, "s2s", `revoked: certificate "CN=gwB.example"`, 10*time.Second)
			if st := tunnelStatus(d, "s2s"); st.State == ipsec.StateUp {
				t.Fatalf("up with a revoked peer: %+v", st)
			}
		})
	}
}
