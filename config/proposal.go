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

// refusedTokens are algorithms strongSwan knows that flashgate refuses, with
// the reason, so that the admin is told more than "unknown".
var refusedTokens = map[string]string{
	"3des":     "3des is insecure (64-bit blocks) and not supported; use aes128 or aes256",
	"des":      "des is broken and not supported; use aes128 or aes256",
	"blowfish": "blowfish is not supported; use aes128 or aes256",
	"md5":      "md5 is broken and not supported; use sha256",
	"prfmd5":   "prfmd5 is broken and not supported; use prfsha256",
	"modp768":  "modp768 is too weak; use modp2048 or ecp256",
	"modp1024": "modp1024 is too weak; use modp2048 or ecp256",
	"modp1536": "modp1536 is too weak; use modp2048 or ecp256",
	"null":     "null encryption is not supported",
}

// CheckIKEProposal reports whether s is a well-formed IKE proposal in
// strongSwan syntax: encryption, integrity unless the encryption is AEAD,
// an optional PRF (derived from integrity when absent; required with AEAD
// unless integrity names it) and at least one DH group.
func CheckIKEProposal(s string) error { return checkProposal(s, true) }

// CheckESPProposal reports whether s is a well-formed ESP proposal:
// encryption, integrity unless AEAD, optional DH groups (PFS) and optional
// esn/noesn.
func CheckESPProposal(s string) error { return checkProposal(s, false) }

func checkProposal(s string, ike bool) error {
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
