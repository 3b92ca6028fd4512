package ike

import (
	"bytes"
	"crypto"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// AuthKind is how one side of a tunnel proves who it is.
type AuthKind uint8

const (
	AuthByPSK  AuthKind = iota // a pre-shared key (the zero value)
	AuthByCert                 // a signature with the key of an X.509 certificate
)

func (k AuthKind) String() string {
	if k == AuthByCert {
		return "certificate"
	}
	return "pre-shared key"
}

// Credential is what we authenticate with when LocalAuth is AuthByCert: our
// certificate, the intermediate CAs sent with it, and its private key.
type Credential struct {
	Cert  *x509.Certificate
	Chain []*x509.Certificate
	Key   crypto.Signer
}

// certX509Signature is the CERT/CERTREQ encoding "X.509 Certificate -
// Signature" (RFC 7296 3.6): a DER certificate, or in a CERTREQ the SHA-1
// hashes of trusted CAs' SubjectPublicKeyInfo.
const certX509Signature = 4

// maxPeerCerts bounds the CERT payloads we look at: a leaf and a chain.
const maxPeerCerts = 8

func certPayloads(c *Credential) []Payload {
	ps := []Payload{&Cert{Encoding: certX509Signature, Data: c.Cert.Raw}}
	for _, ca := range c.Chain {
		ps = append(ps, &Cert{Encoding: certX509Signature, Data: ca.Raw})
	}
	return ps
}

// certRequest is a CERTREQ naming the CAs we trust.
func certRequest(cas []*x509.Certificate) *Cert {
	var b []byte
	for _, ca := range cas {
		h := sha1.Sum(ca.RawSubjectPublicKeyInfo)
		b = append(b, h[:]...)
	}
	return &Cert{Request: true, Encoding: certX509Signature, Data: b}
}

// peerCertificates parses the peer's CERT payloads: the first X.509 one is
// its end-entity certificate, the others intermediates.
func peerCertificates(ps []Payload) (leaf *x509.Certificate, inter []*x509.Certificate, err error) {
	n := 0
	for _, p := range ps {
		c, ok := p.(*Cert)
		if !ok || c.Request {
			continue
		}
		if c.Encoding != certX509Signature {
			continue // hash and URL, PGP, ...: not offered, not used
		}
		if n++; n > maxPeerCerts {
			return nil, nil, fmt.Errorf("the peer sent more than %d certificates", maxPeerCerts)
		}
		cert, err := x509.ParseCertificate(c.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("the peer's certificate %d does not parse: %w", n, err)
		}
		if leaf == nil {
			leaf = cert
		} else {
			inter = append(inter, cert)
		}
	}
	if leaf == nil {
		return nil, nil, errors.New("the peer sent no certificate")
	}
	return leaf, inter, nil
}

// CertError is a certificate the peer presented that we do not accept, in
// plain words. Kind is one of "expired", "not yet valid", "unknown CA",
// "identity", "key usage", "revoked", "no certificate", "bad certificate".
type CertError struct {
	Kind string
	Msg  string
}

func (e *CertError) Error() string { return e.Msg }

func certName(c *x509.Certificate) string {
	if s := dnString(c.RawSubject); s != "" {
		return `"` + s + `"`
	}
	return fmt.Sprintf("serial %x", c.SerialNumber)
}

const certTime = "2006-01-02 15:04:05 UTC"

// validity checks c's dates against now, which is this box's clock.
func validity(c *x509.Certificate, now time.Time, role string) error {
	clock := now.UTC().Format(certTime)
	from, to := c.NotBefore.UTC().Format(certTime), c.NotAfter.UTC().Format(certTime)
	switch {
	case now.After(c.NotAfter):
		return &CertError{"expired", fmt.Sprintf("%s %s expired on %s (valid from %s); this box's clock says %s — if that is wrong (a board without RTC battery), set the time",
			role, certName(c), to, from, clock)}
	case now.Before(c.NotBefore):
		return &CertError{"not yet valid", fmt.Sprintf("%s %s is not yet valid: valid from %s to %s; this box's clock says %s — if that is wrong (a board without RTC battery), set the time",
			role, certName(c), from, to, clock)}
	}
	return nil
}

// verifyPeerCert checks the peer's certificate: dates, key usage, a chain
// to one of cas through the intermediates it sent, and the admin's CRLs.
func verifyPeerCert(leaf *x509.Certificate, inter, cas []*x509.Certificate, crls []*x509.RevocationList, now time.Time) error {
	if len(cas) == 0 {
		return &CertError{"unknown CA", "no trusted CA is configured for this tunnel"}
	}
	if err := validity(leaf, now, "the peer's certificate"); err != nil {
		return err
	}
	if leaf.KeyUsage != 0 && leaf.KeyUsage&(x509.KeyUsageDigitalSignature|x509.KeyUsageContentCommitment) == 0 {
		return &CertError{"key usage", fmt.Sprintf("key usage: the peer's certificate %s may not be used for signatures (its key usage lacks digitalSignature)", certName(leaf))}
	}
	roots, pool := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range cas {
		roots.AddCert(c)
	}
	for _, c := range inter {
		pool.AddCert(c)
	}
	chains, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: pool, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		var ua x509.UnknownAuthorityError
		var ci x509.CertificateInvalidError
		switch {
		case errors.As(err, &ua):
			names := make([]string, len(cas))
			for i, c := range cas {
				names[i] = certName(c)
			}
			return &CertError{"unknown CA", fmt.Sprintf("unknown CA: the peer's certificate %s is issued by %q, which is not (and does not chain to) a CA this tunnel trusts (%s)",
				certName(leaf), dnString(leaf.RawIssuer), strings.Join(names, ", "))}
		case errors.As(err, &ci) && ci.Reason == x509.Expired && ci.Cert != nil:
			if e := validity(ci.Cert, now, "CA certificate"); e != nil {
				return e
			}
		case errors.As(err, &ci) && ci.Reason == x509.NotAuthorizedToSign:
			return &CertError{"key usage", fmt.Sprintf("key usage: %s in the peer's chain is not a CA (no CA basic constraint or no certSign key usage)", certName(ci.Cert))}
		}
		return &CertError{"bad certificate", fmt.Sprintf("the peer's certificate %s: %v", certName(leaf), err)}
	}
	chain := chains[0]
	for i := 0; i+1 < len(chain); i++ {
		if err := revoked(chain[i], chain[i+1], crls); err != nil {
			return err
		}
	}
	return nil
}

