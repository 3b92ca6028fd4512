package configd

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"time"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/pki"
)

// The certificate store's operations. The store itself is part of the
// configuration (config.Certificate): these only make its entries, in the
// candidate, because they need what only configd may hold: the CAs'
// private keys. A new key is made here and stays here; the one exception
// is a certificate issued to a peer, whose key is handed out once, in the
// answer (PEM or PKCS#12 with a passphrase), and not kept. On the web UI's
// socket that answer needs the admin's password (re-authentication).
//
//	POST /v1/certificates/ca      CreateCARequest    -> EtagResponse
//	POST /v1/certificates/issue   IssueRequest       -> EtagResponse, or the peer's bundle
//	POST /v1/certificates/revoke  RevokeRequest      -> EtagResponse (the CA's CRL is remade)
//	POST /v1/certificates/import  CertImportRequest  -> EtagResponse

func (s *Server) certRoutes() {
	s.mux.HandleFunc("POST /v1/certificates/ca", s.createCA)
	s.mux.HandleFunc("POST /v1/certificates/issue", s.issueCert)
	s.mux.HandleFunc("POST /v1/certificates/revoke", s.revokeCert)
	s.mux.HandleFunc("POST /v1/certificates/import", s.importCert)
}

// editCerts is editIn for the store's operations: on the web UI's socket
// they work on the configuration as that socket shows it (the marks are
// resolved after), like a set.
// fn gets that view to edit and the real candidate to read keys from.
func (s *Server) editCerts(etag string, fn func(c, real *config.Config) error) (string, error) {
	return s.editIn(etag, func(c *config.Config) error {
		real := c.Clone()
		if s.redact != nil {
			*c = *s.redact.out(c)
		}
		return fn(c, real)
	})
}

func fieldErr(path, format string, args ...any) error {
	return config.ValidationErrors{config.FieldError{Path: path, Message: fmt.Sprintf(format, args...)}}
}

func validity(days, def int) (time.Duration, error) {
	if days == 0 {
		days = def
	}
	if days < 1 || days > 36500 {
		return 0, fieldErr("days", "%d days: 1 to 36500", days)
	}
	return time.Duration(days) * 24 * time.Hour, nil
}

func (s *Server) createCA(w http.ResponseWriter, r *http.Request) {
	var req configdapi.CreateCARequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := validity(req.Days, 3650)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	key, err := pki.NewKey(req.KeyType)
	if err != nil {
		s.fail(w, r, fieldErr("key_type", "%v", err))
		return
	}
	defer zeroKey(key)
	ca, err := pki.NewCA(pki.Template{CommonName: req.CommonName, Organization: req.Organization, Validity: v, PathLen: -1}, key)
	if err != nil {
		s.fail(w, r, fieldErr("common_name", "%v", err))
		return
	}
	entry, err := entryWithKey(req.Name, ca, nil, key)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	entry.CA = true
	tag, err := s.editCerts(etag(r, req.Etag), func(c, real *config.Config) error { return addEntry(c, entry) })
	s.edited(w, r, tag, err)
}

func entryWithKey(name string, cert *x509.Certificate, chain []*x509.Certificate, key crypto.Signer) (config.Certificate, error) {
	e := config.Certificate{Name: name, Cert: string(pki.CertPEM(append([]*x509.Certificate{cert}, chain...)...))}
	if key != nil {
		k, err := pki.KeyPEM(key)
		if err != nil {
			return e, fmt.Errorf("encode key: %w", err)
		}
		e.Key = config.NewSecret(string(k))
		clear(k)
	}
	return e, nil
}

func addEntry(c *config.Config, e config.Certificate) error {
	if c.Certificate(e.Name) != nil {
		return fieldErr("name", "a certificate %q is already in the store", e.Name)
	}
	c.Certificates = append(c.Certificates, e)
	// Check the new entry now, so that a bad one is refused with its reason
	// rather than left in the candidate.
	if err := c.Validate(); err != nil {
		var ve config.ValidationErrors
		if errors.As(err, &ve) {
			var mine config.ValidationErrors
			for _, fe := range ve {
				if len(fe.Path) >= len("certificates["+e.Name+"]") && fe.Path[:len("certificates["+e.Name+"]")] == "certificates["+e.Name+"]" ||
					fe.Path == "certificates" {
					mine = append(mine, fe)
				}
			}
			if len(mine) > 0 {
				return mine
			}
		}
	}
	return nil
}

