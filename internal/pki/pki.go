// Package pki is flashgate's small certificate authority: keys, CA and
// end-entity certificates, CRLs and their PEM forms, all with the standard
// library's crypto/x509. configd's certificate store and the tests of the
// IKE engine make their certificates with it.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"strings"
	"time"
)

// KeyType names a key algorithm and size.
type KeyType string

const (
	ECDSAP256 KeyType = "ecdsa-p256" // the default
	ECDSAP384 KeyType = "ecdsa-p384"
	RSA2048   KeyType = "rsa-2048"
	RSA3072   KeyType = "rsa-3072"
	RSA4096   KeyType = "rsa-4096"
	Ed25519   KeyType = "ed25519"
)

// KeyTypes lists the key types in the order a form offers them.
var KeyTypes = []KeyType{ECDSAP256, ECDSAP384, RSA3072, RSA4096, RSA2048, Ed25519}

// NewKey makes a private key of type t ("" is ECDSA P-256).
func NewKey(t KeyType) (crypto.Signer, error) {
	switch t {
	case ECDSAP256, "":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case ECDSAP384:
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case RSA2048:
		return rsa.GenerateKey(rand.Reader, 2048)
	case RSA3072:
		return rsa.GenerateKey(rand.Reader, 3072)
	case RSA4096:
		return rsa.GenerateKey(rand.Reader, 4096)
	case Ed25519:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("key type %q: want one of %v", t, KeyTypes)
}

// Template is what a certificate says about its subject. Names are
// subjectAltNames: DNS names, e-mail addresses and IP addresses, each
// written the way an IKE identity is (an address, user@host, or a name).
type Template struct {
	CommonName   string
	Organization string
	Names        []string
	NotBefore    time.Time     // zero: now, minus an hour for clock skew
	Validity     time.Duration // zero: 10 years for a CA, 3 for others
	PathLen      int           // CAs: how many intermediates may follow (-1: no limit)
}

func (t Template) subject() pkix.Name {
	n := pkix.Name{CommonName: t.CommonName}
	if t.Organization != "" {
		n.Organization = []string{t.Organization}
	}
	return n
}

func (t Template) times(ca bool) (time.Time, time.Time) {
	from := t.NotBefore
	if from.IsZero() {
		from = time.Now().Add(-time.Hour).Truncate(time.Second)
	}
	v := t.Validity
	if v == 0 {
		v = 3 * 365 * 24 * time.Hour
		if ca {
			v = 10 * 365 * 24 * time.Hour
		}
	}
	return from, from.Add(v)
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func keyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	h := sha1.Sum(der)
	return h[:], nil
}

// NewCA makes a self-signed CA certificate for key.
func NewCA(t Template, key crypto.Signer) (*x509.Certificate, error) {
	if t.CommonName == "" {
		return nil, errors.New("a CA needs a common name")
	}
	return create(t, key.Public(), nil, key, true)
}

// Issue makes a certificate for pub signed by the CA. With isCA the
// result is an intermediate CA.
func Issue(t Template, pub crypto.PublicKey, ca *x509.Certificate, caKey crypto.Signer, isCA bool) (*x509.Certificate, error) {
	if t.CommonName == "" && len(t.Names) == 0 {
		return nil, errors.New("a certificate needs a common name or a name")
	}
	return create(t, pub, ca, caKey, isCA)
}

func create(t Template, pub crypto.PublicKey, parent *x509.Certificate, signer crypto.Signer, isCA bool) (*x509.Certificate, error) {
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	skid, err := keyID(pub)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	from, to := t.times(isCA)
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: t.subject(), NotBefore: from, NotAfter: to,
		SubjectKeyId: skid, BasicConstraintsValid: true, IsCA: isCA,
	}
	if isCA {
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
		if t.PathLen >= 0 {
			tmpl.MaxPathLen, tmpl.MaxPathLenZero = t.PathLen, t.PathLen == 0
		} else {
			tmpl.MaxPathLen = -1
		}
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		// strongSwan and Windows look for these on VPN gateways.
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	for _, n := range t.Names {
		switch a, err := netip.ParseAddr(n); {
		case err == nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(a.AsSlice()))
		case strings.Contains(n, "@"):
			tmpl.EmailAddresses = append(tmpl.EmailAddresses, n)
		case n != "":
			tmpl.DNSNames = append(tmpl.DNSNames, strings.TrimPrefix(n, "@"))
		}
	}
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("create certificate %q: %w", t.CommonName, err)
	}
	return x509.ParseCertificate(der)
}