// revoked looks c up in the CRLs its issuer signed.
func revoked(c, issuer *x509.Certificate, crls []*x509.RevocationList) error {
	for _, crl := range crls {
		if !bytes.Equal(crl.RawIssuer, issuer.RawSubject) || crl.CheckSignatureFrom(issuer) != nil {
			continue
		}
		for _, e := range crl.RevokedCertificateEntries {
			if e.SerialNumber != nil && e.SerialNumber.Cmp(c.SerialNumber) == 0 {
				return &CertError{"revoked", fmt.Sprintf("revoked: certificate %s (serial %x) was revoked by %q on %s (CRL of %s)",
					certName(c), c.SerialNumber, dnString(issuer.RawSubject), e.RevocationTime.UTC().Format(certTime), crl.ThisUpdate.UTC().Format(certTime))}
			}
		}
	}
	return nil
}

// certContains reports whether the identity is one the certificate
// vouches for: a subjectAltName of its type, or the subject DN.
func certContains(c *x509.Certificate, id Identity) bool {
	switch id.Type {
	case IDFQDN:
		return slices.ContainsFunc(c.DNSNames, func(n string) bool { return strings.EqualFold(n, string(id.Data)) })
	case IDRFC822:
		return slices.ContainsFunc(c.EmailAddresses, func(n string) bool { return strings.EqualFold(n, string(id.Data)) })
	case IDIPv4, IDIPv6:
		a, ok := netip.AddrFromSlice(id.Data)
		return ok && slices.ContainsFunc(c.IPAddresses, func(ip net.IP) bool {
			b, ok := netip.AddrFromSlice(ip)
			return ok && b.Unmap() == a.Unmap()
		})
	case IDDERDN:
		return dnEqual(c.RawSubject, id.Data)
	}
	return false
}

