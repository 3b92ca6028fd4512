package ike

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
	"time"
)

// IKEv1 carries the same algorithms as IKEv2 under other numbers, as
// attributes of transforms (RFC 2409 appendix A for phase 1, RFC 2407
// 4.5 for ESP). The engine keeps one proposal model: a configured
// Proposal is expanded into IKEv1 transforms, a chosen transform maps
// back to a Proposal with one algorithm per type, so status, diagnostics
// and the data plane see the same names as with IKEv2.

// Phase 1 attribute types and values.
const (
	v1AttrEncr      = 1
	v1AttrHash      = 2
	v1AttrAuth      = 3
	v1AttrGroup     = 4
	v1AttrLifeType  = 11
	v1AttrLifeDur   = 12
	v1AttrKeyLength = 14

	v1EncrDES      = 1
	v1EncrBlowfish = 3
	v1Encr3DES     = 5
	v1EncrAES      = 7

	v1HashMD5    = 1
	v1HashSHA1   = 2
	v1HashSHA256 = 4
	v1HashSHA384 = 5
	v1HashSHA512 = 6

	v1AuthPSK        = 1
	v1AuthXAUTHPSK   = 65001 // XAUTH: out of scope
	v1LifeSeconds    = 1
	v1LifeKilobytes  = 2
	v1DefaultP1Life  = 8 * time.Hour // RFC 2407 4.5: 28800 s when absent
	v1DefaultP2Life  = time.Hour     // RFC 2407 4.5: 3600 s when absent
	v1MaxProposedDur = 1 << 31
)

// ESP (phase 2) attribute types and values.
const (
	v1ESPAttrLifeType  = 1
	v1ESPAttrLifeDur   = 2
	v1ESPAttrGroup     = 3
	v1ESPAttrEncap     = 4
	v1ESPAttrAuth      = 5
	v1ESPAttrKeyLength = 6

	v1EncapTunnel         = 1
	v1EncapUDPTunnel      = 3     // RFC 3947
	v1EncapUDPTunnelDraft = 61443 // draft-ietf-ipsec-nat-t-ike, still sent by old peers

	v1ESPDES      = 2
	v1ESP3DES     = 3
	v1ESPBlowfish = 7
	v1ESPAES      = 12

	v1AuthHMACMD5    = 1
	v1AuthHMACSHA1   = 2
	v1AuthHMACSHA256 = 5
	v1AuthHMACSHA384 = 6
	v1AuthHMACSHA512 = 7
)

var v1HashOfInteg = map[uint16]uint64{
	AUTH_HMAC_MD5_96: v1HashMD5, AUTH_HMAC_SHA1_96: v1HashSHA1, AUTH_HMAC_SHA2_256_128: v1HashSHA256,
	AUTH_HMAC_SHA2_384_192: v1HashSHA384, AUTH_HMAC_SHA2_512_256: v1HashSHA512,
}

var v1ESPAuthOfInteg = map[uint16]uint64{
	AUTH_HMAC_MD5_96: v1AuthHMACMD5, AUTH_HMAC_SHA1_96: v1AuthHMACSHA1, AUTH_HMAC_SHA2_256_128: v1AuthHMACSHA256,
	AUTH_HMAC_SHA2_384_192: v1AuthHMACSHA384, AUTH_HMAC_SHA2_512_256: v1AuthHMACSHA512,
}

func reverse(m map[uint16]uint64) map[uint64]uint16 {
	r := map[uint64]uint16{}
	for k, v := range m {
		r[v] = k
	}
	return r
}

var (
	v1IntegOfHash    = reverse(v1HashOfInteg)
	v1IntegOfESPAuth = reverse(v1ESPAuthOfInteg)
)

// v1Hash is the hash function of a phase 1 hash attribute: HMAC of it is
// the PRF, the plain hash makes the IVs.
func v1HashFunc(id uint64) (func() hash.Hash, error) {
	switch id {
	case v1HashMD5:
		return md5.New, nil
	case v1HashSHA1:
		return sha1.New, nil
	case v1HashSHA256:
		return sha256.New, nil
	case v1HashSHA384:
		return sha512.New384, nil
	case v1HashSHA512:
		return sha512.New, nil
	}
	return nil, fmt.Errorf("IKEv1 hash algorithm %d not supported", id)
}

