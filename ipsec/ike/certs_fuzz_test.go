package ike

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/pki"
)

// FuzzCertAuth feeds arbitrary decrypted IKE_AUTH payload chains to the
// certificate path: payload decoding, the CERT payloads' X.509 parsing,
// chain validation against a real CA, identity matching and the AUTH
// payload's RFC 7427 algorithm identifier and signature. Nothing may
// panic, and nothing the fuzzer makes may verify (it has no CA key).
func FuzzCertAuth(f *testing.F) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newTestPKI(f, pki.ECDSAP256, now)
	octets := []byte("signed octets")
	for _, kt := range []pki.KeyType{pki.ECDSAP256, pki.RSA2048, pki.Ed25519} {
		cred := p.issue(kt, "gwA", true, "gwA.example")
		for _, announced := range []bool{true, false} {
			m, s, err := chooseSignature(cred.Key, ourSignatureHashes, announced, kt == pki.RSA2048)
			if err != nil {
				continue
			}
			sig, _ := signAuth(cred.Key, m, s, octets)
			ps := []Payload{mustID("gwA.example").payload(false)}
			ps = append(ps, certPayloads(cred)...)
			ps = append(ps, certRequest([]*x509.Certificate{p.root}), &Auth{Method: m, Data: sig}, signatureHashesNotify())
			f.Add(appendPayloads(nil, ps))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := DecodePayloads(PayloadIDi, b)
		if err != nil {
			return
		}
		parseSignatureHashes(ps)
		id, _ := findPayload(ps, PayloadIDi).(*ID)
		auth, _ := findPayload(ps, PayloadAUTH).(*Auth)
		leaf, inter, err := peerCertificates(ps)
		if err != nil || id == nil || auth == nil {
			return
		}
		certNames(leaf)
		certContains(leaf, Identity{id.IDType, id.Data})
		chainErr := verifyPeerCert(leaf, inter, []*x509.Certificate{p.root}, nil, now)
		_, sigErr := verifyAuth(leaf.PublicKey, auth.Method, auth.Data, octets)
		if chainErr == nil && sigErr == nil {
			// Only the seeds' certificates chain to our CA; the fuzzer
			// can only have replayed a seed.
			for _, c := range append(inter, leaf) {
				if c.CheckSignatureFrom(p.root) != nil && c.CheckSignatureFrom(p.inter) != nil {
					t.Fatalf("certificate %q verified without a CA signature", c.Subject)
				}
			}
		}
	})
}
