package ike

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math/big"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RFC 4231 test case 1 (key 0x0b*20, "Hi There") and 2 ("Jefe").
func TestPRFRFC4231(t *testing.T) {
	key1 := bytes.Repeat([]byte{0x0b}, 20)
	tests := []struct {
		id        uint16
		key, data []byte
		want      string
	}{
		{PRF_HMAC_SHA2_256, key1, []byte("Hi There"), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
		{PRF_HMAC_SHA2_384, key1, []byte("Hi There"), "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59cfaea9ea9076ede7f4af152e8b2fa9cb6"},
		{PRF_HMAC_SHA2_512, key1, []byte("Hi There"), "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cdedaa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854"},
		{PRF_HMAC_SHA2_256, []byte("Jefe"), []byte("what do ya want for nothing?"), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
	}
	for _, tt := range tests {
		f, err := newPRF(tt.id)
		if err != nil {
			t.Fatal(err)
		}
		// Split the data to exercise the multi-part form.
		if got := hex.EncodeToString(f.sum(tt.key, tt.data[:2], tt.data[2:])); got != tt.want {
			t.Errorf("PRF %d: got %s, want %s", tt.id, got, tt.want)
		}
	}
}

func TestPRFPlus(t *testing.T) {
	f, _ := newPRF(PRF_HMAC_SHA2_256)
	key, seed := []byte("key"), []byte("seed")
	out, err := f.plus(key, seed, 80)
	if err != nil {
		t.Fatal(err)
	}
	t1 := f.sum(key, seed, []byte{1})
	t2 := f.sum(key, t1, seed, []byte{2})
	t3 := f.sum(key, t2, seed, []byte{3})
	want := append(append(t1, t2...), t3...)[:80]
	if !bytes.Equal(out, want) {
		t.Errorf("prf+ = %x, want T1|T2|T3 = %x", out, want)
	}
	if _, err := f.plus(key, seed, 256*32); err == nil {
		t.Error("prf+ beyond 255 blocks did not fail")
	}
}

// RFC 5903 section 8.1 (256-bit random ECP group) and RFC 7748 section 6.1.
func TestDHVectors(t *testing.T) {
	t.Run("ecp256", func(t *testing.T) {
		c := ECP256.curve()
		i, err := c.NewPrivateKey(unhex(t, "C88F01F510D9AC3F70A292DAA2316DE544E9AAB8AFE84049C62A9C57862D1433"))
		if err != nil {
			t.Fatal(err)
		}
		k := &ecKey{group: ECP256, priv: i}
		wantGi := "DAD0B65394221CF9B051E1FECA5787D098DFE637FC90B9EF945D0C3772581180" + "5271A0461CDB8252D61F1C456FA3E59AB1F45B33ACCF5F58389E0577B8990BB3"
		if got := hex.EncodeToString(k.Public()); got != lower(wantGi) {
			t.Errorf("KE data g^i = %s, want x||y %s", got, wantGi)
		}
		gr := unhex(t, "D12DFB5289C8D4F81208B70270398C342296970A0BCCB74C736FC7554494BF63"+"56FBF3CA366CC23E8157854C13C58D6AAC23F046ADA30F8353E74F33039872AB")
		s, err := k.Shared(gr)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := hex.EncodeToString(s), lower("D6840F6B42F6EDAFD13116E0E12565202FEF8E9ECE7DCE03812464D04B9442DE"); got != want {
			t.Errorf("g^ir = %s, want %s", got, want)
		}
		bad := append([]byte(nil), gr...)
		bad[63] ^= 1
		if _, err := k.Shared(bad); err == nil {
			t.Error("point off the curve accepted")
		}
	})
	t.Run("curve25519", func(t *testing.T) {
		c := Curve25519.curve()
		a, _ := c.NewPrivateKey(unhex(t, "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"))
		k := &ecKey{group: Curve25519, priv: a}
		if got, want := hex.EncodeToString(k.Public()), "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"; got != want {
			t.Errorf("Alice's public key %s, want %s", got, want)
		}
		s, err := k.Shared(unhex(t, "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := hex.EncodeToString(s), "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"; got != want {
			t.Errorf("shared %s, want %s", got, want)
		}
		if _, err := k.Shared(make([]byte, 32)); err == nil {
			t.Error("low-order point giving an all-zero secret accepted")
		}
	})
}

func lower(s string) string { return string(bytes.ToLower([]byte(s))) }

func TestDHAgreement(t *testing.T) {
	for _, g := range []DHGroup{MODP2048, MODP3072, MODP4096, ECP256, ECP384, ECP521, Curve25519} {
		a, err := newDHKey(g, rand.Reader)
		if err != nil {
			t.Fatalf("%v: %v", g, err)
		}
		b, _ := newDHKey(g, rand.Reader)
		sa, err1 := a.Shared(b.Public())
		sb, err2 := b.Shared(a.Public())
		if err1 != nil || err2 != nil || !bytes.Equal(sa, sb) {
			t.Errorf("%v: shared secrets differ (%v, %v)", g, err1, err2)
		}
		wantLen := map[DHGroup]int{MODP2048: 256, MODP3072: 384, MODP4096: 512, ECP256: 64, ECP384: 96, ECP521: 132, Curve25519: 32}[g]
		if len(a.Public()) != wantLen {
			t.Errorf("%v: KE data of %d bytes, want %d", g, len(a.Public()), wantLen)
		}
		if p := g.modp(); p != nil {
			if _, err := a.Shared(new(big.Int).Sub(p, big.NewInt(1)).FillBytes(make([]byte, wantLen))); err == nil {
				t.Errorf("%v: p-1 accepted as a public value", g)
			}
		}
	}
}

// TestMODPPrimes checks the RFC 3526 constants are safe primes of the
// right size, which a transcription error would break.
func TestMODPPrimes(t *testing.T) {
	for g, bits := range map[DHGroup]int{MODP2048: 2048, MODP3072: 3072, MODP4096: 4096} {
		p := g.modp()
		q := new(big.Int).Rsh(p, 1)
		if p.BitLen() != bits || !p.ProbablyPrime(1) || !q.ProbablyPrime(1) {
			t.Errorf("%v: not a %d-bit safe prime", g, bits)
		}
	}
}

func TestSKRoundTrip(t *testing.T) {
	for _, s := range []string{"aes128gcm16-prfsha256-ecp256", "aes256gcm16-prfsha384-ecp384", "aes256-sha256-modp2048",
		"aes128-sha1-modp2048", "chacha20poly1305-prfsha256-curve25519", "aes256gcm12-prfsha512-ecp521", "aes192-sha512-ecp256", "aes128-sha384-ecp256"} {
		p := MustParseProposals(ProtoIKE, s)[0]
		ni, nr := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
		ki, _, _, err := deriveIKEKeys(p, []byte("seed"), ni, nr, 1, 2, true)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		kr, _, _, _ := deriveIKEKeys(p, []byte("seed"), ni, nr, 1, 2, false)
		h := Header{SPIi: 1, SPIr: 2, Version: Version, Exchange: IKE_AUTH, Flags: FlagInitiator, MessageID: 1}
		inner := []Payload{&ID{IDType: IDFQDN, Data: []byte("gwA")}, &Nonce{Data: make([]byte, 17)}}
		pkt, err := ki.out.seal(h, inner, rand.Reader)
		if err != nil {
			t.Fatalf("%s: seal: %v", s, err)
		}
		m, err := DecodeMessage(pkt)
		if err != nil {
			t.Fatalf("%s: sealed message does not decode: %v", s, err)
		}
		got, err := kr.in.open(pkt, m.Header, m.Payloads[0].(*Encrypted))
		if err != nil || len(got) != 2 || string(got[0].(*ID).Data) != "gwA" {
			t.Errorf("%s: open: %v, %+v", s, err, got)
		}
		// Our own direction must not open what we sent.
		if _, err := ki.in.open(pkt, m.Header, m.Payloads[0].(*Encrypted)); err == nil {
			t.Errorf("%s: opened with the wrong direction's key", s)
		}
		// Any flipped bit, header included, must fail.
		for _, i := range []int{3, 20, len(pkt) / 2, len(pkt) - 1} {
			bad := append([]byte(nil), pkt...)
			bad[i] ^= 0x40
			mb, err := DecodeMessage(bad)
			if err != nil {
				continue
			}
			sk, ok := mb.Payloads[len(mb.Payloads)-1].(*Encrypted)
			if !ok {
				continue
			}
			if _, err := kr.in.open(bad, mb.Header, sk); !errors.Is(err, errICV) {
				t.Errorf("%s: bit flipped at %d: got %v, want %v", s, i, err, errICV)
			}
		}
	}
}

func TestChildKeymatLayout(t *testing.T) {
	f, _ := newPRF(PRF_HMAC_SHA2_256)
	p := MustParseProposals(ProtoESP, "aes128gcm16")[0]
	k, err := deriveChildKeys(f, []byte("skd"), p, nil, []byte("ni"), []byte("nr"))
	if err != nil {
		t.Fatal(err)
	}
	km, _ := f.plus([]byte("skd"), []byte("ninr"), 40)
	if !bytes.Equal(k.encI, km[:20]) || !bytes.Equal(k.encR, km[20:]) || len(k.integI) != 0 {
		t.Errorf("AES-GCM-128 KEYMAT: want 16+4 bytes for each direction, initiator's first")
	}
	p = MustParseProposals(ProtoESP, "aes256-sha384")[0]
	k, _ = deriveChildKeys(f, []byte("skd"), p, []byte("gir"), []byte("ni"), []byte("nr"))
	km, _ = f.plus([]byte("skd"), []byte("girninr"), 2*(32+48))
	if !bytes.Equal(k.encI, km[:32]) || !bytes.Equal(k.integI, km[32:80]) || !bytes.Equal(k.encR, km[80:112]) || !bytes.Equal(k.integR, km[112:]) {
		t.Errorf("AES-256-CBC/SHA-384 KEYMAT: order must be encr_i, integ_i, encr_r, integ_r")
	}
}

func TestPSKAuth(t *testing.T) {
	f, _ := newPRF(PRF_HMAC_SHA2_256)
	id := &ID{IDType: IDFQDN, Data: []byte("gwA")}
	msg, nonce, skp := []byte("first message"), []byte("peer nonce"), []byte("SK_pi")
	got := pskAuth(f, []byte("secret"), msg, nonce, skp, id)
	// Spelled out from RFC 7296 2.15.
	want := f.sum(f.sum([]byte("secret"), []byte("Key Pad for IKEv2")), msg, nonce, f.sum(skp, []byte{byte(IDFQDN), 0, 0, 0}, []byte("gwA")))
	if !bytes.Equal(got, want) {
		t.Errorf("AUTH = %x, want %x", got, want)
	}
	if !verifyPSKAuth(f, []byte("secret"), msg, nonce, skp, id, got) || verifyPSKAuth(f, []byte("other"), msg, nonce, skp, id, got) {
		t.Error("verifyPSKAuth does not tell the right secret from a wrong one")
	}
}

// The legacy MODP groups are the safe primes of RFC 2409 and RFC 3526.
func TestLegacyMODPPrimes(t *testing.T) {
	for _, g := range []DHGroup{MODP1024, MODP1536} {
		p := g.modp()
		q := new(big.Int).Rsh(p, 1)
		if !p.ProbablyPrime(20) || !q.ProbablyPrime(20) || p.BitLen() != map[DHGroup]int{MODP1024: 1024, MODP1536: 1536}[g] {
			t.Errorf("%v: not a safe prime of the right size", g)
		}
	}
}
