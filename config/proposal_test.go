package config

import (
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
		{true, "3des-sha1-modp2048", "3des is insecure"},
		{true, "aes128-md5-modp2048", "md5 is broken"},
		{true, "aes128-sha256-modp1024", "modp1024 is too weak"},
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
	f.Fuzz(func(t *testing.T, s string, ike bool) {
		check := CheckESPProposal
		if ike {
			check = CheckIKEProposal
		}
		if check(s) != nil {
			return
		}
		for _, tok := range strings.Split(s, "-") {
			if _, ok := proposalTokens[tok]; !ok {
				t.Fatalf("%q accepted with unknown token %q", s, tok)
			}
		}
	})
}
