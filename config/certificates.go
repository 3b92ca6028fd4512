package config

import (
	"crypto"
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	"github.com/flashgate/flashgate/internal/pki"
)

// Certificate is one entry of the box's certificate store: a CA a tunnel
// may trust (made here, or imported), a certificate with its private key
// this box authenticates with, or a certificate issued here to a peer
// (kept without its key, to be listed and revoked). Private keys are
// secrets like PSKs: redacted in the text form and on the web UI's configd
// socket, and in a backup only in the clear or sealed with a passphrase.
type Certificate struct {
	Name string `json:"name"`
	// Cert is the PEM certificate, followed by the intermediate CAs a
	// tunnel sends with it.
	Cert string `json:"cert"`
	// Key is the PEM (PKCS#8) private key, when the box holds it: this
	// box's own certificates and the CAs made here.
	Key Secret `json:"key,omitzero"`
	// CA marks a certificate authority: one a tunnel may trust, and with
	// a key one that issues certificates here.
	CA bool `json:"ca,omitempty"`
	// Issuer names the store's CA that issued it (empty: imported).
	Issuer string `json:"issuer,omitempty"`
	// Revoked is when its issuer revoked it (RFC 3339; empty: not revoked).
	Revoked string `json:"revoked,omitempty"`
	// CRL is a CA's revocation list (PEM): made here on each revocation
	// for a CA with a key, imported for another. Tunnels trusting the CA
	// refuse the certificates it lists.
	CRL string `json:"crl,omitempty"`
	// CRLNumber counts the CRLs this box made for a CA.
	CRLNumber int64 `json:"crl_number,omitempty"`
}

// Tunnel authentication methods.
const (
	AuthPSK  = "psk"
	AuthCert = "cert"
)

// MaxCertificates bounds the store, and MaxCertPEM one entry's PEM text.
const (
	MaxCertificates = 64
	MaxCertPEM      = 32 << 10
)

// Certificate returns the store's entry called name, or nil.
func (c *Config) Certificate(name string) *Certificate {
	for i := range c.Certificates {
		if c.Certificates[i].Name == name {
			return &c.Certificates[i]
		}
	}
	return nil
}

// Parsed is a store entry decoded: the certificate, its chain, the key
// (nil when the box holds none) and the CRL (nil when none).
type Parsed struct {
	Cert  *x509.Certificate
	Chain []*x509.Certificate
	Key   crypto.Signer
	CRL   *x509.RevocationList
}

// Parse decodes the entry and checks that its parts fit together.
func (e *Certificate) Parse() (*Parsed, error) {
	certs, _, _, err := pki.ParsePEM([]byte(e.Cert))
	if err != nil {
		return nil, fmt.Errorf("cert: %w", err)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("cert: no certificate in the PEM text")
	}
	p := &Parsed{Cert: certs[0], Chain: certs[1:]}
	if e.Key.IsSet() {
		_, key, _, err := pki.ParsePEM([]byte(e.Key.Reveal()))
		if err != nil || key == nil {
			return nil, fmt.Errorf("key: not a PEM private key")
		}
		if !pki.MatchesKey(p.Cert, key) {
			return nil, fmt.Errorf("key: does not belong to the certificate")
		}
		p.Key = key
	}
	if e.CRL != "" {
		_, _, crls, err := pki.ParsePEM([]byte(e.CRL))
		if err != nil || len(crls) != 1 {
			return nil, fmt.Errorf("crl: not one PEM CRL")
		}
		if err := crls[0].CheckSignatureFrom(p.Cert); err != nil {
			return nil, fmt.Errorf("crl: not signed by this CA: %w", err)
		}
		p.CRL = crls[0]
	}
	return p, nil
}

