package ike

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flashgate/flashgate/ipsec"
)

// Transform IDs (IANA "IKEv2 Transform Type N Transform IDs").
const (
	ENCR_3DES              = 3 // legacy: only where a tunnel allows it
	ENCR_AES_CBC           = 12
	ENCR_AES_GCM_8         = 18
	ENCR_AES_GCM_12        = 19
	ENCR_AES_GCM_16        = 20
	ENCR_CHACHA20_POLY1305 = 28

	PRF_HMAC_MD5      = 1 // legacy
	PRF_HMAC_SHA1     = 2
	PRF_HMAC_SHA2_256 = 5
	PRF_HMAC_SHA2_384 = 6
	PRF_HMAC_SHA2_512 = 7

	AUTH_NONE              = 0
	AUTH_HMAC_MD5_96       = 1 // legacy
	AUTH_HMAC_SHA1_96      = 2
	AUTH_HMAC_SHA2_256_128 = 12
	AUTH_HMAC_SHA2_384_192 = 13
	AUTH_HMAC_SHA2_512_256 = 14

	ESN_NO  = 0
	ESN_YES = 1
)

// Encr is an encryption algorithm with its key length in bits.
type Encr struct {
	ID      uint16
	KeyBits int
}

// Proposal is a set of algorithms for IKE or ESP in the form strongSwan
// writes them: "aes128gcm16-prfsha256-ecp256". A configured proposal may list
// several algorithms per type ("aes128-aes256-sha256-modp2048-ecp256"); a
// chosen one has exactly one per type.
type Proposal struct {
	Protocol   ProtocolID
	Encryption []Encr
	Integrity  []uint16
	PRF        []uint16
	DH         []DHGroup
	ESN        []uint16 // ESP only; empty means no ESN
}

var encrKeywords = []struct {
	word string
	alg  Encr
}{
	{"aes128", Encr{ENCR_AES_CBC, 128}}, {"aes192", Encr{ENCR_AES_CBC, 192}}, {"aes256", Encr{ENCR_AES_CBC, 256}},
	{"aes128gcm16", Encr{ENCR_AES_GCM_16, 128}}, {"aes192gcm16", Encr{ENCR_AES_GCM_16, 192}}, {"aes256gcm16", Encr{ENCR_AES_GCM_16, 256}},
	{"aes128gcm12", Encr{ENCR_AES_GCM_12, 128}}, {"aes192gcm12", Encr{ENCR_AES_GCM_12, 192}}, {"aes256gcm12", Encr{ENCR_AES_GCM_12, 256}},
	{"aes128gcm8", Encr{ENCR_AES_GCM_8, 128}}, {"aes192gcm8", Encr{ENCR_AES_GCM_8, 192}}, {"aes256gcm8", Encr{ENCR_AES_GCM_8, 256}},
	{"chacha20poly1305", Encr{ENCR_CHACHA20_POLY1305, 256}},
	// strongSwan's aliases, accepted on input only (the first spelling prints).
	{"aes128gcm128", Encr{ENCR_AES_GCM_16, 128}}, {"aes256gcm128", Encr{ENCR_AES_GCM_16, 256}},
	{"aes128gcm", Encr{ENCR_AES_GCM_16, 128}}, {"aes256gcm", Encr{ENCR_AES_GCM_16, 256}},
	{"aes", Encr{ENCR_AES_CBC, 128}},
	// Legacy (config gates them behind an explicit choice): 64-bit blocks.
	{"3des", Encr{ENCR_3DES, 192}},
}

var integKeywords = []struct {
	word string
	id   uint16
}{
	{"sha1", AUTH_HMAC_SHA1_96}, {"sha256", AUTH_HMAC_SHA2_256_128},
	{"sha384", AUTH_HMAC_SHA2_384_192}, {"sha512", AUTH_HMAC_SHA2_512_256},
	{"sha", AUTH_HMAC_SHA1_96}, {"sha2_256", AUTH_HMAC_SHA2_256_128},
	{"md5", AUTH_HMAC_MD5_96}, // legacy
}