// v1Phase1Transforms expands IKE proposals into phase 1 transforms, each a
// complete suite. IKEv1 protects its own messages with CBC ciphers only:
// AEAD proposals are left out.
func v1Phase1Transforms(ps []Proposal, life time.Duration) []v1Transform {
	var out []v1Transform
	for _, p := range ps {
		for _, e := range p.Encryption {
			var encr uint64
			switch e.ID {
			case ENCR_AES_CBC:
				encr = v1EncrAES
			case ENCR_3DES:
				encr = v1Encr3DES
			default:
				continue
			}
			for _, i := range p.Integrity {
				h, ok := v1HashOfInteg[i]
				if !ok {
					continue
				}
				for _, g := range p.DH {
					if len(out) == v1MaxTransforms {
						return out
					}
					attrs := []v1Attr{{Type: v1AttrEncr, Value: encr}, {Type: v1AttrHash, Value: h},
						{Type: v1AttrAuth, Value: v1AuthPSK}, {Type: v1AttrGroup, Value: uint64(g)}}
					if encr == v1EncrAES {
						attrs = append(attrs, v1Attr{Type: v1AttrKeyLength, Value: uint64(e.KeyBits)})
					}
					if life > 0 {
						attrs = append(attrs, v1Attr{Type: v1AttrLifeType, Value: v1LifeSeconds},
							v1Attr{Type: v1AttrLifeDur, Value: uint64(life / time.Second), TLV: true})
					}
					out = append(out, v1Transform{Number: uint8(len(out) + 1), ID: v1KeyIKE, Attrs: attrs})
				}
			}
		}
	}
	return out
}

// v1Phase1Proposal reads a phase 1 transform: the suite in our model,
// the lifetime it proposes (0: none), and why it cannot be used.
func v1Phase1Proposal(t v1Transform) (p Proposal, life time.Duration, why string) {
	p.Protocol = ProtoIKE
	if t.ID != v1KeyIKE {
		return p, 0, fmt.Sprintf("transform ID %d is not KEY_IKE", t.ID)
	}
	encr, _ := t.attr(v1AttrEncr)
	h, _ := t.attr(v1AttrHash)
	auth, _ := t.attr(v1AttrAuth)
	g, _ := t.attr(v1AttrGroup)
	kl, _ := t.attr(v1AttrKeyLength)
	switch encr {
	case v1EncrAES:
		if kl == 0 {
			kl = 128
		}
		p.Encryption = []Encr{{ENCR_AES_CBC, int(kl)}}
	case v1Encr3DES:
		p.Encryption = []Encr{{ENCR_3DES, 192}}
	case v1EncrDES:
		p.Encryption = []Encr{{ID: 2, KeyBits: 64}}
		why = "DES is broken and never negotiated"
	case v1EncrBlowfish:
		p.Encryption = []Encr{{ID: 7, KeyBits: int(kl)}}
		why = "Blowfish is never negotiated"
	default:
		p.Encryption = []Encr{{ID: uint16(1000 + encr), KeyBits: int(kl)}}
		why = fmt.Sprintf("encryption algorithm %d is not supported", encr)
	}
	if i, ok := v1IntegOfHash[h]; ok {
		p.Integrity, p.PRF = []uint16{i}, []uint16{prfForInteg(i)}
	} else if why == "" {
		why = fmt.Sprintf("hash algorithm %d is not supported", h)
	}
	p.DH = []DHGroup{DHGroup(g)}
	if !DHGroup(g).supported() && why == "" {
		why = fmt.Sprintf("DH group %d is not supported", g)
	}
	switch auth {
	case v1AuthPSK:
	case v1AuthXAUTHPSK:
		if why == "" {
			why = "XAUTH is not supported (pre-shared keys only)"
		}
	default:
		if why == "" {
			why = fmt.Sprintf("authentication method %d is not supported (pre-shared keys only)", auth)
		}
	}
	life, lwhy := v1Lifetime(t.Attrs, v1AttrLifeType, v1AttrLifeDur)
	if why == "" {
		why = lwhy
	}
	return p, life, why
}

// v1Lifetime reads the life type/duration pairs of a transform: the
// seconds limit (0: none given). A kilobytes limit is accepted and left to
// the data plane's own limits.
func v1Lifetime(attrs []v1Attr, typeAttr, durAttr uint16) (time.Duration, string) {
	var life time.Duration
	lt := uint64(0)
	for _, a := range attrs {
		switch a.Type {
		case typeAttr:
			lt = a.Value
		case durAttr:
			if lt == v1LifeSeconds {
				// 0 is what strongSwan sends for "no limit".
				if a.Value > v1MaxProposedDur {
					return 0, fmt.Sprintf("lifetime of %d seconds", a.Value)
				}
				life = time.Duration(a.Value) * time.Second
			}
		}
	}
	return life, ""
}

