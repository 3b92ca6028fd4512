package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestCheckProposal(t *testing.T) {
	tests := []struct {
		ike     bool
		in      string
		wantErr string // "" for valid
	}{
		{true, "aes128gcm16-prfsha256-ecp256", ""},
		{true, "aes256gcm16-prfsha384-ecp384", ""},
		{true, "aes256-sha256-modp2048", ""},
		{true, "aes128-sha1-modp2048", ""},
		{true, "chacha20poly1305-prfsha256-curve25519", ""},
		{true, "aes128-aes256-sha256-sha1-modp2048-ecp256", ""},
		{true, "aes128gcm16-sha256-ecp256", ""}, // PRF derived from sha256
		{true, "aes256gcm128-prfsha512-ecp521", ""},
		{true, "aes128gcm16-ecp256", "AEAD needs a PRF"},
		{true, "aes128-sha256", "no DH group"},
		{true, "aes128-modp2048", "no integrity algorithm"},
		{true, "sha256-modp2048", "no encryption algorithm"},
		{true, "aes128gcm16-aes128-sha256-ecp256", "mixes AEAD and non-AEAD"},
		{true, "aes128-sha256-modp2048-esn", "esn/noesn belong in ESP"},
		{true, "3des-sha1-modp2048", "3des is weak (64-bit blocks collide after a few GB under one key: Sweet32) and accepted only in a tunnel with legacy_algorithms true"},
		{true, "aes128-md5-modp2048", "md5 is weak (MD5 is broken for collisions) and accepted only in a tunnel with legacy_algorithms true, for a peer that can do nothing better; otherwise use sha256"},
		{true, "aes128-sha256-modp1024", "modp1024 is weak"},
		{true, "aes128-sha256-modp2048-", "empty algorithm name"},
		{true, "aes129-sha256-modp2048", `unknown algorithm "aes129"`},
		{true, "", "empty IKE proposal"},
		{false, "aes128gcm16-ecp256", ""},
		{false, "aes128gcm16", ""},
		{false, "aes256-sha256", ""},
		{false, "aes256-sha256-modp2048-esn", ""},
		{false, "chacha20poly1305-noesn", ""},
		{false, "aes128gcm16-sha256", "drop the integrity algorithm"},
		{false, "aes128", "no integrity algorithm"},
		{false, "aes128-sha256-prfsha256", "PRF algorithms belong in IKE"},
	}
	for _, tt := range tests {
		check, kind := CheckESPProposal, "ESP"
		if tt.ike {
			check, kind = CheckIKEProposal, "IKE"
		}
		err := check(tt.in)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s %q: unexpected error %v", kind, tt.in, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s %q: error %v, want one containing %q", kind, tt.in, err, tt.wantErr)
		}
	}
}

func TestProposalWeaknesses(t *testing.T) {
	tests := []struct {
		in   string
		want string // algorithm:legacy ...
	}{
		{"aes128gcm16-prfsha256-ecp256", ""},
		{"aes128-sha1-modp2048", "sha1:false"},
		{"3des-md5-modp1024", "3des:true md5:true modp1024:true"},
		{"aes256-sha256-prfsha1-modp1536", "prfsha1:false modp1536:true"},
		{"3DES-SHA1", "3des:true sha1:false"},
	}
	for _, tt := range tests {
		var got []string
		for _, w := range ProposalWeaknesses(tt.in) {
			if w.Why == "" || w.Use == "" {
				t.Errorf("%s: %s without a reason or a replacement: %+v", tt.in, w.Algorithm, w)
			}
			got = append(got, fmt.Sprintf("%s:%v", w.Algorithm, w.Legacy))
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("ProposalWeaknesses(%q) = %v, want %s", tt.in, got, tt.want)
		}
		if IsWeakProposal(tt.in) != (tt.want != "") {
			t.Errorf("IsWeakProposal(%q) = %v", tt.in, !(tt.want != ""))
		}
	}
	tun := NewTunnel("old")
	tun.IKEProposals = []string{"aes128-sha1-modp1024", DefaultIKEProposal}
	tun.ESPProposals = []string{DefaultESPProposal, "3des-md5"}
	w := tun.WeakProposals()
	if len(w) != 2 || w[0].Kind != "ike" || w[0].Algorithms() != "sha1, modp1024" || w[1].Kind != "esp" || w[1].Algorithms() != "3des, md5" {
		t.Errorf("WeakProposals = %+v", w)
	}
}

func TestProposalChoicesAreValid(t *testing.T) {
	for _, p := range IKEProposalChoices {
		if err := CheckIKEProposal(p); err != nil {
			t.Errorf("IKE choice %s: %v", p, err)
		}
	}
	for _, p := range ESPProposalChoices {
		if err := CheckESPProposal(p); err != nil {
			t.Errorf("ESP choice %s: %v", p, err)
		}
	}
}

// FuzzCheckProposal: no panics, and whatever is accepted consists only of
// known algorithm names.
func FuzzCheckProposal(f *testing.F) {
	for _, s := range []string{"aes128gcm16-prfsha256-ecp256", "aes256-sha256-modp2048", "3des-sha1", "--", "aes128gcm16-esn"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Add("3des-md5-modp1024", true)
	f.Add("des-blowfish-modp768", false)
	f.Fuzz(func(t *testing.T, s string, ike bool) {
		for _, r := range []ProposalRules{{}, {IKEVersion: IKEv1, Legacy: true}} {
			check := r.CheckESP
			if ike {
				check = r.CheckIKE
			}
			if check(s) != nil {
				continue
			}
			for _, tok := range strings.Split(s, "-") {
				_, known := proposalTokens[tok]
				_, legacy := legacyTokens[tok]
				if !known && !(legacy && r.Legacy) {
					t.Fatalf("%q accepted under %+v with token %q", s, r, tok)
				}
			}
		}
	})
}
