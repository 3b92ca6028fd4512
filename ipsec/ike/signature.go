package ike

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Signature authentication (RFC 7296 2.15 with the methods of 3.8, and
// RFC 7427 digital signatures). The signed octets are the same as for a
// pre-shared key: the sender's IKE_SA_INIT message, the peer's nonce and
// prf(SK_p, ID payload body).

// Hash algorithms of the SIGNATURE_HASH_ALGORITHMS notify (RFC 7427 4,
// RFC 8420 for Identity, which Ed25519 needs).
const (
	hashSHA1     uint16 = 1
	hashSHA256   uint16 = 2
	hashSHA384   uint16 = 3
	hashSHA512   uint16 = 4
	hashIdentity uint16 = 5
)

// ourSignatureHashes is what we announce and accept in RFC 7427
// signatures: no SHA-1.
var ourSignatureHashes = []uint16{hashSHA256, hashSHA384, hashSHA512, hashIdentity}

func hashName(h uint16) string {
	switch h {
	case hashSHA1:
		return "sha1"
	case hashSHA256:
		return "sha256"
	case hashSHA384:
		return "sha384"
	case hashSHA512:
		return "sha512"
	case hashIdentity:
		return "identity"
	}
	return fmt.Sprintf("hash(%d)", h)
}

func hashesString(hs []uint16) string {
	if len(hs) == 0 {
		return "none"
	}
	s := make([]string, len(hs))
	for i, h := range hs {
		s[i] = hashName(h)
	}
	return strings.Join(s, ", ")
}

// signatureHashesNotify is our SIGNATURE_HASH_ALGORITHMS notify.
func signatureHashesNotify() *Notify {
	var b []byte
	for _, h := range ourSignatureHashes {
		b = binary.BigEndian.AppendUint16(b, h)
	}
	return &Notify{NotifyType: SIGNATURE_HASH_ALGORITHMS, Data: b}
}

// parseSignatureHashes reads the peer's SIGNATURE_HASH_ALGORITHMS notify;
// ok is false when it sent none (then only the classic methods apply).
func parseSignatureHashes(ps []Payload) (hs []uint16, ok bool) {
	n := findNotify(ps, SIGNATURE_HASH_ALGORITHMS)
	if n == nil {
		return nil, false
	}
	for b := n.Data; len(b) >= 2 && len(hs) < 32; b = b[2:] {
		hs = append(hs, binary.BigEndian.Uint16(b))
	}
	return hs, true
}

// sigScheme is one way of signing: the key type, the hash, and for RSA
// whether it is PSS.
type sigScheme struct {
	name string
	key  string // "rsa", "ecdsa", "ed25519"
	hash uint16
	pss  bool
	oid  asn1.ObjectIdentifier
}

var (
	oidRSAPSS    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 10}
	oidMGF1      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 8}
	oidSHA256    = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidSHA384    = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 2}
	oidSHA512    = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 3}
	oidSHA1      = asn1.ObjectIdentifier{1, 3, 14, 3, 2, 26}
	oidEd25519   = asn1.ObjectIdentifier{1, 3, 101, 112}
	schemesByOID = []sigScheme{
		{"sha1WithRSAEncryption", "rsa", hashSHA1, false, asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 5}},
		{"sha256WithRSAEncryption", "rsa", hashSHA256, false, asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 11}},
		{"sha384WithRSAEncryption", "rsa", hashSHA384, false, asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 12}},
		{"sha512WithRSAEncryption", "rsa", hashSHA512, false, asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 13}},
		{"ecdsa-with-SHA1", "ecdsa", hashSHA1, false, asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 1}},
		{"ecdsa-with-SHA256", "ecdsa", hashSHA256, false, asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}},
		{"ecdsa-with-SHA384", "ecdsa", hashSHA384, false, asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 3}},
		{"ecdsa-with-SHA512", "ecdsa", hashSHA512, false, asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 4}},
		{"Ed25519", "ed25519", hashIdentity, false, oidEd25519},
	}
)

func cryptoHash(h uint16) (crypto.Hash, bool) {
	switch h {
	case hashSHA1:
		return crypto.SHA1, true
	case hashSHA256:
		return crypto.SHA256, true
	case hashSHA384:
		return crypto.SHA384, true
	case hashSHA512:
		return crypto.SHA512, true
	}
	return 0, false
}

