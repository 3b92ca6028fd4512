package configdapi

import (
	"context"

	"github.com/flashgate/flashgate/internal/pki"
)

// The certificate store's routes (configd's certs.go):
//
//	POST /v1/certificates/ca      CreateCARequest    -> EtagResponse
//	POST /v1/certificates/issue   IssueRequest       -> EtagResponse, or the peer's bundle
//	POST /v1/certificates/revoke  RevokeRequest      -> EtagResponse (the CA's CRL is remade)
//	POST /v1/certificates/import  CertImportRequest  -> EtagResponse

// CreateCARequest makes a CA with a new key in the candidate.
type CreateCARequest struct {
	Etag         string      `json:"etag,omitempty"`
	Name         string      `json:"name"`
	CommonName   string      `json:"common_name"`
	Organization string      `json:"organization,omitempty"`
	KeyType      pki.KeyType `json:"key_type,omitempty"` // default ECDSA P-256
	Days         int         `json:"days,omitempty"`     // default 3650
}

// IssueRequest issues a certificate from one of the store's CAs. For the
// box (Peer false) the key is kept and the certificate can authenticate a
// tunnel; for a peer the answer is the bundle to give it, in Format "pem"
// (certificate, CA and key) or "p12" (PKCS#12 sealed with Passphrase).
type IssueRequest struct {
	Etag         string      `json:"etag,omitempty"`
	CA           string      `json:"ca"`
	Name         string      `json:"name"`
	CommonName   string      `json:"common_name"`
	Names        []string    `json:"names,omitempty"` // subjectAltNames: FQDN, user@host, IP
	KeyType      pki.KeyType `json:"key_type,omitempty"`
	Days         int         `json:"days,omitempty"` // default 1095
	Peer         bool        `json:"peer,omitempty"`
	Format       string      `json:"format,omitempty"` // peer: "pem" (default) or "p12"
	Passphrase   string      `json:"passphrase,omitempty"`
	Organization string      `json:"organization,omitempty"`
}

// RevokeRequest revokes a certificate the store's CA issued.
type RevokeRequest struct {
	Etag string `json:"etag,omitempty"`
	Name string `json:"name"`
}

// CertImportRequest adds a certificate made elsewhere: PEM text (a CA
// certificate; a certificate with its key and chain; or a CRL for one of
// the store's CAs, with Name the CA) or a PKCS#12 file (base64) with its
// passphrase.
type CertImportRequest struct {
	Etag       string `json:"etag,omitempty"`
	Name       string `json:"name"`
	PEM        string `json:"pem,omitempty"`
	PKCS12     string `json:"pkcs12,omitempty"`
	Passphrase string `json:"passphrase,omitempty"`
}

// MinBundlePassphrase is the shortest passphrase for a PKCS#12 bundle.
const MinBundlePassphrase = 8

// CreateCA makes a CA with a new key in the candidate's certificate store.
func (c *Client) CreateCA(ctx context.Context, req CreateCARequest) (string, error) {
	return c.edit(ctx, "POST", "/v1/certificates/ca", "", req)
}

// IssueCertificate issues a certificate for this box (its key stays in
// configd) into the candidate's store.
func (c *Client) IssueCertificate(ctx context.Context, req IssueRequest) (string, error) {
	req.Peer = false
	return c.edit(ctx, "POST", "/v1/certificates/issue", "", req)
}

// IssuePeerBundle issues a certificate for a peer and returns the bundle
// to hand it (PEM, or PKCS#12 when req.Format is "p12"): the only way a
// private key leaves  On the web UI's socket it needs the
// admin's password (WithPassword).
func (c *Client) IssuePeerBundle(ctx context.Context, req IssueRequest) (bundle []byte, etag string, err error) {
	req.Peer = true
	h, err := c.do(ctx, "POST", "/v1/certificates/issue", nil, req, &bundle)
	if err != nil {
		return nil, "", err
	}
	return bundle, trimEtag(h.Get("ETag")), nil
}

// RevokeCertificate revokes a certificate the store's CA issued and remakes
// that CA's CRL, in the candidate.
func (c *Client) RevokeCertificate(ctx context.Context, etag, name string) (string, error) {
	return c.edit(ctx, "POST", "/v1/certificates/revoke", "", RevokeRequest{Etag: etag, Name: name})
}

// ImportCertificate adds a CA certificate, a certificate with its key
// (PEM or PKCS#12), or a CRL for one of the store's CAs to the candidate.
func (c *Client) ImportCertificate(ctx context.Context, req CertImportRequest) (string, error) {
	return c.edit(ctx, "POST", "/v1/certificates/import", "", req)
}

func trimEtag(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}