// Revoked is one revoked certificate for a CRL.
type Revoked struct {
	Serial *big.Int
	At     time.Time
}

// NewCRL makes the CA's revocation list number n, valid for a week.
func NewCRL(ca *x509.Certificate, caKey crypto.Signer, n int64, revoked []Revoked, now time.Time) ([]byte, error) {
	var entries []x509.RevocationListEntry
	for _, r := range revoked {
		entries = append(entries, x509.RevocationListEntry{SerialNumber: r.Serial, RevocationTime: r.At})
	}
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
		Number: big.NewInt(n), ThisUpdate: now, NextUpdate: now.Add(7 * 24 * time.Hour),
		RevokedCertificateEntries: entries,
	}, ca, caKey)
	if err != nil {
		return nil, fmt.Errorf("CRL of %q: %w", ca.Subject.CommonName, err)
	}
	return der, nil
}

// CertPEM encodes certificates as PEM.
func CertPEM(certs ...*x509.Certificate) []byte {
	var b []byte
	for _, c := range certs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return b
}

// KeyPEM encodes a private key as unencrypted PKCS#8 PEM.
func KeyPEM(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	clear(der)
	return b, nil
}

// CRLPEM encodes a CRL as PEM.
func CRLPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})
}

// ParsePEM reads the certificates, the first private key and the CRLs in
// PEM text (any order; other blocks are an error, so that a mistaken
// upload says so).
func ParsePEM(b []byte) (certs []*x509.Certificate, key crypto.Signer, crls []*x509.RevocationList, err error) {
	for n := 1; ; n++ {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		switch blk.Type {
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("PEM block %d (certificate): %w", n, err)
			}
			certs = append(certs, c)
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			if key != nil {
				return nil, nil, nil, fmt.Errorf("PEM block %d: a second private key", n)
			}
			if key, err = ParseKey(blk.Bytes); err != nil {
				return nil, nil, nil, fmt.Errorf("PEM block %d (%s): %w", n, strings.ToLower(blk.Type), err)
			}
		case "X509 CRL":
			c, err := x509.ParseRevocationList(blk.Bytes)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("PEM block %d (CRL): %w", n, err)
			}
			crls = append(crls, c)
		case "ENCRYPTED PRIVATE KEY":
			return nil, nil, nil, fmt.Errorf("PEM block %d is an encrypted private key: decrypt it first (openssl pkey -in key.pem -out plain.pem) or import a PKCS#12 file", n)
		default:
			return nil, nil, nil, fmt.Errorf("PEM block %d is a %q, not a certificate, key or CRL", n, blk.Type)
		}
	}
	if len(certs) == 0 && key == nil && len(crls) == 0 {
		return nil, nil, nil, errors.New("no PEM certificate, key or CRL found")
	}
	return certs, key, crls, nil
}

// ParseKey reads a DER private key: PKCS#8, PKCS#1 (RSA) or SEC 1 (EC).
func ParseKey(der []byte) (crypto.Signer, error) {
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
		return nil, fmt.Errorf("a %T key cannot sign", k)
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("not a PKCS#8, PKCS#1 or SEC 1 private key")
}

// MatchesKey reports whether key is the private key of cert.
func MatchesKey(cert *x509.Certificate, key crypto.Signer) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	p, ok := key.Public().(equaler)
	return ok && p.Equal(cert.PublicKey)
}

// Describe is a one-line summary of a key's type, e.g. "ECDSA P-256".
func Describe(pub crypto.PublicKey) string {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		return "ECDSA " + k.Curve.Params().Name
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA %d", k.N.BitLen())
	case ed25519.PublicKey:
		return "Ed25519"
	}
	return fmt.Sprintf("%T", pub)
}