func hashOID(h uint16) asn1.ObjectIdentifier {
	switch h {
	case hashSHA256:
		return oidSHA256
	case hashSHA384:
		return oidSHA384
	case hashSHA512:
		return oidSHA512
	case hashSHA1:
		return oidSHA1
	}
	return nil
}

func hashFromOID(o asn1.ObjectIdentifier) uint16 {
	for _, h := range []uint16{hashSHA1, hashSHA256, hashSHA384, hashSHA512} {
		if o.Equal(hashOID(h)) {
			return h
		}
	}
	return 0
}

// pssParams is RSASSA-PSS-params (RFC 4055 3.1).
type pssParams struct {
	Hash       pkix.AlgorithmIdentifier `asn1:"explicit,tag:0,optional"`
	MGF        pkix.AlgorithmIdentifier `asn1:"explicit,tag:1,optional"`
	SaltLength int                      `asn1:"explicit,tag:2,optional,default:20"`
	Trailer    int                      `asn1:"explicit,tag:3,optional,default:1"`
}

// algorithmIdentifier is the DER AlgorithmIdentifier of RFC 7427's AUTH data.
func (s sigScheme) algorithmIdentifier() []byte {
	ai := pkix.AlgorithmIdentifier{Algorithm: s.oid}
	switch {
	case s.pss:
		hai := pkix.AlgorithmIdentifier{Algorithm: hashOID(s.hash), Parameters: asn1.NullRawValue}
		hb, _ := asn1.Marshal(hai)
		h := mustHash(s.hash)
		p := pssParams{Hash: hai,
			MGF:        pkix.AlgorithmIdentifier{Algorithm: oidMGF1, Parameters: asn1.RawValue{FullBytes: hb}},
			SaltLength: h.Size(), Trailer: 1}
		pb, _ := asn1.Marshal(p)
		ai = pkix.AlgorithmIdentifier{Algorithm: oidRSAPSS, Parameters: asn1.RawValue{FullBytes: pb}}
	case s.key == "rsa":
		ai.Parameters = asn1.NullRawValue
	}
	b, _ := asn1.Marshal(ai)
	return b
}

func mustHash(h uint16) crypto.Hash {
	c, _ := cryptoHash(h)
	return c
}

// schemeFromAlgorithmIdentifier reads the AlgorithmIdentifier of an RFC
// 7427 AUTH payload.
func schemeFromAlgorithmIdentifier(der []byte) (sigScheme, error) {
	var ai pkix.AlgorithmIdentifier
	rest, err := asn1.Unmarshal(der, &ai)
	if err != nil || len(rest) != 0 {
		return sigScheme{}, fmt.Errorf("signature algorithm identifier is not valid DER: %w", ErrMalformed)
	}
	if ai.Algorithm.Equal(oidRSAPSS) {
		var p pssParams
		if rest, err := asn1.Unmarshal(ai.Parameters.FullBytes, &p); err != nil || len(rest) != 0 {
			return sigScheme{}, fmt.Errorf("RSASSA-PSS parameters are not valid DER: %w", ErrMalformed)
		}
		h := hashSHA1 // the default of RFC 4055
		if len(p.Hash.Algorithm) > 0 {
			h = hashFromOID(p.Hash.Algorithm)
		}
		if h == 0 {
			return sigScheme{}, fmt.Errorf("RSASSA-PSS with hash %v", p.Hash.Algorithm)
		}
		return sigScheme{name: "RSASSA-PSS with " + hashName(h), key: "rsa", hash: h, pss: true, oid: oidRSAPSS}, nil
	}
	for _, s := range schemesByOID {
		if ai.Algorithm.Equal(s.oid) {
			return s, nil
		}
	}
	return sigScheme{}, fmt.Errorf("signature algorithm %v", ai.Algorithm)
}

// keyKind names a public or private key's type the way sigScheme does.
func keyKind(k any) string {
	switch k := k.(type) {
	case *rsa.PublicKey, *rsa.PrivateKey:
		return "rsa"
	case *ecdsa.PublicKey, *ecdsa.PrivateKey:
		return "ecdsa"
	case ed25519.PublicKey, ed25519.PrivateKey:
		return "ed25519"
	case crypto.Signer:
		return keyKind(k.Public())
	}
	return fmt.Sprintf("%T", k)
}

