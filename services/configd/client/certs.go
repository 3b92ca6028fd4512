package client

import (
	"context"

	"github.com/flashgate/flashgate/services/configd"
)

// CreateCA makes a CA with a new key in the candidate's certificate store.
func (c *Client) CreateCA(ctx context.Context, req configd.CreateCARequest) (string, error) {
	return c.edit(ctx, "POST", "/v1/certificates/ca", "", req)
}

// IssueCertificate issues a certificate for this box (its key stays in
// configd) into the candidate's store.
func (c *Client) IssueCertificate(ctx context.Context, req configd.IssueRequest) (string, error) {
	req.Peer = false
	return c.edit(ctx, "POST", "/v1/certificates/issue", "", req)
}

// IssuePeerBundle issues a certificate for a peer and returns the bundle
// to hand it (PEM, or PKCS#12 when req.Format is "p12"): the only way a
// private key leaves configd. On the web UI's socket it needs the
// admin's password (WithPassword).
func (c *Client) IssuePeerBundle(ctx context.Context, req configd.IssueRequest) (bundle []byte, etag string, err error) {
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
	return c.edit(ctx, "POST", "/v1/certificates/revoke", "", configd.RevokeRequest{Etag: etag, Name: name})
}

// ImportCertificate adds a CA certificate, a certificate with its key
// (PEM or PKCS#12), or a CRL for one of the store's CAs to the candidate.
func (c *Client) ImportCertificate(ctx context.Context, req configd.CertImportRequest) (string, error) {
	return c.edit(ctx, "POST", "/v1/certificates/import", "", req)
}

func trimEtag(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}