// caOf finds the store's CA called name in the edited view c, with its
// key from the real candidate.
func caOf(c, real *config.Config, name string) (*config.Certificate, *config.Parsed, error) {
	e, re := c.Certificate(name), real.Certificate(name)
	if e == nil || !e.CA || re == nil {
		return nil, nil, fieldErr("ca", "no CA %q in the store", name)
	}
	p, err := re.Parse()
	if err != nil {
		return nil, nil, fieldErr("ca", "CA %q: %v", name, err)
	}
	if p.Key == nil {
		return nil, nil, fieldErr("ca", "CA %q was imported without its key: it cannot issue here", name)
	}
	return e, p, nil
}

func (s *Server) issueCert(w http.ResponseWriter, r *http.Request) {
	var req configdapi.IssueRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Peer {
		// A private key leaves the box: on the web UI's socket, only with
		// the admin's password.
		if ok, err := s.reauthenticated(r); err != nil || !ok {
			if err == nil {
				err = errWrongPassword
			}
			s.fail(w, r, err)
			return
		}
		switch req.Format {
		case "", "pem":
		case "p12":
			if len(req.Passphrase) < configdapi.MinBundlePassphrase {
				s.fail(w, r, fieldErr("passphrase", "at least %d characters: the PKCS#12 file carries the peer's private key", configdapi.MinBundlePassphrase))
				return
			}
		default:
			s.fail(w, r, fieldErr("format", "%q is not pem or p12", req.Format))
			return
		}
	}
	v, err := validity(req.Days, 1095)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	key, err := pki.NewKey(req.KeyType)
	if err != nil {
		s.fail(w, r, fieldErr("key_type", "%v", err))
		return
	}
	defer zeroKey(key)
	var cert *x509.Certificate
	var chain []*x509.Certificate
	tag, err := s.editCerts(etag(r, req.Etag), func(c, real *config.Config) error {
		caEntry, ca, err := caOf(c, real, req.CA)
		if err != nil {
			return err
		}
		defer zeroKey(ca.Key)
		cert, err = pki.Issue(pki.Template{CommonName: req.CommonName, Organization: req.Organization, Names: req.Names, Validity: v},
			key.Public(), ca.Cert, ca.Key, false)
		if err != nil {
			return fieldErr("common_name", "%v", err)
		}
		// The chain a tunnel sends: the CA if it is an intermediate.
		chain = append([]*x509.Certificate(nil), ca.Chain...)
		if !isSelfSigned(ca.Cert) {
			chain = append([]*x509.Certificate{ca.Cert}, chain...)
		}
		var k crypto.Signer
		if !req.Peer {
			k = key
		}
		e, err := entryWithKey(req.Name, cert, chain, k)
		if err != nil {
			return err
		}
		e.Issuer = caEntry.Name
		return addEntry(c, e)
	})
	if err != nil || !req.Peer {
		s.edited(w, r, tag, err)
		return
	}
	cand, _ := s.store.Candidate()
	caCerts := []*x509.Certificate{}
	if e := cand.Certificate(req.CA); e != nil {
		if p, err := e.Parse(); err == nil {
			caCerts = append(append(caCerts, p.Cert), p.Chain...)
		}
	}
	w.Header().Set("ETag", `"`+tag+`"`)
	w.Header().Set("Cache-Control", "no-store")
	if req.Format == "p12" {
		b, err := pkcs12.Modern.Encode(key, cert, append(chain, caCerts[:min(1, len(caCerts))]...), req.Passphrase)
		if err != nil {
			s.fail(w, r, &internalError{fmt.Errorf("PKCS#12 for %q: %w", req.Name, err)})
			return
		}
		w.Header().Set("Content-Type", "application/x-pkcs12")
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.p12"`, req.Name))
		w.Write(b)
		return
	}
	kp, err := pki.KeyPEM(key)
	if err != nil {
		s.fail(w, r, &internalError{err})
		return
	}
	defer clear(kp)
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.pem"`, req.Name))
	w.Write(pki.CertPEM(append([]*x509.Certificate{cert}, chain...)...))
	w.Write(pki.CertPEM(caCerts[:min(1, len(caCerts))]...))
	w.Write(kp)
}

func isSelfSigned(c *x509.Certificate) bool {
	return c.CheckSignatureFrom(c) == nil
}

// zeroKey overwrites a private key's secret numbers once it is no longer
// needed (what crypto/ecdsa caches internally is out of reach).
func zeroKey(k crypto.Signer) {
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		clear(k.D.Bits())
	case *rsa.PrivateKey:
		clear(k.D.Bits())
		for _, p := range k.Primes {
			clear(p.Bits())
		}
	case ed25519.PrivateKey:
		clear(k)
	}
}

