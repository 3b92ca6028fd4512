package config

import (
	"fmt"
	"strings"
)

// This file checks proposal strings in strongSwan's syntax
// ("aes128gcm16-prfsha256-ecp256") so that a typo is caught when the admin
// commits, with the offending token named. It is validation only:
// ipsec/ike has its own full parser and is authoritative for what is
// proposed and negotiated. The two must accept the same algorithms; this one
// deliberately knows no more than ipsec/ike implements.

type algKind int

const (
	algEncr algKind = iota
	algAEAD
	algInteg
	algPRF
	algDH
	algESN
)

var proposalTokens = map[string]algKind{
	"aes128": algEncr, "aes192": algEncr, "aes256": algEncr,
	"chacha20poly1305": algAEAD,
	"sha1":             algInteg, "sha256": algInteg, "sha384": algInteg, "sha512": algInteg,
	"prfsha1": algPRF, "prfsha256": algPRF, "prfsha384": algPRF, "prfsha512": algPRF,
	"modp2048": algDH, "modp3072": algDH, "modp4096": algDH,
	"ecp256": algDH, "ecp384": algDH, "ecp521": algDH,
	"curve25519": algDH, "x25519": algDH,
	"esn": algESN, "noesn": algESN,
}

func init() {
	// AES-GCM: strongSwan names the ICV length in bytes (gcm8/12/16) or,
	// equivalently, in bits (gcm64/96/128).
	for _, bits := range []string{"128", "192", "256"} {
		for _, icv := range []string{"8", "12", "16", "64", "96", "128"} {
			proposalTokens["aes"+bits+"gcm"+icv] = algAEAD
		}
	}
}

// IKEProposalChoices and ESPProposalChoices are well-formed proposals for
// a picker (the web UI marks the ones the board's crypto engine
// accelerates). The first of each is the default.
var (
	IKEProposalChoices = []string{
		DefaultIKEProposal,
		"aes256gcm16-prfsha384-ecp384",
		"chacha20poly1305-prfsha256-curve25519",
		"aes256-sha256-modp2048",
		"aes128-sha256-modp2048",
		"aes128-sha1-modp2048",
	}
	ESPProposalChoices = []string{
		DefaultESPProposal,
		"aes128gcm16",
		"aes256gcm16-ecp384",
		"chacha20poly1305",
		"aes256-sha256",
		"aes128-sha256",
		"aes128-sha1",
	}
)

// legacyTokens are algorithms that the peers already in the field (IKEv1
// gateways, Hifn-accelerated boxes) still need but that are too weak to
// accept by accident: a tunnel takes them only when it sets
// legacy_algorithms. Each carries why it is weak and what to use instead.
var legacyTokens = map[string]struct {
	kind      algKind
	weak, use string
}{
	"3des":     {algEncr, "64-bit blocks collide after a few GB under one key: Sweet32", "aes128 or aes256"},
	"md5":      {algInteg, "MD5 is broken for collisions", "sha256"},
	"prfmd5":   {algPRF, "MD5 is broken for collisions", "prfsha256"},
	"modp1024": {algDH, "a 1024-bit group is within reach of a well-funded attacker: Logjam", "modp2048 or ecp256"},
	"modp1536": {algDH, "1536 bits is below today's 2048-bit minimum", "modp2048 or ecp256"},
}

// deprecatedTokens are allowed everywhere (configurations have always
// used them and RFC 8221/8247 still list them) but shown as weak.
var deprecatedTokens = map[string]string{
	"sha1":    "SHA-1 is deprecated (RFC 8221/8247); use sha256",
	"prfsha1": "SHA-1 is deprecated (RFC 8247); use prfsha256",
}

