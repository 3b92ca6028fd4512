package ike

import (
	"errors"
	"fmt"
)

// ourAuth makes our AUTH payload for IKE_AUTH, id being our ID payload:
// a shared-key MIC, or a signature with our certificate's key in the way
// the peer announced it accepts (RFC 7427) or else the classic method.
func (sa *IKESA) ourAuth(id *ID) (*Auth, error) {
	// The initiator signs its IKE_SA_INIT request and the responder's
	// nonce with SK_pi; the responder its response and Ni with SK_pr.
	msg, nonce, skp := sa.init.initResp, sa.init.ni, sa.init.skpr
	if sa.initiator {
		msg, nonce, skp = sa.init.initReq, sa.init.nr, sa.init.skpi
	}
	if sa.cfg.LocalAuth != AuthByCert {
		return &Auth{Method: AuthSharedKeyMIC, Data: pskAuth(sa.keys.prf, sa.cfg.PSK, msg, nonce, skp, id)}, nil
	}
	cred := sa.cfg.LocalCert
	if cred == nil || cred.Cert == nil || cred.Key == nil {
		return nil, errors.New("the tunnel authenticates with a certificate but none is loaded")
	}
	if sa.sig == nil {
		sa.sig = &sigState{} // the peer announced no hashes
	}
	m, s, err := chooseSignature(cred.Key, sa.sig.peerHashes, sa.sig.announced, sa.cfg.SignRSAPSS)
	if err != nil {
		return nil, err
	}
	data, err := signAuth(cred.Key, m, s, signedOctets(sa.keys.prf, msg, nonce, skp, id))
	if err != nil {
		return nil, err
	}
	sa.sig.ourScheme = s.name
	return &Auth{Method: m, Data: data}, nil
}

// checkPeerAuth verifies the peer's AUTH for its ID payload id, with the
// other payloads of its IKE_AUTH message (its certificates). It returns
// why it refuses, in plain words, or "".
func (sa *IKESA) checkPeerAuth(id *ID, auth *Auth, ps []Payload) string {
	msg, nonce, skp := sa.init.initReq, sa.init.nr, sa.init.skpi
	if sa.initiator {
		msg, nonce, skp = sa.init.initResp, sa.init.ni, sa.init.skpr
	}
	peerID := Identity{id.IDType, id.Data}
	if sa.cfg.RemoteAuth != AuthByCert {
		if auth.Method != AuthSharedKeyMIC {
			return fmt.Sprintf("peer %s authenticates with %s, we expect a pre-shared key", peerID, methodName(auth.Method))
		}
		if !verifyPSKAuth(sa.keys.prf, sa.cfg.PSK, msg, nonce, skp, id, auth.Data) {
			return fmt.Sprintf("pre-shared key mismatch: the AUTH of peer %s does not verify with our secret", peerID)
		}
		return ""
	}
	if auth.Method == AuthSharedKeyMIC {
		return fmt.Sprintf("peer %s authenticates with a pre-shared key, we expect a certificate", peerID)
	}
	leaf, inter, err := peerCertificates(ps)
	if err != nil {
		return fmt.Sprintf("peer %s: %v", peerID, err)
	}
	if err := verifyPeerCert(leaf, inter, sa.cfg.TrustedCAs, sa.cfg.CRLs, sa.ep.now()); err != nil {
		return err.Error()
	}
	if !certContains(leaf, peerID) {
		return fmt.Sprintf("identity not in the certificate: the peer calls itself %s, which its certificate %s does not contain (it has %s)",
			peerID, certName(leaf), certNames(leaf))
	}
	if _, err := verifyAuth(leaf.PublicKey, auth.Method, auth.Data, signedOctets(sa.keys.prf, msg, nonce, skp, id)); err != nil {
		return fmt.Sprintf("peer %s: %v", peerID, err)
	}
	return ""
}

// whoWeAre says how we identified and authenticated, for the message when
// the peer refuses us.
func (sa *IKESA) whoWeAre() string {
	s := "we are " + sa.cfg.localID().String()
	if sa.cfg.LocalAuth == AuthByCert && sa.cfg.LocalCert != nil && sa.cfg.LocalCert.Cert != nil {
		s += ", with certificate " + certName(sa.cfg.LocalCert.Cert) + " issued by \"" + dnString(sa.cfg.LocalCert.Cert.RawIssuer) + "\""
		if sig := sa.sig; sig != nil {
			if sig.ourScheme != "" {
				s += ", signed with " + sig.ourScheme
			}
			if sig.announced {
				s += "; the peer announced the signature hashes " + hashesString(sig.peerHashes)
			}
		}
	}
	return s
}

func methodName(m AuthMethod) string {
	switch m {
	case AuthRSA:
		return "an RSA signature (method 1)"
	case AuthSharedKeyMIC:
		return "a pre-shared key"
	case AuthDSS:
		return "a DSS signature (method 3)"
	case AuthECDSA256, AuthECDSA384, AuthECDSA521:
		return fmt.Sprintf("an ECDSA signature (method %d)", m)
	case AuthDigitalSig:
		return "a digital signature (RFC 7427)"
	}
	return fmt.Sprintf("auth method %d", m)
}