// classicECDSAMethod is the RFC 4754 method for a curve, with its hash.
func classicECDSAMethod(c elliptic.Curve) (AuthMethod, uint16, bool) {
	switch c {
	case elliptic.P256():
		return AuthECDSA256, hashSHA256, true
	case elliptic.P384():
		return AuthECDSA384, hashSHA384, true
	case elliptic.P521():
		return AuthECDSA521, hashSHA512, true
	}
	return 0, 0, false
}

// chooseSignature picks how we sign: RFC 7427 when the peer announced
// hashes (the strongest we both know that fits our key), else the classic
// method of our key type. It says in words why nothing fits.
func chooseSignature(key crypto.Signer, peerHashes []uint16, announced, rsaPSS bool) (AuthMethod, sigScheme, error) {
	kind := keyKind(key)
	if announced {
		want := []uint16{hashSHA256, hashSHA384, hashSHA512}
		if kind == "ed25519" {
			want = []uint16{hashIdentity}
		} else if ek, ok := key.Public().(*ecdsa.PublicKey); ok {
			// The hash of the curve's strength first, as strongSwan does.
			if _, h, ok := classicECDSAMethod(ek.Curve); ok {
				want = append([]uint16{h}, want...)
			}
		}
		for _, h := range want {
			for _, p := range peerHashes {
				if p != h {
					continue
				}
				for _, s := range schemesByOID {
					if s.key == kind && s.hash == h {
						if kind == "rsa" && rsaPSS {
							s = sigScheme{name: "RSASSA-PSS with " + hashName(h), key: "rsa", hash: h, pss: true, oid: oidRSAPSS}
						}
						return AuthDigitalSig, s, nil
					}
				}
			}
		}
		return 0, sigScheme{}, fmt.Errorf("signature scheme refused: the peer accepts the hashes %s, none of which we can sign with our %s key",
			hashesString(peerHashes), kind)
	}
	switch k := key.Public().(type) {
	case *rsa.PublicKey:
		return AuthRSA, sigScheme{name: "RSA PKCS#1 v1.5 with sha1 (method 1)", key: "rsa", hash: hashSHA1}, nil
	case *ecdsa.PublicKey:
		if m, h, ok := classicECDSAMethod(k.Curve); ok {
			return m, sigScheme{name: fmt.Sprintf("ECDSA with %s (method %d)", hashName(h), m), key: "ecdsa", hash: h}, nil
		}
	}
	return 0, sigScheme{}, fmt.Errorf("signature scheme refused: the peer did not announce RFC 7427 signature hashes, and a %s key has no classic IKEv2 method", kind)
}

// signedOctets is RFC 7296 2.15's InitiatorSignedOctets/ResponderSignedOctets.
func signedOctets(f prf, realMessage, peerNonce, skp []byte, id *ID) []byte {
	idBody := id.appendBody(make([]byte, 0, 4+len(id.Data)))
	b := make([]byte, 0, len(realMessage)+len(peerNonce)+f.size)
	return append(append(append(b, realMessage...), peerNonce...), f.sum(skp, idBody)...)
}

// signAuth makes the AUTH payload's data.
func signAuth(key crypto.Signer, m AuthMethod, s sigScheme, octets []byte) ([]byte, error) {
	var digest []byte
	var opts crypto.SignerOpts = crypto.Hash(0)
	if s.hash != hashIdentity {
		h := mustHash(s.hash)
		hh := h.New()
		hh.Write(octets)
		digest = hh.Sum(nil)
		opts = h
		if s.pss {
			opts = &rsa.PSSOptions{SaltLength: h.Size(), Hash: h}
		}
	} else {
		digest = octets
	}
	sig, err := key.Sign(rand.Reader, digest, opts)
	if err != nil {
		return nil, fmt.Errorf("sign AUTH with %s: %w", s.name, err)
	}
	switch m {
	case AuthDigitalSig:
		ai := s.algorithmIdentifier()
		return append(append([]byte{byte(len(ai))}, ai...), sig...), nil
	case AuthECDSA256, AuthECDSA384, AuthECDSA521:
		// RFC 4754: r and s as fixed-length big-endian integers.
		var v struct{ R, S *big.Int }
		if _, err := asn1.Unmarshal(sig, &v); err != nil {
			return nil, fmt.Errorf("ECDSA signature: %w", err)
		}
		n := (key.Public().(*ecdsa.PublicKey).Curve.Params().BitSize + 7) / 8
		out := make([]byte, 2*n)
		v.R.FillBytes(out[:n])
		v.S.FillBytes(out[n:])
		return out, nil
	}
	return sig, nil
}