// refusedTokens are algorithms strongSwan knows that flashgate refuses even
// with legacy_algorithms, with the reason, so that the admin is told more
// than "unknown".
var refusedTokens = map[string]string{
	"des":      "des is refused, also with legacy_algorithms: its 56-bit key falls to exhaustive search in hours; use aes128 or aes256 (or 3des with legacy_algorithms true if the peer can do nothing better)",
	"blowfish": "blowfish is refused, also with legacy_algorithms: 64-bit blocks (Sweet32) and no flashgate implementation; use aes128 or aes256 (or 3des with legacy_algorithms true if the peer can do nothing better)",
	"modp768":  "modp768 is refused, also with legacy_algorithms: a 768-bit group has been broken in public; use modp2048 or ecp256 (or modp1024 with legacy_algorithms true)",
	"null":     "null encryption is not supported",
}

func init() {
	// strongSwan also names key sizes: blowfish128/192/256 (and des
	// has no other spelling).
	for _, bits := range []string{"128", "192", "256"} {
		refusedTokens["blowfish"+bits] = strings.Replace(refusedTokens["blowfish"], "blowfish", "blowfish"+bits, 1)
	}
}

// Weakness is one weak algorithm in a proposal: the token and why.
type Weakness struct {
	Algorithm string `json:"algorithm"`
	Why       string `json:"why"`
	Use       string `json:"use"` // what to use instead
	// Legacy algorithms need legacy_algorithms true; deprecated ones
	// (sha1) are accepted everywhere.
	Legacy bool `json:"legacy"`
}

func (w Weakness) String() string {
	return fmt.Sprintf("%s is weak: %s; use %s", w.Algorithm, w.Why, w.Use)
}

// ProposalWeaknesses lists the weak algorithms of a proposal in strongSwan
// syntax, in the order they appear; nil for a proposal without any. It
// does not check that the proposal is valid.
func ProposalWeaknesses(s string) []Weakness {
	var out []Weakness
	for _, tok := range strings.Split(strings.ToLower(s), "-") {
		if l, ok := legacyTokens[tok]; ok {
			out = append(out, Weakness{Algorithm: tok, Why: l.weak, Use: l.use, Legacy: true})
		} else if why, ok := deprecatedTokens[tok]; ok {
			w, use, _ := strings.Cut(why, "; use ")
			out = append(out, Weakness{Algorithm: tok, Why: w, Use: use})
		}
	}
	return out
}

// IsWeakProposal reports whether a proposal has a weak algorithm.
func IsWeakProposal(s string) bool { return len(ProposalWeaknesses(s)) > 0 }

// WeakProposals lists the tunnel's proposals that have weak algorithms,
// IKE ones first, with what is weak in each; for the web UI, the console
// and the status.
func (t *Tunnel) WeakProposals() []WeakProposal {
	var out []WeakProposal
	for _, l := range []struct {
		kind string
		ps   []string
	}{{"ike", t.IKEProposals}, {"esp", t.ESPProposals}} {
		for _, p := range l.ps {
			if w := ProposalWeaknesses(p); len(w) > 0 {
				out = append(out, WeakProposal{Kind: l.kind, Proposal: p, Weaknesses: w})
			}
		}
	}
	return out
}

// WeakProposal is one of a tunnel's proposals with its weak algorithms.
type WeakProposal struct {
	Kind       string     `json:"kind"` // ike or esp
	Proposal   string     `json:"proposal"`
	Weaknesses []Weakness `json:"weaknesses"`
}

// Algorithms names the weak algorithms, comma-separated: "3des, modp1024".
func (w WeakProposal) Algorithms() string {
	var names []string
	for _, x := range w.Weaknesses {
		names = append(names, x.Algorithm)
	}
	return strings.Join(names, ", ")
}

// ProposalRules is what a tunnel allows beyond the strict defaults.
type ProposalRules struct {
	IKEVersion IKEVersion // 1 or 2; 0 is 2
	Legacy     bool       // legacy_algorithms: 3des, md5, modp1024/1536
}

// Rules returns the proposal rules of the tunnel's settings.
func (t *Tunnel) Rules() ProposalRules {
	return ProposalRules{IKEVersion: t.IKEVersion.Or2(), Legacy: t.LegacyAlgorithms}
}