func (v *validator) certificates() {
	if n := len(v.c.Certificates); n > MaxCertificates {
		v.add("certificates", "%d entries, at most %d", n, MaxCertificates)
	}
	names(v, "certificates", v.c.Certificates, func(e *Certificate) string { return e.Name }, nameRE, func(path string, e *Certificate) {
		if len(e.Cert) > MaxCertPEM || len(e.Key.Reveal()) > MaxCertPEM || len(e.CRL) > MaxCertPEM {
			v.add(path, "PEM text longer than %d bytes", MaxCertPEM)
			return
		}
		p, err := e.Parse()
		if err != nil {
			v.add(path+"."+field(err), "%v", err)
			return
		}
		if e.CA && !p.Cert.IsCA {
			v.add(path+".ca", "%q is not a CA certificate (no CA basic constraint)", p.Cert.Subject)
		}
		if e.CRL != "" && !e.CA {
			v.add(path+".crl", "only a CA has a CRL")
		}
		if e.Issuer != "" {
			ca := v.c.Certificate(e.Issuer)
			if ca == nil || !ca.CA {
				v.add(path+".issuer", "no CA %q in the store", e.Issuer)
			}
		}
		if e.Revoked != "" {
			if _, err := time.Parse(time.RFC3339, e.Revoked); err != nil {
				v.add(path+".revoked", "%q is not an RFC 3339 time", e.Revoked)
			}
		}
	})
}

// field names the part of an entry a Parse error is about.
func field(err error) string {
	s := err.Error()
	for _, f := range []string{"key", "crl"} {
		if len(s) > len(f) && s[:len(f)+1] == f+":" {
			return f
		}
	}
	return "cert"
}

// tunnelAuth checks a tunnel's authentication fields: a PSK where either
// side uses one, a certificate with a key and trusted CAs where the
// certificates are used.
func (v *validator) tunnelAuth(path string, t *Tunnel) {
	for _, f := range []struct{ field, val string }{{"auth", t.Auth}, {"remote_auth", t.RemoteAuth}} {
		if f.val != "" && f.val != AuthPSK && f.val != AuthCert {
			v.add(path+"."+f.field, "%q is not psk or cert", f.val)
		}
	}
	if n := t.IKEFragmentSize; n != 0 && (n < 576 || n > 9000) {
		v.add(path+".ike_fragment_size", "%d: 576 (IPv4's minimum) to 9000, or 0 for 1280", n)
	}
	local, remote := t.AuthMethods()
	if local == AuthPSK || remote == AuthPSK {
		switch n := len(t.PSK.Reveal()); {
		case n == 0:
			v.add(path+".psk", "missing pre-shared key")
		case n < MinPSKLen:
			v.add(path+".psk", "pre-shared key too short: %d characters, at least %d (a random one is best)", n, MinPSKLen)
		case n > MaxPSKLen:
			v.add(path+".psk", "pre-shared key too long: at most %d characters", MaxPSKLen)
		}
	}
	if local == AuthCert {
		e := v.c.Certificate(t.LocalCert)
		switch {
		case t.LocalCert == "":
			v.add(path+".local_cert", "missing: the certificate this box authenticates with (auth is cert)")
		case e == nil:
			v.add(path+".local_cert", "no certificate %q in the store", t.LocalCert)
		case !e.Key.IsSet():
			v.add(path+".local_cert", "the box holds no private key for %q", t.LocalCert)
		}
	} else if t.LocalCert != "" {
		v.add(path+".local_cert", "set, but auth is psk")
	}
	if remote == AuthCert {
		if len(t.TrustedCAs) == 0 {
			v.add(path+".trusted_cas", "missing: the CAs the peer's certificate must chain to (remote auth is cert)")
		}
		for i, n := range t.TrustedCAs {
			if e := v.c.Certificate(n); e == nil || !e.CA {
				v.add(fmt.Sprintf("%s.trusted_cas[%d]", path, i), "no CA %q in the store", n)
			}
		}
		if slices.ContainsFunc(t.TrustedCAs, func(s string) bool { return s == "" }) {
			v.add(path+".trusted_cas", "empty name")
		}
	} else if len(t.TrustedCAs) > 0 {
		v.add(path+".trusted_cas", "set, but the peer authenticates with a psk")
	}
}

// AuthMethods returns how this box and the peer authenticate: Auth
// (default psk) and RemoteAuth (default: the same as Auth).
func (t *Tunnel) AuthMethods() (local, remote string) {
	local, remote = t.Auth, t.RemoteAuth
	if local == "" {
		local = AuthPSK
	}
	if remote == "" {
		remote = local
	}
	return local, remote
}