func (s *Server) revokeCert(w http.ResponseWriter, r *http.Request) {
	var req configdapi.RevokeRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	now := time.Now().UTC().Truncate(time.Second)
	tag, err := s.editCerts(etag(r, req.Etag), func(c, real *config.Config) error {
		e := c.Certificate(req.Name)
		if e == nil {
			return fieldErr("name", "no certificate %q in the store", req.Name)
		}
		if e.Issuer == "" {
			return fieldErr("name", "%q was not issued by a CA of this box: only its CA can revoke it", req.Name)
		}
		if e.Revoked == "" {
			e.Revoked = now.Format(time.RFC3339)
		}
		return remakeCRL(c, real, e.Issuer, now)
	})
	s.edited(w, r, tag, err)
}

// remakeCRL signs a new CRL for the store's CA listing every certificate
// it issued that is revoked.
func remakeCRL(c, real *config.Config, caName string, now time.Time) error {
	caEntry, ca, err := caOf(c, real, caName)
	if err != nil {
		return err
	}
	var revoked []pki.Revoked
	for i := range c.Certificates {
		e := &c.Certificates[i]
		if e.Issuer != caName || e.Revoked == "" {
			continue
		}
		p, err := e.Parse()
		if err != nil {
			continue
		}
		at, _ := time.Parse(time.RFC3339, e.Revoked)
		revoked = append(revoked, pki.Revoked{Serial: new(big.Int).Set(p.Cert.SerialNumber), At: at})
	}
	caEntry.CRLNumber++
	der, err := pki.NewCRL(ca.Cert, ca.Key, caEntry.CRLNumber, revoked, now)
	if err != nil {
		return err
	}
	caEntry.CRL = string(pki.CRLPEM(der))
	return nil
}

func (s *Server) importCert(w http.ResponseWriter, r *http.Request) {
	var req configdapi.CertImportRequest
	if err := decodeBody(w, r, maxSmallBody, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	var certs []*x509.Certificate
	var key crypto.Signer
	var crls []*x509.RevocationList
	var err error
	switch {
	case req.PKCS12 != "" && req.PEM != "":
		err = fieldErr("pem", "either PEM text or a PKCS#12 file, not both")
	case req.PKCS12 != "":
		var der []byte
		if der, err = base64.StdEncoding.DecodeString(req.PKCS12); err != nil {
			err = fieldErr("pkcs12", "not base64: %v", err)
			break
		}
		var k any
		var leaf *x509.Certificate
		var cas []*x509.Certificate
		k, leaf, cas, err = pkcs12.DecodeChain(der, req.Passphrase)
		if err != nil {
			err = fieldErr("pkcs12", "cannot open the PKCS#12 file (wrong passphrase, or an algorithm it does not know): %v", err)
			break
		}
		signer, ok := k.(crypto.Signer)
		if !ok {
			err = fieldErr("pkcs12", "its %T key cannot sign", k)
			break
		}
		key = signer
		// Keep the chain, not the root: a tunnel sends intermediates.
		certs = []*x509.Certificate{leaf}
		for _, c := range cas {
			if !isSelfSigned(c) {
				certs = append(certs, c)
			}
		}
	case req.PEM != "":
		if certs, key, crls, err = pki.ParsePEM([]byte(req.PEM)); err != nil {
			err = fieldErr("pem", "%v", err)
		}
	default:
		err = fieldErr("pem", "nothing to import: paste PEM text or choose a PKCS#12 file")
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer zeroKey(key)
	tag, err := s.editCerts(etag(r, req.Etag), func(c, real *config.Config) error {
		if len(certs) == 0 && key == nil && len(crls) == 1 {
			// A CRL for a CA in the store.
			e := c.Certificate(req.Name)
			if e == nil || !e.CA {
				return fieldErr("name", "a CRL is imported for a CA of the store: no CA %q", req.Name)
			}
			p, err := (&config.Certificate{Cert: e.Cert}).Parse()
			if err != nil {
				return err
			}
			if err := crls[0].CheckSignatureFrom(p.Cert); err != nil {
				return fieldErr("pem", "the CRL is not signed by CA %q (%s): %v", req.Name, p.Cert.Subject, err)
			}
			e.CRL = string(pki.CRLPEM(crls[0].Raw))
			return nil
		}
		if len(certs) == 0 {
			return fieldErr("pem", "no certificate in it")
		}
		if len(crls) > 0 {
			return fieldErr("pem", "import a CRL on its own, for its CA")
		}
		if key != nil && !pki.MatchesKey(certs[0], key) {
			return fieldErr("pem", "the private key does not belong to the first certificate (%s)", certs[0].Subject)
		}
		if key == nil && !certs[0].IsCA {
			return fieldErr("pem", "%s is not a CA and comes without its key: import a CA certificate, or a certificate with its key", certs[0].Subject)
		}
		e, err := entryWithKey(req.Name, certs[0], certs[1:], key)
		if err != nil {
			return err
		}
		e.CA = certs[0].IsCA
		return addEntry(c, e)
	})
	s.edited(w, r, tag, err)
}