// v1ESPTransforms expands ESP proposals into the transforms of one ESP
// proposal. pfs is the group of the KE payload sent with them (0: none).
func v1ESPTransforms(ps []Proposal, pfs DHGroup, encap uint64, life time.Duration) []v1Transform {
	var out []v1Transform
	for _, p := range ps {
		for _, e := range p.Encryption {
			var id uint8
			switch e.ID {
			case ENCR_AES_CBC:
				id = v1ESPAES
			case ENCR_3DES:
				id = v1ESP3DES
			case ENCR_AES_GCM_8, ENCR_AES_GCM_12, ENCR_AES_GCM_16:
				id = uint8(e.ID)
			default:
				continue
			}
			integs := p.Integrity
			if isAEAD(e.ID) {
				integs = []uint16{AUTH_NONE}
			}
			for _, i := range integs {
				if len(out) == v1MaxTransforms {
					return out
				}
				var attrs []v1Attr
				if life > 0 {
					attrs = append(attrs, v1Attr{Type: v1ESPAttrLifeType, Value: v1LifeSeconds},
						v1Attr{Type: v1ESPAttrLifeDur, Value: uint64(life / time.Second), TLV: true})
				}
				if pfs != 0 {
					attrs = append(attrs, v1Attr{Type: v1ESPAttrGroup, Value: uint64(pfs)})
				}
				attrs = append(attrs, v1Attr{Type: v1ESPAttrEncap, Value: encap})
				if i != AUTH_NONE {
					a, ok := v1ESPAuthOfInteg[i]
					if !ok {
						continue
					}
					attrs = append(attrs, v1Attr{Type: v1ESPAttrAuth, Value: a})
				}
				if id != v1ESP3DES {
					attrs = append(attrs, v1Attr{Type: v1ESPAttrKeyLength, Value: uint64(e.KeyBits)})
				}
				out = append(out, v1Transform{Number: uint8(len(out) + 1), ID: id, Attrs: attrs})
			}
		}
	}
	return out
}

// v1ESPProposal reads an ESP transform: the suite, the PFS group (in the
// proposal's DH), the encapsulation mode and lifetime, and why it cannot be
// used.
func v1ESPProposal(t v1Transform) (p Proposal, encap uint64, life time.Duration, why string) {
	p.Protocol = ProtoESP
	p.ESN = []uint16{ESN_NO}
	kl, _ := t.attr(v1ESPAttrKeyLength)
	switch t.ID {
	case v1ESPAES:
		if kl == 0 {
			kl = 128
		}
		p.Encryption = []Encr{{ENCR_AES_CBC, int(kl)}}
	case v1ESP3DES:
		p.Encryption = []Encr{{ENCR_3DES, 192}}
	case ENCR_AES_GCM_8, ENCR_AES_GCM_12, ENCR_AES_GCM_16:
		if kl == 0 {
			kl = 128
		}
		p.Encryption = []Encr{{uint16(t.ID), int(kl)}}
	case v1ESPDES:
		p.Encryption = []Encr{{ID: 2, KeyBits: 64}}
		why = "DES is broken and never negotiated"
	case v1ESPBlowfish:
		p.Encryption = []Encr{{ID: 7, KeyBits: int(kl)}}
		why = "Blowfish is never negotiated"
	default:
		p.Encryption = []Encr{{ID: uint16(1000 + uint16(t.ID)), KeyBits: int(kl)}}
		why = fmt.Sprintf("ESP transform %d is not supported", t.ID)
	}
	if a, ok := t.attr(v1ESPAttrAuth); ok {
		if i, ok := v1IntegOfESPAuth[a]; ok {
			p.Integrity = []uint16{i}
		} else if why == "" {
			why = fmt.Sprintf("ESP authentication algorithm %d is not supported", a)
		}
	} else if why == "" && !isAEAD(p.Encryption[0].ID) {
		why = "ESP without an authentication algorithm"
	}
	if g, ok := t.attr(v1ESPAttrGroup); ok && g != 0 {
		p.DH = []DHGroup{DHGroup(g)}
		if !DHGroup(g).supported() && why == "" {
			why = fmt.Sprintf("PFS group %d is not supported", g)
		}
	}
	encap, ok := t.attr(v1ESPAttrEncap)
	if !ok {
		encap = v1EncapTunnel
	}
	switch encap {
	case v1EncapTunnel, v1EncapUDPTunnel, v1EncapUDPTunnelDraft:
	default:
		if why == "" {
			why = fmt.Sprintf("encapsulation mode %d (only tunnel mode is supported)", encap)
		}
	}
	life, lwhy := v1Lifetime(t.Attrs, v1ESPAttrLifeType, v1ESPAttrLifeDur)
	if why == "" {
		why = lwhy
	}
	return p, encap, life, why
}

// v1Choose picks, in our configured order, the first of our suites that
// one of the peer's transforms offers; it returns that transform's index.
// read maps a transform to a suite (ok false: unusable).
func v1Choose(ours []Proposal, theirs []v1Transform, read func(v1Transform) (Proposal, bool)) (Proposal, int, bool) {
	for _, o := range ours {
		for i, t := range theirs {
			p, ok := read(t)
			if !ok {
				continue
			}
			if c, ok := matchProposal(o, p, 0); ok && c.String() == p.String() {
				return p, i, true
			}
		}
	}
	return Proposal{}, -1, false
}