// certNames lists what a certificate vouches for, for messages.
func certNames(c *x509.Certificate) string {
	n := []string{"subject " + dnString(c.RawSubject)}
	for _, d := range c.DNSNames {
		n = append(n, "DNS:"+d)
	}
	for _, e := range c.EmailAddresses {
		n = append(n, "email:"+e)
	}
	for _, ip := range c.IPAddresses {
		n = append(n, "IP:"+ip.String())
	}
	return strings.Join(n, ", ")
}

// The short names strongSwan (and RFC 4514) use for DN attributes.
var dnAttrs = []struct {
	name string
	oid  asn1.ObjectIdentifier
}{
	{"C", asn1.ObjectIdentifier{2, 5, 4, 6}},
	{"ST", asn1.ObjectIdentifier{2, 5, 4, 8}},
	{"L", asn1.ObjectIdentifier{2, 5, 4, 7}},
	{"O", asn1.ObjectIdentifier{2, 5, 4, 10}},
	{"OU", asn1.ObjectIdentifier{2, 5, 4, 11}},
	{"CN", asn1.ObjectIdentifier{2, 5, 4, 3}},
	{"SN", asn1.ObjectIdentifier{2, 5, 4, 4}},
	{"serialNumber", asn1.ObjectIdentifier{2, 5, 4, 5}},
	{"E", asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}},
	{"DC", asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}},
	{"UID", asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}},
}

// dnString prints a DER DN the way strongSwan does, in order:
// "C=CH, O=strongSwan, CN=moon.strongswan.org". Empty if it does not parse.
func dnString(der []byte) string {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(der, &rdns); err != nil || len(rest) != 0 {
		return ""
	}
	var parts []string
	for _, rdn := range rdns {
		for _, atv := range rdn {
			name := atv.Type.String()
			for _, a := range dnAttrs {
				if a.oid.Equal(atv.Type) {
					name = a.name
				}
			}
			parts = append(parts, name+"="+fmt.Sprint(atv.Value))
		}
	}
	return strings.Join(parts, ", ")
}

// dnEqual compares two DER DNs attribute by attribute, ignoring the
// string types and the case of the values (strongSwan's pki writes
// UTF8String, Go PrintableString).
func dnEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y pkix.RDNSequence
	if r, err := asn1.Unmarshal(a, &x); err != nil || len(r) != 0 {
		return false
	}
	if r, err := asn1.Unmarshal(b, &y); err != nil || len(r) != 0 {
		return false
	}
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if len(x[i]) != len(y[i]) {
			return false
		}
		for j := range x[i] {
			if !x[i][j].Type.Equal(y[i][j].Type) || !strings.EqualFold(fmt.Sprint(x[i][j].Value), fmt.Sprint(y[i][j].Value)) {
				return false
			}
		}
	}
	return true
}

// parseDN reads "C=CH, O=strongSwan, CN=moon" (commas or slashes between
// attributes, a backslash escapes a comma) into a DER DN.
func parseDN(s string) ([]byte, error) {
	var parts []string
	var cur strings.Builder
	sep := ','
	if strings.HasPrefix(s, "/") {
		sep, s = '/', s[1:]
	}
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case rune(s[i]) == sep:
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(s[i])
		}
	}
	parts = append(parts, cur.String())
	var rdns pkix.RDNSequence
	for _, p := range parts {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("distinguished name %q: %q is not NAME=value", s, p)
		}
		var oid asn1.ObjectIdentifier
		for _, a := range dnAttrs {
			if strings.EqualFold(a.name, strings.TrimSpace(k)) {
				oid = a.oid
			}
		}
		if oid == nil {
			return nil, fmt.Errorf("distinguished name %q: unknown attribute %q (C, ST, L, O, OU, CN, SN, serialNumber, E, DC, UID)", s, k)
		}
		rdns = append(rdns, pkix.RelativeDistinguishedNameSET{{Type: oid, Value: strings.TrimSpace(v)}})
	}
	return asn1.Marshal(rdns)
}

// looksLikeDN says whether an identity string is meant as a DN: it starts
// with a known attribute name and "=".
func looksLikeDN(s string) bool {
	s = strings.TrimPrefix(s, "/")
	k, _, ok := strings.Cut(s, "=")
	if !ok {
		return false
	}
	for _, a := range dnAttrs {
		if strings.EqualFold(a.name, strings.TrimSpace(k)) {
			return true
		}
	}
	return false
}
