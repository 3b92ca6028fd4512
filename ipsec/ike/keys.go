package ike

import (
	"crypto/subtle"
	"encoding/binary"
	"fmt"
)

// ikeKeys are the keys an IKE SA keeps for its life (RFC 7296 2.14):
// SK_d and the message protection built from SK_e and SK_a. SK_pi and
// SK_pr serve IKE_AUTH only and are kept apart, in saInit (a hub keeps a
// thousand of these: 64 bytes, not 112 with them).
type ikeKeys struct {
	prf prf
	d   []byte
	// in and out protect the messages we receive and send.
	in, out *skDirection
}

func (k *ikeKeys) zero() {
	if k == nil {
		return
	}
	clear(k.d)
	if k.in != nil {
		k.in.zero()
	}
	if k.out != nil {
		k.out.zero()
	}
}

func spiBytes(spi uint64) []byte { return binary.BigEndian.AppendUint64(nil, spi) }

// deriveIKEKeys computes SKEYSEED and the key set. skeyseed is prf(Ni | Nr,
// g^ir) for a new IKE SA or prf(SK_d(old), g^ir | Ni | Nr) for a rekey
// (RFC 7296 2.18); weInitiated says which of SK_e/a i or r is ours.
// SK_pi and SK_pr come apart, for IKE_AUTH: the caller zeroes them.
func deriveIKEKeys(p Proposal, skeyseed, ni, nr []byte, spii, spir uint64, weInitiated bool) (k *ikeKeys, pi, pr []byte, err error) {
	f, err := newPRF(p.PRF[0])
	if err != nil {
		return nil, nil, nil, err
	}
	elen, err := encrKeyLen(p.Encryption[0])
	if err != nil {
		return nil, nil, nil, err
	}
	var integ uint16
	alen := 0
	if len(p.Integrity) > 0 {
		integ = p.Integrity[0]
		if _, alen, _, err = integInfo(integ); err != nil {
			return nil, nil, nil, err
		}
	}
	seed := make([]byte, 0, len(ni)+len(nr)+16)
	seed = append(append(append(append(seed, ni...), nr...), spiBytes(spii)...), spiBytes(spir)...)
	km, err := f.plus(skeyseed, seed, 3*f.size+2*alen+2*elen)
	if err != nil {
		return nil, nil, nil, err
	}
	defer clear(km)
	take := func(n int) []byte {
		b := append([]byte(nil), km[:n]...)
		km = km[n:]
		return b
	}
	k = &ikeKeys{prf: f}
	k.d = take(f.size)
	ai, ar := take(alen), take(alen)
	ei, er := take(elen), take(elen)
	pi, pr = take(f.size), take(f.size)
	defer func() { clear(ai); clear(ar); clear(ei); clear(er) }()
	dirI, err := newSKDirection(p.Encryption[0], integ, ei, ai)
	if err != nil {
		clear(k.d)
		clear(pi)
		clear(pr)
		return nil, nil, nil, err
	}
	dirR, err := newSKDirection(p.Encryption[0], integ, er, ar)
	if err != nil {
		clear(k.d)
		clear(pi)
		clear(pr)
		dirI.zero()
		return nil, nil, nil, err
	}
	if weInitiated {
		k.out, k.in = dirI, dirR
	} else {
		k.out, k.in = dirR, dirI
	}
	return k, pi, pr, nil
}

// childKeys is the KEYMAT of one CHILD_SA split into its four keys
// (RFC 7296 2.17): those protecting initiator-to-responder traffic first.
type childKeys struct {
	encI, integI, encR, integR []byte
}

func deriveChildKeys(f prf, skd []byte, p Proposal, gir, ni, nr []byte) (*childKeys, error) {
	elen, err := encrKeyLen(p.Encryption[0])
	if err != nil {
		return nil, err
	}
	alen := 0
	if len(p.Integrity) > 0 {
		if _, alen, _, err = integInfo(p.Integrity[0]); err != nil {
			return nil, err
		}
	}
	seed := make([]byte, 0, len(gir)+len(ni)+len(nr))
	seed = append(append(append(seed, gir...), ni...), nr...)
	km, err := f.plus(skd, seed, 2*elen+2*alen)
	if err != nil {
		return nil, err
	}
	return &childKeys{
		encI: km[:elen], integI: km[elen : elen+alen],
		encR: km[elen+alen : 2*elen+alen], integR: km[2*elen+alen:],
	}, nil
}

// pskKeyPad is the constant of RFC 7296 2.15.
const pskKeyPad = "Key Pad for IKEv2"

// pskAuth computes the AUTH data of a shared-key MIC: prf(prf(Shared
// Secret, "Key Pad for IKEv2"), <SignedOctets>), where SignedOctets is the
// sender's first message, the peer's nonce and prf(SK_p, ID payload body).
func pskAuth(f prf, psk, realMessage, peerNonce, skp []byte, id *ID) []byte {
	idBody := id.appendBody(make([]byte, 0, 4+len(id.Data)))
	macedID := f.sum(skp, idBody)
	key := f.sum(psk, []byte(pskKeyPad))
	defer clear(key)
	return f.sum(key, realMessage, peerNonce, macedID)
}

// verifyPSKAuth compares in constant time.
func verifyPSKAuth(f prf, psk, realMessage, peerNonce, skp []byte, id *ID, got []byte) bool {
	want := pskAuth(f, psk, realMessage, peerNonce, skp, id)
	return subtle.ConstantTimeCompare(want, got) == 1
}

// errNoKeys is returned when a protected message arrives before keys exist.
var errNoKeys = fmt.Errorf("no keys yet")
