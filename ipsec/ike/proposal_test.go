package ike

import (
	"slices"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/ipsec"
)

func TestProposalRoundTrip(t *testing.T) {
	tests := []struct {
		proto ProtocolID
		in    string
		want  string // printed form; "" = same as in
	}{
		{ProtoIKE, "aes128gcm16-prfsha256-ecp256", ""},
		{ProtoIKE, "aes256gcm16-prfsha384-ecp384", ""},
		{ProtoIKE, "aes256-sha256-modp2048", ""},
		{ProtoIKE, "aes128-sha1-modp2048", ""},
		{ProtoIKE, "chacha20poly1305-prfsha256-curve25519", ""},
		{ProtoIKE, "aes256-sha256-prfsha384-modp4096", ""},
		{ProtoIKE, "aes128-aes256-sha256-sha1-ecp256-modp3072", ""},
		{ProtoIKE, "AES128GCM128-PRFSHA256-X25519", "aes128gcm16-prfsha256-curve25519"},
		{ProtoESP, "aes128gcm16", ""},
		{ProtoESP, "aes256-sha256", ""},
		{ProtoESP, "aes256-sha256-noesn", "aes256-sha256"},
		{ProtoESP, "aes128gcm16-ecp256-esn", ""},
		{ProtoESP, "aes128gcm8", ""},
	}
	for _, tt := range tests {
		p, err := ParseProposal(tt.proto, tt.in)
		if err != nil {
			t.Errorf("ParseProposal(%q): %v", tt.in, err)
			continue
		}
		want := tt.want
		if want == "" {
			want = tt.in
		}
		if got := p.String(); got != want {
			t.Errorf("ParseProposal(%q).String() = %q, want %q", tt.in, got, want)
		}
		w := p.ToWire(1, nil)
		back, ok := ProposalFromWire(w)
		if !ok || back.String() != want {
			t.Errorf("%q through the wire: got %q (ok %v), want %q", tt.in, back.String(), ok, want)
		}
	}
}

func TestProposalErrors(t *testing.T) {
	for _, tt := range []struct {
		proto ProtocolID
		in    string
	}{
		{ProtoIKE, ""},
		{ProtoIKE, "aes128gcm16-ecp256"},                  // AEAD without PRF
		{ProtoIKE, "aes128-sha256"},                       // no DH
		{ProtoIKE, "aes128gcm16-sha256-prfsha256-ecp256"}, // AEAD with integrity
		{ProtoIKE, "aes128-aes128gcm16-sha256-ecp256"},    // mixed
		{ProtoIKE, "aes128gcm8-prfsha256-ecp256"},         // GCM-8 for IKE
		{ProtoIKE, "des-md5-modp1024"},                    // broken, never negotiated
		{ProtoESP, "blowfish-sha1"},                       // never negotiated
		{ProtoIKE, "aes128-md5-modp768"},                  // too small a group
		{ProtoESP, "aes128"},                              // no integrity
		{ProtoESP, "aes128gcm16-prfsha256"},               // PRF in ESP
		{ProtoIKE, "aes128-sha256-ecp256-esn"},
	} {
		if p, err := ParseProposal(tt.proto, tt.in); err == nil {
			t.Errorf("ParseProposal(%q) = %v, want an error", tt.in, p)
		}
	}
}

// The legacy algorithms parse (the config decides whether a tunnel may use
// them) and say that they are legacy; the defaults hold none of them.
func TestLegacyProposals(t *testing.T) {
	for _, s := range []string{"3des-md5-modp1024", "aes128-sha1-modp1536", "3des-sha1"} {
		proto := ProtoIKE
		if s == "3des-sha1" {
			proto = ProtoESP
		}
		p, err := ParseProposal(proto, s)
		if err != nil {
			t.Fatalf("ParseProposal(%q): %v", s, err)
		}
		if p.String() != s || !p.Legacy() {
			t.Errorf("%q: prints %q, legacy %v", s, p, p.Legacy())
		}
	}
	for _, p := range append(DefaultIKEProposals(), DefaultESPProposals()...) {
		if p.Legacy() {
			t.Errorf("default proposal %s is legacy", p)
		}
	}
	_, err := ParseProposal(ProtoESP, "des-sha1")
	if err == nil || !strings.Contains(err.Error(), "aes") {
		t.Errorf("des: %v, want a refusal naming what to use instead", err)
	}
}

