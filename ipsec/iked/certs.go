package iked

import (
	"crypto/x509"
	"fmt"
	"strings"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec/ike"
)

// tunnelCreds is what a certificate tunnel takes from the configuration's
// certificate store: our certificate with its chain and key, the CAs we
// trust, and their CRLs. key is the text of the entries used, so that a
// renewed certificate or a new CRL restarts the tunnel like a change of
// its own fields.
type tunnelCreds struct {
	local *ike.Credential
	cas   []*x509.Certificate
	crls  []*x509.RevocationList
	key   string
}

// credsFor resolves t's certificate references in cfg; nil for a tunnel
// that uses pre-shared keys only.
func credsFor(cfg *config.Config, t *config.Tunnel) (*tunnelCreds, error) {
	local, remote := t.AuthMethods()
	if local != config.AuthCert && remote != config.AuthCert {
		return nil, nil
	}
	c := &tunnelCreds{}
	var key strings.Builder
	if local == config.AuthCert {
		e := cfg.Certificate(t.LocalCert)
		if e == nil {
			return nil, fmt.Errorf("tunnel %s: local_cert %q is not in the certificate store", t.Name, t.LocalCert)
		}
		p, err := e.Parse()
		if err != nil {
			return nil, fmt.Errorf("tunnel %s: certificate %s: %w", t.Name, e.Name, err)
		}
		if p.Key == nil {
			return nil, fmt.Errorf("tunnel %s: the box holds no private key for certificate %s", t.Name, e.Name)
		}
		c.local = &ike.Credential{Cert: p.Cert, Chain: p.Chain, Key: p.Key}
		key.WriteString(e.Cert + e.Key.Reveal())
	}
	if remote == config.AuthCert {
		for _, name := range t.TrustedCAs {
			e := cfg.Certificate(name)
			if e == nil || !e.CA {
				return nil, fmt.Errorf("tunnel %s: trusted CA %q is not in the certificate store", t.Name, name)
			}
			p, err := e.Parse()
			if err != nil {
				return nil, fmt.Errorf("tunnel %s: CA %s: %w", t.Name, e.Name, err)
			}
			c.cas = append(c.cas, p.Cert)
			if p.CRL != nil {
				c.crls = append(c.crls, p.CRL)
			}
			key.WriteString(e.Cert + e.CRL)
		}
	}
	c.key = key.String()
	return c, nil
}

// apply puts the credentials into the engine's tunnel configuration. A
// certificate tunnel without local_id calls itself by its certificate's
// subject DN, and without remote_id accepts any identity the peer's
// certificate vouches for (strongSwan's defaults), rather than the
// addresses peerConfig sets for a PSK tunnel.
func (c *tunnelCreds) apply(p *ike.PeerConfig, t *config.Tunnel) {
	if c == nil {
		return
	}
	local, remote := t.AuthMethods()
	if local == config.AuthCert {
		p.LocalAuth, p.LocalCert = ike.AuthByCert, c.local
		if t.LocalID == "" {
			p.LocalID = ike.CertIdentity(c.local.Cert)
		}
	}
	if remote == config.AuthCert {
		p.RemoteAuth, p.TrustedCAs, p.CRLs = ike.AuthByCert, c.cas, c.crls
		if t.RemoteID == "" {
			p.RemoteID = ike.Identity{}
		}
	}
}

func (c *tunnelCreds) sameAs(o *tunnelCreds) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.key == o.key
}
