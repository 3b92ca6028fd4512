package xfrm

import (
	"fmt"

	"github.com/flashgate/flashgate/ipsec"
)

// algorithm is one XFRM algorithm attribute: the crypto API name, the key,
// and for AEADs the ICV length or for integrity the truncation, in bits.
type algorithm struct {
	Name string
	Key  []byte
	Bits int
}

// aeadSpec describes an AEAD transform: key sizes without salt, salt size,
// allowed ICV lengths.
type aeadSpec struct {
	keyBits []int
	saltLen int
	icvBits []int
	defICV  int
	rfc     string
}

var aeads = map[string]aeadSpec{
	// RFC 4106: AES-GCM with a 4-byte salt after the key.
	"rfc4106(gcm(aes))": {keyBits: []int{128, 192, 256}, saltLen: 4, icvBits: []int{64, 96, 128}, defICV: 128, rfc: "RFC 4106"},
	// RFC 4309: AES-CCM with a 3-byte salt.
	"rfc4309(ccm(aes))": {keyBits: []int{128, 192, 256}, saltLen: 3, icvBits: []int{64, 96, 128}, defICV: 128, rfc: "RFC 4309"},
	// RFC 7634: ChaCha20-Poly1305 with a 4-byte salt, 128-bit ICV only.
	"rfc7539esp(chacha20,poly1305)": {keyBits: []int{256}, saltLen: 4, icvBits: []int{128}, defICV: 128, rfc: "RFC 7634"},
}

// ciphers are the non-AEAD encryption transforms: key sizes in bits, and
// the bytes of nonce that follow the key (RFC 3686 CTR).
var ciphers = map[string]struct {
	keyBits []int
	nonce   int
}{
	"cbc(aes)":          {keyBits: []int{128, 192, 256}},
	"rfc3686(ctr(aes))": {keyBits: []int{128, 192, 256}, nonce: 4},
	"cbc(des3_ede)":     {keyBits: []int{192}},
}

// integrities are the integrity transforms: key length in bytes (equal to
// the full output length for all of them) and the truncation ESP uses
// (RFC 2403, RFC 2404, RFC 4868, RFC 3566).
var integrities = map[string]struct {
	keyLen   int
	truncate int
}{
	"hmac(md5)":    {16, 96},
	"hmac(sha1)":   {20, 96},
	"hmac(sha256)": {32, 128},
	"hmac(sha384)": {48, 192},
	"hmac(sha512)": {64, 256},
	"xcbc(aes)":    {16, 96},
}

func contains(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// algorithms maps a negotiated transform and its keys to the XFRM
// attributes: either one AEAD, or a cipher plus truncated HMAC. It checks
// key lengths against the transform so that a mismatch between IKE's key
// derivation and the kernel is an error here, not a silently broken SA.
func algorithms(t ipsec.Transform, encKey, integKey []byte) (aead, crypt, auth *algorithm, err error) {
	if spec, ok := aeads[t.Encryption]; ok {
		if t.Integrity != "" {
			return nil, nil, nil, fmt.Errorf("%s is an AEAD (%s): integrity %q must be empty", t.Encryption, spec.rfc, t.Integrity)
		}
		if !contains(spec.keyBits, t.EncKeyBits) {
			return nil, nil, nil, fmt.Errorf("%s: key size %d bits not in %v", t.Encryption, t.EncKeyBits, spec.keyBits)
		}
		if want := t.EncKeyBits/8 + spec.saltLen; len(encKey) != want {
			return nil, nil, nil, fmt.Errorf("%s: key is %d bytes, want %d (%d-bit key + %d-byte salt)", t.Encryption, len(encKey), want, t.EncKeyBits, spec.saltLen)
		}
		icv := t.ICVBits
		if icv == 0 {
			icv = spec.defICV
		}
		if !contains(spec.icvBits, icv) {
			return nil, nil, nil, fmt.Errorf("%s: ICV %d bits not in %v", t.Encryption, icv, spec.icvBits)
		}
		return &algorithm{Name: t.Encryption, Key: encKey, Bits: icv}, nil, nil, nil
	}
	c, ok := ciphers[t.Encryption]
	if !ok {
		return nil, nil, nil, fmt.Errorf("encryption %q: not supported by the xfrm data plane", t.Encryption)
	}
	if !contains(c.keyBits, t.EncKeyBits) {
		return nil, nil, nil, fmt.Errorf("%s: key size %d bits not in %v", t.Encryption, t.EncKeyBits, c.keyBits)
	}
	if want := t.EncKeyBits/8 + c.nonce; len(encKey) != want {
		return nil, nil, nil, fmt.Errorf("%s: key is %d bytes, want %d", t.Encryption, len(encKey), want)
	}
	if t.Integrity == "" {
		return nil, nil, nil, fmt.Errorf("%s without integrity: refusing an unauthenticated SA", t.Encryption)
	}
	in, ok := integrities[t.Integrity]
	if !ok {
		return nil, nil, nil, fmt.Errorf("integrity %q: not supported by the xfrm data plane", t.Integrity)
	}
	if len(integKey) != in.keyLen {
		return nil, nil, nil, fmt.Errorf("%s: key is %d bytes, want %d", t.Integrity, len(integKey), in.keyLen)
	}
	trunc := t.ICVBits
	if trunc == 0 {
		trunc = in.truncate
	}
	if trunc%8 != 0 || trunc < 64 || trunc > in.keyLen*8 {
		return nil, nil, nil, fmt.Errorf("%s: truncation to %d bits", t.Integrity, trunc)
	}
	return nil, &algorithm{Name: t.Encryption, Key: encKey}, &algorithm{Name: t.Integrity, Key: integKey, Bits: trunc}, nil
}