func TestSelectProposal(t *testing.T) {
	wire := func(proto ProtocolID, s string) []WireProposal {
		var w []WireProposal
		for i, p := range MustParseProposals(proto, s) {
			w = append(w, p.ToWire(uint8(i+1), nil))
		}
		return w
	}
	tests := []struct {
		name          string
		proto         ProtocolID
		ours, theirs  string
		ke            DHGroup
		want          string // "" = no proposal chosen
		wantTheirsIdx int
	}{
		{"exact", ProtoIKE, "aes128gcm16-prfsha256-ecp256", "aes128gcm16-prfsha256-ecp256", ECP256, "aes128gcm16-prfsha256-ecp256", 0},
		{"our order wins", ProtoIKE, "aes256gcm16-prfsha384-ecp384,aes128gcm16-prfsha256-ecp256",
			"aes128gcm16-prfsha256-ecp256,aes256gcm16-prfsha384-ecp384", ECP256, "aes256gcm16-prfsha384-ecp384", 1},
		{"KE group preferred", ProtoIKE, "aes128gcm16-prfsha256-ecp384-ecp256", "aes128gcm16-prfsha256-ecp256-ecp384", ECP256, "aes128gcm16-prfsha256-ecp256", 0},
		{"within a proposal our first", ProtoIKE, "aes256-aes128-sha256-sha1-modp2048", "aes128-aes256-sha1-sha256-modp2048", MODP2048, "aes256-sha256-modp2048", 0},
		{"mismatch", ProtoIKE, "aes128gcm16-prfsha256-ecp256", "aes256-sha256-modp2048", MODP2048, "", -1},
		{"ESP PFS required by peer, we have none", ProtoESP, "aes128gcm16", "aes128gcm16-ecp256", 0, "", -1},
		{"ESP PFS both", ProtoESP, "aes128gcm16-ecp256", "aes128gcm16-ecp256", 0, "aes128gcm16-ecp256", 0},
		{"ESP esn or not", ProtoESP, "aes256-sha256-esn-noesn", "aes256-sha256", 0, "aes256-sha256", 0},
	}
	for _, tt := range tests {
		got, idx, ok := selectProposal(MustParseProposals(tt.proto, tt.ours), wire(tt.proto, tt.theirs), tt.ke)
		if tt.want == "" {
			if ok {
				t.Errorf("%s: chose %v, want no proposal", tt.name, got)
			}
			continue
		}
		if !ok || got.String() != tt.want || idx != tt.wantTheirsIdx {
			t.Errorf("%s: got %q from peer proposal %d (ok %v), want %q from %d", tt.name, got, idx, ok, tt.want, tt.wantTheirsIdx)
		}
		if !acceptable(MustParseProposals(tt.proto, tt.theirs), got) {
			t.Errorf("%s: chosen %q is not acceptable to the peer that offered %q", tt.name, got, tt.theirs)
		}
	}
}

func TestESPTransform(t *testing.T) {
	tests := []struct {
		in   string
		want ipsec.Transform
	}{
		{"aes128gcm16", ipsec.Transform{Encryption: "rfc4106(gcm(aes))", EncKeyBits: 128, ICVBits: 128}},
		{"aes256gcm16", ipsec.Transform{Encryption: "rfc4106(gcm(aes))", EncKeyBits: 256, ICVBits: 128}},
		{"chacha20poly1305", ipsec.Transform{Encryption: "rfc7539esp(chacha20,poly1305)", EncKeyBits: 256, ICVBits: 128}},
		{"aes256-sha256", ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 256, Integrity: "hmac(sha256)", ICVBits: 128}},
		{"aes128-sha1", ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 128, Integrity: "hmac(sha1)", ICVBits: 96}},
		{"aes128-sha384", ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 128, Integrity: "hmac(sha384)", ICVBits: 192}},
		{"aes128-sha512", ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 128, Integrity: "hmac(sha512)", ICVBits: 256}},
	}
	for _, tt := range tests {
		got, err := MustParseProposals(ProtoESP, tt.in)[0].ESPTransform()
		if err != nil || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestDefaultsParse(t *testing.T) {
	for _, p := range append(DefaultIKEProposals(), DefaultESPProposals()...) {
		if _, err := ParseProposal(p.Protocol, p.String()); err != nil {
			t.Errorf("default %q does not parse back: %v", p, err)
		}
	}
}

func FuzzParseProposal(f *testing.F) {
	for _, s := range []string{"aes128gcm16-prfsha256-ecp256", "aes256-sha256-modp2048", "aes128gcm16-ecp256-esn", "chacha20poly1305", "x-y", ""} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, ike bool) {
		proto := ProtoESP
		if ike {
			proto = ProtoIKE
		}
		p, err := ParseProposal(proto, s)
		if err != nil {
			return
		}
		back, err := ParseProposal(proto, p.String())
		if err != nil || back.String() != p.String() {
			t.Fatalf("%q printed as %q, which parses to %q (%v)", s, p.String(), back.String(), err)
		}
		if _, ok := ProposalFromWire(p.ToWire(1, nil)); !ok {
			t.Fatalf("%q does not survive the wire", s)
		}
	})
}