var prfKeywords = []struct {
	word string
	id   uint16
}{
	{"prfsha1", PRF_HMAC_SHA1}, {"prfsha256", PRF_HMAC_SHA2_256},
	{"prfsha384", PRF_HMAC_SHA2_384}, {"prfsha512", PRF_HMAC_SHA2_512},
	{"prfmd5", PRF_HMAC_MD5}, // legacy
}

var dhKeywords = []struct {
	word string
	g    DHGroup
}{
	{"modp2048", MODP2048}, {"modp3072", MODP3072}, {"modp4096", MODP4096},
	{"ecp256", ECP256}, {"ecp384", ECP384}, {"ecp521", ECP521},
	{"curve25519", Curve25519}, {"x25519", Curve25519},
	{"modp1024", MODP1024}, {"modp1536", MODP1536}, // legacy
}

// prfForInteg is the PRF strongSwan implies from an integrity algorithm
// when an IKE proposal names none.
func prfForInteg(id uint16) uint16 {
	switch id {
	case AUTH_HMAC_MD5_96:
		return PRF_HMAC_MD5
	case AUTH_HMAC_SHA1_96:
		return PRF_HMAC_SHA1
	case AUTH_HMAC_SHA2_256_128:
		return PRF_HMAC_SHA2_256
	case AUTH_HMAC_SHA2_384_192:
		return PRF_HMAC_SHA2_384
	case AUTH_HMAC_SHA2_512_256:
		return PRF_HMAC_SHA2_512
	}
	return 0
}

// ParseProposal parses one proposal in strongSwan syntax for proto
// (ProtoIKE or ProtoESP).
func ParseProposal(proto ProtocolID, s string) (Proposal, error) {
	p := Proposal{Protocol: proto}
	if s == "" {
		return p, fmt.Errorf("empty proposal")
	}
	esnSeen := false
tokens:
	for _, tok := range strings.Split(strings.ToLower(strings.TrimSpace(s)), "-") {
		for _, k := range encrKeywords {
			if tok == k.word {
				if !slices.Contains(p.Encryption, k.alg) {
					p.Encryption = append(p.Encryption, k.alg)
				}
				continue tokens
			}
		}
		for _, k := range integKeywords {
			if tok == k.word {
				if !slices.Contains(p.Integrity, k.id) {
					p.Integrity = append(p.Integrity, k.id)
				}
				continue tokens
			}
		}
		for _, k := range prfKeywords {
			if tok == k.word {
				if proto != ProtoIKE {
					return p, fmt.Errorf("proposal %q: %s is a PRF, which ESP has not", s, tok)
				}
				if !slices.Contains(p.PRF, k.id) {
					p.PRF = append(p.PRF, k.id)
				}
				continue tokens
			}
		}
		for _, k := range dhKeywords {
			if tok == k.word {
				if !slices.Contains(p.DH, k.g) {
					p.DH = append(p.DH, k.g)
				}
				continue tokens
			}
		}
		switch tok {
		case "esn", "noesn":
			if proto != ProtoESP {
				return p, fmt.Errorf("proposal %q: %s applies to ESP only", s, tok)
			}
			id := uint16(ESN_NO)
			if tok == "esn" {
				id = ESN_YES
			}
			esnSeen = true
			if !slices.Contains(p.ESN, id) {
				p.ESN = append(p.ESN, id)
			}
			continue
		}
		if why, ok := refusedAlgorithms[tok]; ok {
			return p, fmt.Errorf("proposal %q: %s", s, why)
		}
		return p, fmt.Errorf("proposal %q: unknown algorithm %q", s, tok)
	}
	if !esnSeen && proto == ProtoESP {
		p.ESN = []uint16{ESN_NO}
	}
	if err := p.check(); err != nil {
		return p, fmt.Errorf("proposal %q: %w", s, err)
	}
	return p, nil
}

// refusedAlgorithms are never negotiated, not even where a tunnel allows
// the legacy ones.
var refusedAlgorithms = map[string]string{
	"des":      "DES is broken (56-bit keys, searched in hours) and never negotiated; use aes128 or aes256 (or 3des where an old peer has nothing else)",
	"blowfish": "Blowfish has 64-bit blocks and no hardware here; it is never negotiated; use aes128 or aes256",
	"modp768":  "modp768 is broken and never negotiated; use modp2048 (or modp1024 where an old peer has nothing else)",
}