// errSignature is a signature that does not verify with the certificate's key.
var errSignature = errors.New("signature does not verify")

// verifyAuth checks the peer's AUTH data against the signed octets with
// pub. It returns the scheme the peer used, for messages. An RFC 7427
// signature is accepted only with one of the hashes we announced.
func verifyAuth(pub crypto.PublicKey, m AuthMethod, data, octets []byte) (sigScheme, error) {
	kind := keyKind(pub)
	var s sigScheme
	sig := data
	switch m {
	case AuthDigitalSig:
		if len(data) < 1 || len(data) < 1+int(data[0]) {
			return s, fmt.Errorf("AUTH data too short for its algorithm identifier: %w", ErrMalformed)
		}
		var err error
		if s, err = schemeFromAlgorithmIdentifier(data[1 : 1+int(data[0])]); err != nil {
			return s, fmt.Errorf("signature scheme refused: %w", err)
		}
		sig = data[1+int(data[0]):]
		ok := false
		for _, h := range ourSignatureHashes {
			ok = ok || h == s.hash
		}
		if !ok {
			return s, fmt.Errorf("signature scheme refused: the peer signed with %s; we accept the hashes %s", s.name, hashesString(ourSignatureHashes))
		}
	case AuthRSA:
		s = sigScheme{name: "RSA PKCS#1 v1.5 (method 1)", key: "rsa", hash: hashSHA1}
	case AuthECDSA256, AuthECDSA384, AuthECDSA521:
		ek, ok := pub.(*ecdsa.PublicKey)
		if !ok {
			return s, fmt.Errorf("the peer authenticates with ECDSA (method %d) but its certificate holds a %s key", m, kind)
		}
		cm, h, ok := classicECDSAMethod(ek.Curve)
		if !ok || cm != m {
			return s, fmt.Errorf("the peer authenticates with ECDSA method %d, which does not fit its certificate's curve %s", m, ek.Curve.Params().Name)
		}
		s = sigScheme{name: fmt.Sprintf("ECDSA with %s (method %d)", hashName(h), m), key: "ecdsa", hash: h}
		n := (ek.Curve.Params().BitSize + 7) / 8
		if len(sig) != 2*n {
			return s, fmt.Errorf("ECDSA signature of %d bytes, want %d: %w", len(sig), 2*n, errSignature)
		}
		r, ss := new(big.Int).SetBytes(sig[:n]), new(big.Int).SetBytes(sig[n:])
		var err error
		if sig, err = asn1.Marshal(struct{ R, S *big.Int }{r, ss}); err != nil {
			return s, err
		}
	default:
		return s, fmt.Errorf("the peer authenticates with method %d, which flashgate does not support", m)
	}
	if s.key != kind {
		return s, fmt.Errorf("the peer signed with %s but its certificate holds a %s key", s.name, kind)
	}
	var digest []byte
	if s.hash != hashIdentity {
		h, ok := cryptoHash(s.hash)
		if !ok {
			return s, fmt.Errorf("signature scheme refused: hash %s", hashName(s.hash))
		}
		hh := h.New()
		hh.Write(octets)
		digest = hh.Sum(nil)
	}
	var ok bool
	switch k := pub.(type) {
	case *rsa.PublicKey:
		h := mustHash(s.hash)
		if s.pss {
			ok = rsa.VerifyPSS(k, h, digest, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto, Hash: h}) == nil
		} else {
			ok = rsa.VerifyPKCS1v15(k, h, digest, sig) == nil
		}
	case *ecdsa.PublicKey:
		ok = ecdsa.VerifyASN1(k, digest, sig)
	case ed25519.PublicKey:
		ok = s.hash == hashIdentity && ed25519.Verify(k, octets, sig)
	}
	if !ok {
		return s, fmt.Errorf("%s: %w", s.name, errSignature)
	}
	return s, nil
}