func FuzzParseIdentity(f *testing.F) {
	for _, s := range []string{"gwA", "10.0.0.1", "fd00::1", "user@example.org", "@fqdn", "@#0a0b", "@#zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseIdentity(s)
		if err != nil {
			return
		}
		back, err := ParseIdentity(id.String())
		if err != nil || back.Type != id.Type || string(back.Data) != string(id.Data) {
			// FQDNs that look like something else print ambiguously; the
			// "@" form is the unambiguous one.
			if id.Type == IDFQDN {
				if b2, err := ParseIdentity("@" + id.String()); err == nil && string(b2.Data) == string(id.Data) {
					return
				}
			}
			t.Fatalf("%q: identity %v prints as %q which parses to %v (%v)", s, id, id.String(), back, err)
		}
	})
}

// TestUnsupportedNamedInWords: what a peer offers is printed in
// strongSwan's words also when flashgate does not run it, with the key
// length when the peer sends one, and never by transform number.
func TestUnsupportedNamedInWords(t *testing.T) {
	for _, c := range []struct {
		w    WireProposal
		want string
	}{
		{WireProposal{Protocol: ProtoIKE, Transforms: []WireTransform{{Type: TransformENCR, ID: 3}, {Type: TransformPRF, ID: PRF_HMAC_SHA1},
			{Type: TransformINTEG, ID: AUTH_HMAC_SHA1_96}, {Type: TransformDH, ID: 5}}}, "3des-sha1-modp1536"},
		{WireProposal{Protocol: ProtoIKE, Transforms: []WireTransform{{Type: TransformENCR, ID: 23, Attrs: []TransformAttribute{{Type: AttrKeyLength, TV: true, Short: 256}}},
			{Type: TransformPRF, ID: 4}, {Type: TransformINTEG, ID: 5}, {Type: TransformDH, ID: 28}}}, "camellia256-aesxcbc-prfaesxcbc-ecp256bp"},
		{WireProposal{Protocol: ProtoESP, Transforms: []WireTransform{{Type: TransformENCR, ID: 13, Attrs: []TransformAttribute{{Type: AttrKeyLength, TV: true, Short: 128}}},
			{Type: TransformINTEG, ID: 7}, {Type: TransformESN, ID: ESN_NO}}}, "aes128ctr-sha1_160"},
		{WireProposal{Protocol: ProtoIKE, Transforms: []WireTransform{{Type: TransformENCR, ID: 99}, {Type: TransformPRF, ID: 99},
			{Type: TransformINTEG, ID: 99}, {Type: TransformDH, ID: 99}}}, "encr99_0-integ99-prf99-dh99"},
	} {
		p, _ := ProposalFromWire(c.w)
		if got := p.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.w.Transforms, got, c.want)
		}
	}
}

// Rank orders a peer's proposals once, the defaults too when none are
// configured, and what the SAs then offer is that order without ranking
// again; the shared list is not changed by an IKE_AUTH's DH-less copy.
func TestPeerConfigRank(t *testing.T) {
	calls := 0
	reverse := func(ps []Proposal) []Proposal {
		calls++
		slices.Reverse(ps)
		return ps
	}
	c := &PeerConfig{ESPProposals: MustParseProposals(ProtoESP, "aes128gcm16-ecp256,aes256-sha256-modp2048"), Ranking: reverse}
	c.Rank()
	if c.Ranking != nil || calls != 2 {
		t.Fatalf("after Rank: Ranking set %v, ranked %d times; want cleared, 2 (IKE and ESP)", c.Ranking != nil, calls)
	}
	if got, want := ProposalsString(c.espProposals()), "aes256-sha256-modp2048,aes128gcm16-ecp256"; got != want {
		t.Errorf("ESP proposals after Rank: %s, want %s", got, want)
	}
	def := DefaultIKEProposals()
	slices.Reverse(def)
	if got, want := ProposalsString(c.ikeProposals()), ProposalsString(def); got != want {
		t.Errorf("IKE proposals after Rank: %s, want the defaults reversed %s", got, want)
	}
	for range 3 {
		c.ikeProposals()
		c.espProposals()
	}
	if calls != 2 {
		t.Errorf("ranked %d times after Rank; want no more", calls)
	}
	// Without a Ranking, the defaults are shared and stay as parsed.
	var plain PeerConfig
	if got, want := ProposalsString(plain.ikeProposals()), ProposalsString(DefaultIKEProposals()); got != want {
		t.Errorf("default IKE proposals %s, want %s", got, want)
	}
	if len(c.ESPProposals[1].DH) == 0 || c.ESPProposals[1].DH[0] != ECP256 {
		t.Errorf("the ranked ESP list lost its DH group: %s", ProposalsString(c.ESPProposals))
	}
}
