package configd_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/flashgate/flashgate/internal/pki"
)

// The store's life through configd: a CA, the box's certificate (key kept
// in configd, redacted on the web UI's socket), a peer's bundle (PEM and
// PKCS#12, only with the password on the web UI's socket), a revocation
// with its CRL, and imports of what the bundles carry.
func TestCertificateStore(t *testing.T) {
	full := serve(t)
	web := serveRestricted(t, full)
	ctx := context.Background()
	commitTunnelAndAdmin(t, ctx, full.c, "admin")
	if _, err := web.c.CreateCA(ctx, configdapi.CreateCARequest{Name: "ca", CommonName: "flashgate CA"}); err != nil {
		t.Fatal(err)
	}
	if _, err := web.c.IssueCertificate(ctx, configdapi.IssueRequest{CA: "ca", Name: "box", CommonName: "box", Names: []string{"box.example"}}); err != nil {
		t.Fatal(err)
	}
	// Without the password the web UI gets no peer key.
	_, _, err := web.c.IssuePeerBundle(ctx, configdapi.IssueRequest{CA: "ca", Name: "peer", CommonName: "peer", Names: []string{"peer.example"}})
	var ae *configdapi.APIError
	if !errors.As(err, &ae) || ae.Code != configdapi.CodeWrongPassword {
		t.Fatalf("peer bundle without the password: %v", err)
	}
	authed := web.c.WithPassword("admin", "correct horse battery")
	pemBundle, _, err := authed.IssuePeerBundle(ctx, configdapi.IssueRequest{CA: "ca", Name: "peer", CommonName: "peer", Names: []string{"peer.example"}})
	if err != nil {
		t.Fatal(err)
	}
	certs, key, _, err := pki.ParsePEM(pemBundle)
	if err != nil || len(certs) != 2 || key == nil || !pki.MatchesKey(certs[0], key) || certs[0].DNSNames[0] != "peer.example" {
		t.Fatalf("PEM bundle: %d certs, key %v, %v", len(certs), key != nil, err)
	}
	if _, _, err := authed.IssuePeerBundle(ctx, configdapi.IssueRequest{CA: "ca", Name: "p12", CommonName: "p12", Format: "p12", Passphrase: "short"}); err == nil {
		t.Error("a PKCS#12 passphrase of 5 characters was accepted")
	}
	p12, _, err := authed.IssuePeerBundle(ctx, configdapi.IssueRequest{CA: "ca", Name: "p12", CommonName: "p12", KeyType: pki.RSA2048, Format: "p12", Passphrase: "bundle passphrase"})
	if err != nil {
		t.Fatal(err)
	}
	k12, c12, cas12, err := pkcs12.DecodeChain(p12, "bundle passphrase")
	if err != nil || c12.Subject.CommonName != "p12" || len(cas12) != 1 || k12 == nil {
		t.Fatalf("PKCS#12 bundle: %v %v %d", err, c12, len(cas12))
	}

	// The web UI sees no private key; the full socket does, for iked.
	cand, err := web.c.Candidate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range cand.Config.Certificates {
		if k := e.Key.Reveal(); strings.Contains(k, "PRIVATE KEY") {
			t.Errorf("the web UI's candidate holds %s's key", e.Name)
		}
	}
	if peer := cand.Config.Certificate("peer"); peer == nil || peer.Key.IsSet() {
		t.Error("the peer's key was kept on the box")
	}
	fc, _ := full.c.Candidate(ctx)
	if box := fc.Config.Certificate("box"); box == nil || !strings.Contains(box.Key.Reveal(), "PRIVATE KEY") {
		t.Fatal("the box's key is not in configd")
	}
	// An edit through the web UI keeps the redacted keys.
	if _, err := web.c.ReplaceCandidate(ctx, "", cand.Config); err != nil {
		t.Fatal(err)
	}

	// Revoke the peer: the CA's CRL lists it.
	if _, err := web.c.RevokeCertificate(ctx, "", "peer"); err != nil {
		t.Fatal(err)
	}
	fc, _ = full.c.Candidate(ctx)
	ca, err := fc.Config.Certificate("ca").Parse()
	if err != nil || ca.CRL == nil || len(ca.CRL.RevokedCertificateEntries) != 1 ||
		ca.CRL.RevokedCertificateEntries[0].SerialNumber.Cmp(certs[0].SerialNumber) != 0 {
		t.Fatalf("CRL after revoking the peer: %+v, %v", ca.CRL, err)
	}
	if _, err := web.c.RevokeCertificate(ctx, "", "ca"); err == nil {
		t.Error("revoked a CA that no CA of the box issued")
	}

	// Imports: the PEM bundle's CA, the PKCS#12 as certificate and key,
	// a wrong passphrase, a certificate without its key.
	caPEM := string(pki.CertPEM(certs[1]))
	if _, err := web.c.ImportCertificate(ctx, configdapi.CertImportRequest{Name: "other-ca", PEM: caPEM}); err != nil {
		t.Errorf("import a CA certificate: %v", err)
	}
	if _, err := web.c.ImportCertificate(ctx, configdapi.CertImportRequest{Name: "pk", PKCS12: base64.StdEncoding.EncodeToString(p12), Passphrase: "wrong"}); err == nil ||
		!strings.Contains(err.Error(), "wrong passphrase") {
		t.Errorf("PKCS#12 with a wrong passphrase: %v", err)
	}
	if _, err := web.c.ImportCertificate(ctx, configdapi.CertImportRequest{Name: "pk", PKCS12: base64.StdEncoding.EncodeToString(p12), Passphrase: "bundle passphrase"}); err != nil {
		t.Fatal(err)
	}
	if _, err := web.c.ImportCertificate(ctx, configdapi.CertImportRequest{Name: "nokey", PEM: string(pki.CertPEM(certs[0]))}); err == nil ||
		!strings.Contains(err.Error(), "is not a CA and comes without its key") {
		t.Errorf("a certificate without key: %v", err)
	}
	// A tunnel authenticating with the box's certificate validates and
	// commits, through the web UI's socket.
	for _, set := range [][]string{{"tunnels.branch.auth", "cert"}, {"tunnels.branch.local_cert", "box"}, {"tunnels.branch.trusted_cas", "ca"}} {
		if _, err := web.c.Set(ctx, "", set[0], set[1]); err != nil {
			t.Fatalf("set %s: %v", set[0], err)
		}
	}
	web.c.Set(ctx, "", "tunnels.branch.local_cert", "peer")
	if ve, err := web.c.Validate(ctx); err != nil || !strings.Contains(ve.Error(), `the box holds no private key for "peer"`) {
		t.Errorf("a peer's certificate as ours: %v %v", ve, err)
	}
	web.c.Set(ctx, "", "tunnels.branch.local_cert", "box")
	if _, err := full.c.Commit(ctx, configdapi.CommitRequest{Who: "t", Message: "certificates"}); err != nil {
		t.Fatal(err)
	}
}