// Legacy reports whether the proposal holds an algorithm flashgate accepts
// only where a tunnel explicitly allows it: 3DES, HMAC-MD5, MODP 1024 and
// 1536. The engine negotiates only what the tunnel configures, so a peer
// cannot talk a tunnel down to these.
func (p Proposal) Legacy() bool {
	for _, e := range p.Encryption {
		if e.ID == ENCR_3DES {
			return true
		}
	}
	for _, i := range p.Integrity {
		if i == AUTH_HMAC_MD5_96 {
			return true
		}
	}
	for _, f := range p.PRF {
		if f == PRF_HMAC_MD5 {
			return true
		}
	}
	for _, g := range p.DH {
		if g == MODP1024 || g == MODP1536 {
			return true
		}
	}
	return false
}

// ParseProposals parses a comma-separated list of proposals.
func ParseProposals(proto ProtocolID, s string) ([]Proposal, error) {
	var ps []Proposal
	for _, f := range strings.Split(s, ",") {
		p, err := ParseProposal(proto, f)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// MustParseProposals is ParseProposals for constants; it panics on error.
func MustParseProposals(proto ProtocolID, s string) []Proposal {
	ps, err := ParseProposals(proto, s)
	if err != nil {
		panic(err)
	}
	return ps
}

func (p *Proposal) check() error {
	if len(p.Encryption) == 0 {
		return fmt.Errorf("no encryption algorithm")
	}
	aead := isAEAD(p.Encryption[0].ID)
	for _, e := range p.Encryption[1:] {
		if isAEAD(e.ID) != aead {
			return fmt.Errorf("mixes AEAD and non-AEAD encryption: write two proposals")
		}
	}
	if aead && len(p.Integrity) > 0 {
		return fmt.Errorf("AEAD encryption takes no integrity algorithm")
	}
	if !aead && len(p.Integrity) == 0 {
		return fmt.Errorf("no integrity algorithm")
	}
	if p.Protocol == ProtoIKE {
		for _, e := range p.Encryption {
			if e.ID == ENCR_AES_GCM_8 {
				return fmt.Errorf("AES-GCM with an 8-byte ICV is for ESP only")
			}
		}
		if len(p.PRF) == 0 {
			if aead {
				return fmt.Errorf("AEAD IKE proposal needs a PRF (e.g. prfsha256)")
			}
			for _, i := range p.Integrity {
				p.PRF = append(p.PRF, prfForInteg(i))
			}
		}
		if len(p.DH) == 0 {
			return fmt.Errorf("no Diffie-Hellman group")
		}
	}
	return nil
}

// impliedPRF reports whether the PRF list is exactly what the integrity
// algorithms imply, so that String can leave it out like strongSwan's users do.
func (p Proposal) impliedPRF() bool {
	if len(p.Integrity) != len(p.PRF) {
		return false
	}
	for i := range p.Integrity {
		if prfForInteg(p.Integrity[i]) != p.PRF[i] {
			return false
		}
	}
	return true
}

// String prints the proposal in strongSwan syntax; ParseProposal(String())
// gives the same proposal back.
func (p Proposal) String() string {
	var t []string
	for _, e := range p.Encryption {
		t = append(t, encrName(e))
	}
	for _, i := range p.Integrity {
		t = append(t, integName(i))
	}
	if p.Protocol == ProtoIKE && (len(p.Integrity) == 0 || !p.impliedPRF()) {
		for _, f := range p.PRF {
			t = append(t, prfName(f))
		}
	}
	for _, g := range p.DH {
		t = append(t, g.String())
	}
	if p.Protocol == ProtoESP && !(len(p.ESN) == 1 && p.ESN[0] == ESN_NO) && len(p.ESN) > 0 {
		for _, e := range p.ESN {
			if e == ESN_YES {
				t = append(t, "esn")
			} else {
				t = append(t, "noesn")
			}
		}
	}
	return strings.Join(t, "-")
}

// ProposalsString joins proposals with commas, for messages.
func ProposalsString(ps []Proposal) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func encrName(e Encr) string {
	for _, k := range encrKeywords {
		if k.alg == e {
			return k.word
		}
	}
	if w, ok := encrWords[e.ID]; ok {
		if !strings.Contains(w, "%d") {
			return w // a fixed key length: the peer sends none, or its own
		}
		if e.KeyBits == 0 {
			return strings.Replace(w, "%d", "", 1)
		}
		return fmt.Sprintf(w, e.KeyBits)
	}
	return fmt.Sprintf("encr%d_%d", e.ID, e.KeyBits)
}

// The names of every algorithm a peer may offer, in strongSwan's words,
// for messages: when a peer offers what flashgate does not run, the admin
// needs to read "peer offered 3des-sha1-modp1536", not "encr3_0-sha1-dh5".
// The keyword tables above are what flashgate negotiates (and parses);
// these only name (IANA "IKEv2 Transform Type N Transform IDs"). An
// algorithm that becomes supported gets a keyword above, which wins.
var (
	encrWords = map[uint16]string{
		1: "desiv64", 2: "des", 3: "3des", 4: "rc5", 5: "idea", 6: "cast%d", 7: "blowfish%d", 8: "3idea",
		9: "desiv32", 11: "null", 12: "aes%d", 13: "aes%dctr", 14: "aes%dccm8", 15: "aes%dccm12", 16: "aes%dccm16",
		18: "aes%dgcm8", 19: "aes%dgcm12", 20: "aes%dgcm16", 21: "aes%dgmac", 23: "camellia%d", 24: "camellia%dctr",
		25: "camellia%dccm8", 26: "camellia%dccm12", 27: "camellia%dccm16", 28: "chacha20poly1305",
	}
	integWords = map[uint16]string{
		1: "md5", 3: "desmac", 4: "kpdkmd5", 5: "aesxcbc", 6: "md5_128", 7: "sha1_160", 8: "aescmac",
		9: "aes128gmac", 10: "aes192gmac", 11: "aes256gmac",
	}
	prfWords = map[uint16]string{1: "prfmd5", 3: "prftiger", 4: "prfaesxcbc", 8: "prfaescmac"}
	dhWords  = map[DHGroup]string{
		1: "modp768", 2: "modp1024", 5: "modp1536", 17: "modp6144", 18: "modp8192", 22: "modp1024s160",
		23: "modp2048s224", 24: "modp2048s256", 25: "ecp192", 26: "ecp224", 27: "ecp224bp", 28: "ecp256bp",
		29: "ecp384bp", 30: "ecp512bp", 32: "curve448",
	}
)

func integName(id uint16) string {
	for _, k := range integKeywords {
		if k.id == id {
			return k.word
		}
	}
	if w, ok := integWords[id]; ok {
		return w
	}
	return fmt.Sprintf("integ%d", id)
}

func prfName(id uint16) string {
	for _, k := range prfKeywords {
		if k.id == id {
			return k.word
		}
	}
	if w, ok := prfWords[id]; ok {
		return w
	}
	return fmt.Sprintf("prf%d", id)
}

// ToWire converts the proposal into a proposal substructure with the given
// number and SPI (RFC 7296 3.3: IKE SPI empty in IKE_SA_INIT, 8 bytes when
// rekeying; ESP 4 bytes).
func (p Proposal) ToWire(number uint8, spi []byte) WireProposal {
	w := WireProposal{Number: number, Protocol: p.Protocol, SPI: spi}
	for _, e := range p.Encryption {
		t := WireTransform{Type: TransformENCR, ID: e.ID}
		if e.ID != ENCR_CHACHA20_POLY1305 {
			t.Attrs = []TransformAttribute{{Type: AttrKeyLength, TV: true, Short: uint16(e.KeyBits)}}
		}
		w.Transforms = append(w.Transforms, t)
	}
	for _, f := range p.PRF {
		w.Transforms = append(w.Transforms, WireTransform{Type: TransformPRF, ID: f})
	}
	for _, i := range p.Integrity {
		w.Transforms = append(w.Transforms, WireTransform{Type: TransformINTEG, ID: i})
	}
	for _, g := range p.DH {
		w.Transforms = append(w.Transforms, WireTransform{Type: TransformDH, ID: uint16(g)})
	}
	for _, e := range p.ESN {
		w.Transforms = append(w.Transforms, WireTransform{Type: TransformESN, ID: e})
	}
	return w
}

// ProposalFromWire converts a received proposal substructure. Transforms it
// does not know are kept (so that they print in diagnostics) but can never
// be selected. ok is false when a transform carries an attribute other than
// the key length: RFC 7296 3.3.6 says to reject such a transform, so the
// whole proposal is unusable.
func ProposalFromWire(w WireProposal) (p Proposal, ok bool) {
	p.Protocol = w.Protocol
	ok = true
	for _, t := range w.Transforms {
		for _, a := range t.Attrs {
			if a.Type != AttrKeyLength {
				ok = false
			}
		}
		switch t.Type {
		case TransformENCR:
			kb := t.KeyLength()
			if t.ID == ENCR_CHACHA20_POLY1305 {
				kb = 256
			}
			p.Encryption = append(p.Encryption, Encr{ID: t.ID, KeyBits: kb})
		case TransformPRF:
			p.PRF = append(p.PRF, t.ID)
		case TransformINTEG:
			if t.ID != AUTH_NONE {
				p.Integrity = append(p.Integrity, t.ID)
			}
		case TransformDH:
			p.DH = append(p.DH, DHGroup(t.ID))
		case TransformESN:
			p.ESN = append(p.ESN, t.ID)
		default:
			ok = false
		}
	}
	return p, ok
}

// Ranking reorders configured proposals by preference, e.g. so that the
// board's crypto engine gets the algorithms it accelerates first. It must
// not invent algorithms that were not configured.
type Ranking func([]Proposal) []Proposal

// DefaultIKEProposals and DefaultESPProposals are the secure defaults:
// AEAD first, CBC+HMAC-SHA2 for peers that lack it, no SHA-1, no MODP below
// 2048 bits.
func DefaultIKEProposals() []Proposal {
	return MustParseProposals(ProtoIKE,
		"aes128gcm16-aes256gcm16-chacha20poly1305-prfsha256-prfsha384-prfsha512-ecp256-curve25519-ecp384-ecp521-modp3072-modp2048,"+
			"aes128-aes256-sha256-sha384-sha512-ecp256-curve25519-ecp384-ecp521-modp3072-modp2048")
}

// DefaultESPProposals: see DefaultIKEProposals.
func DefaultESPProposals() []Proposal {
	return MustParseProposals(ProtoESP, "aes128gcm16-aes256gcm16-chacha20poly1305,aes128-aes256-sha256-sha384-sha512")
}

// selectProposal chooses what the responder accepts. flashgate prefers its
// own configured order (like strongSwan's default prefer_configured_proposals
// = yes): the configured order is where the board's Ranking put the
// algorithms its hardware runs fast. For each of our proposals in order, the
// first of the peer's proposals that shares an algorithm of every type is
// taken, and within it each type gets our first algorithm the peer offered.
// For DH, preferDH (the group of the peer's KE payload) wins if acceptable,
// which avoids an INVALID_KE_PAYLOAD round trip. It returns the chosen
// proposal and the index of the peer's proposal it came from.
func selectProposal(ours []Proposal, theirs []WireProposal, preferDH DHGroup) (Proposal, int, bool) {
	for _, o := range ours {
		for ti, tw := range theirs {
			if tw.Protocol != o.Protocol {
				continue
			}
			t, ok := ProposalFromWire(tw)
			if !ok {
				continue
			}
			if c, ok := matchProposal(o, t, preferDH); ok {
				return c, ti, true
			}
		}
	}
	return Proposal{}, -1, false
}

func matchProposal(o, t Proposal, preferDH DHGroup) (Proposal, bool) {
	c := Proposal{Protocol: o.Protocol}
	var ok bool
	if c.Encryption, ok = pickFirst(o.Encryption, t.Encryption); !ok {
		return c, false
	}
	if c.Integrity, ok = pickFirst(o.Integrity, t.Integrity); !ok {
		return c, false
	}
	if o.Protocol == ProtoIKE {
		if c.PRF, ok = pickFirst(o.PRF, t.PRF); !ok || len(c.PRF) == 0 {
			return c, false
		}
	}
	if preferDH != 0 && slices.Contains(o.DH, preferDH) && slices.Contains(t.DH, preferDH) {
		c.DH = []DHGroup{preferDH}
	} else if c.DH, ok = pickFirst(normDH(o.DH), normDH(t.DH)); !ok {
		return c, false
	}
	if len(c.DH) == 1 && c.DH[0] == 0 {
		c.DH = nil
	}
	if o.Protocol == ProtoIKE && len(c.DH) == 0 {
		return c, false
	}
	if o.Protocol == ProtoESP {
		if c.ESN, ok = pickFirst(normESN(o.ESN), normESN(t.ESN)); !ok {
			return c, false
		}
	}
	return c, true
}

// normDH treats "no DH transform" as the explicit NONE group, so that a
// proposal without PFS matches only a peer that also accepts none.
func normDH(g []DHGroup) []DHGroup {
	if len(g) == 0 {
		return []DHGroup{0}
	}
	return g
}

func normESN(e []uint16) []uint16 {
	if len(e) == 0 {
		return []uint16{ESN_NO}
	}
	return e
}

// pickFirst returns our first algorithm that the peer also lists. Both
// empty is a match with nothing (e.g. integrity for AEAD).
func pickFirst[T comparable](ours, theirs []T) ([]T, bool) {
	if len(ours) == 0 && len(theirs) == 0 {
		return nil, true
	}
	for _, a := range ours {
		if slices.Contains(theirs, a) {
			return []T{a}, true
		}
	}
	return nil, false
}

// acceptable reports whether a chosen proposal (one algorithm per type,
// from the peer's response) is one we offered.
func acceptable(ours []Proposal, chosen Proposal) bool {
	for _, o := range ours {
		if o.Protocol != chosen.Protocol {
			continue
		}
		if len(chosen.Encryption) != 1 || len(chosen.Integrity) > 1 || len(chosen.PRF) > 1 || len(chosen.DH) > 1 || len(chosen.ESN) > 1 {
			return false
		}
		if c, ok := matchProposal(o, chosen, 0); ok && c.String() == chosen.String() {
			return true
		}
	}
	return false
}

// ESPTransform maps a chosen ESP proposal to the Linux crypto API names of
// the shared ipsec contract.
func (p Proposal) ESPTransform() (ipsec.Transform, error) {
	if len(p.Encryption) != 1 {
		return ipsec.Transform{}, fmt.Errorf("proposal %s: not a chosen proposal", p)
	}
	e := p.Encryption[0]
	var t ipsec.Transform
	switch e.ID {
	case ENCR_AES_GCM_16, ENCR_AES_GCM_12, ENCR_AES_GCM_8:
		t = ipsec.Transform{Encryption: "rfc4106(gcm(aes))", EncKeyBits: e.KeyBits, ICVBits: map[uint16]int{ENCR_AES_GCM_16: 128, ENCR_AES_GCM_12: 96, ENCR_AES_GCM_8: 64}[e.ID]}
		return t, nil
	case ENCR_CHACHA20_POLY1305:
		return ipsec.Transform{Encryption: "rfc7539esp(chacha20,poly1305)", EncKeyBits: 256, ICVBits: 128}, nil
	case ENCR_AES_CBC:
		t = ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: e.KeyBits}
	case ENCR_3DES:
		t = ipsec.Transform{Encryption: "cbc(des3_ede)", EncKeyBits: 192}
	default:
		return t, fmt.Errorf("proposal %s: no kernel name for encryption %d", p, e.ID)
	}
	if len(p.Integrity) != 1 {
		return t, fmt.Errorf("proposal %s: CBC without integrity", p)
	}
	switch p.Integrity[0] {
	case AUTH_HMAC_MD5_96:
		t.Integrity, t.ICVBits = "hmac(md5)", 96
	case AUTH_HMAC_SHA1_96:
		t.Integrity, t.ICVBits = "hmac(sha1)", 96
	case AUTH_HMAC_SHA2_256_128:
		t.Integrity, t.ICVBits = "hmac(sha256)", 128
	case AUTH_HMAC_SHA2_384_192:
		t.Integrity, t.ICVBits = "hmac(sha384)", 192
	case AUTH_HMAC_SHA2_512_256:
		t.Integrity, t.ICVBits = "hmac(sha512)", 256
	default:
		return t, fmt.Errorf("proposal %s: no kernel name for integrity %d", p, p.Integrity[0])
	}
	return t, nil
}