// CheckIKEProposal reports whether s is a well-formed IKE proposal in
// strongSwan syntax: encryption, integrity unless the encryption is AEAD,
// an optional PRF (derived from integrity when absent; required with AEAD
// unless integrity names it) and at least one DH group.
// It applies the strict rules (IKEv2, no legacy algorithms); a tunnel's
// own rules are ProposalRules.CheckIKE.
func CheckIKEProposal(s string) error { return ProposalRules{}.CheckIKE(s) }

// CheckESPProposal reports whether s is a well-formed ESP proposal:
// encryption, integrity unless AEAD, optional DH groups (PFS) and optional
// esn/noesn.
func CheckESPProposal(s string) error { return ProposalRules{}.CheckESP(s) }

// CheckIKE is CheckIKEProposal under r: legacy algorithms only with
// r.Legacy, and no AEAD encryption in IKEv1 (main mode has none).
func (r ProposalRules) CheckIKE(s string) error { return r.check(s, true) }

// CheckESP is CheckESPProposal under r.
func (r ProposalRules) CheckESP(s string) error { return r.check(s, false) }

func (r ProposalRules) check(s string, ike bool) error {
	what := "ESP"
	if ike {
		what = "IKE"
	}
	if s == "" {
		return fmt.Errorf("empty %s proposal", what)
	}
	var n [algESN + 1]int
	for _, tok := range strings.Split(s, "-") {
		if why, ok := refusedTokens[tok]; ok {
			return fmt.Errorf("%s: %s", s, why)
		}
		kind, ok := proposalTokens[tok]
		if l, legacy := legacyTokens[tok]; legacy {
			if !r.Legacy {
				return fmt.Errorf("%s: %s is weak (%s) and accepted only in a tunnel with legacy_algorithms true, for a peer that can do nothing better; otherwise use %s", s, tok, l.weak, l.use)
			}
			kind, ok = l.kind, true
		}
		if !ok {
			if tok == "" {
				return fmt.Errorf("%s: empty algorithm name (doubled or trailing '-')", s)
			}
			return fmt.Errorf("%s: unknown algorithm %q", s, tok)
		}
		n[kind]++
	}
	switch {
	case n[algEncr] == 0 && n[algAEAD] == 0:
		return fmt.Errorf("%s: no encryption algorithm (e.g. aes128gcm16 or aes256)", s)
	case n[algEncr] > 0 && n[algAEAD] > 0:
		return fmt.Errorf("%s: mixes AEAD and non-AEAD encryption; write them as separate proposals", s)
	}
	if ike {
		switch {
		case n[algESN] > 0:
			return fmt.Errorf("%s: esn/noesn belong in ESP proposals, not IKE", s)
		case n[algEncr] > 0 && n[algInteg] == 0:
			return fmt.Errorf("%s: no integrity algorithm (e.g. sha256) for non-AEAD encryption", s)
		case n[algAEAD] > 0 && n[algPRF] == 0 && n[algInteg] == 0:
			return fmt.Errorf("%s: AEAD needs a PRF (e.g. prfsha256)", s)
		case n[algDH] == 0:
			return fmt.Errorf("%s: no DH group (e.g. ecp256 or modp2048)", s)
		case n[algAEAD] > 0 && r.IKEVersion == IKEv1:
			return fmt.Errorf("%s: IKEv1 main mode has no AEAD encryption (RFC 2409); with ike_version 1 use e.g. aes128-sha256-modp2048", s)
		}
		return nil
	}
	switch {
	case n[algPRF] > 0:
		return fmt.Errorf("%s: PRF algorithms belong in IKE proposals, not ESP", s)
	case n[algAEAD] > 0 && n[algInteg] > 0:
		return fmt.Errorf("%s: AEAD encryption carries its own integrity; drop the integrity algorithm", s)
	case n[algEncr] > 0 && n[algInteg] == 0:
		return fmt.Errorf("%s: no integrity algorithm (e.g. sha256) for non-AEAD encryption", s)
	}
	return nil
}
