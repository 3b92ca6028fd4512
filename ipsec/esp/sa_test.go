package esp

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/flashgate/flashgate/ipsec"
)

type transformCase struct {
	name     string
	t        ipsec.Transform
	encBytes int // including salt
	intBytes int
}

var transforms = []transformCase{
	{"aes128gcm16", ipsec.Transform{Encryption: EncAESGCM, EncKeyBits: 128, ICVBits: 128}, 20, 0},
	{"aes256gcm16", ipsec.Transform{Encryption: EncAESGCM, EncKeyBits: 256, ICVBits: 128}, 36, 0},
	{"aes128gcm12", ipsec.Transform{Encryption: EncAESGCM, EncKeyBits: 128, ICVBits: 96}, 20, 0},
	{"chacha20poly1305", ipsec.Transform{Encryption: EncChaPoly, EncKeyBits: 256, ICVBits: 128}, 36, 0},
	{"aes128-sha1", ipsec.Transform{Encryption: EncAESCBC, EncKeyBits: 128, Integrity: IntegSHA1, ICVBits: 96}, 16, 20},
	{"aes128-sha256", ipsec.Transform{Encryption: EncAESCBC, EncKeyBits: 128, Integrity: IntegSHA256, ICVBits: 128}, 16, 32},
	{"aes256-sha384", ipsec.Transform{Encryption: EncAESCBC, EncKeyBits: 256, Integrity: IntegSHA384, ICVBits: 192}, 32, 48},
	{"aes256-sha512", ipsec.Transform{Encryption: EncAESCBC, EncKeyBits: 256, Integrity: IntegSHA512, ICVBits: 256}, 32, 64},
	{"3des-sha1", ipsec.Transform{Encryption: Enc3DESCBC, EncKeyBits: 192, Integrity: IntegSHA1, ICVBits: 96}, 24, 20},
	{"3des-md5", ipsec.Transform{Encryption: Enc3DESCBC, EncKeyBits: 192, Integrity: IntegMD5, ICVBits: 96}, 24, 16},
}

func seqBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i)*7
	}
	return b
}

var (
	lanA = netip.MustParsePrefix("10.10.1.0/24")
	lanB = netip.MustParsePrefix("10.10.2.0/24")
)

// testPair returns the outbound SA of gateway A and the matching inbound SA
// of gateway B, keyed alike.
func testPair(t testing.TB, tc transformCase, spi uint32) (out, in *SA) {
	t.Helper()
	mk := func(inbound bool) *ipsec.ChildSA {
		c := &ipsec.ChildSA{
			ReqID: 1, SPI: spi, Inbound: inbound, Transform: tc.t,
			Src: netip.MustParseAddr("10.10.0.1"), Dst: netip.MustParseAddr("10.10.0.2"),
			EncKey: seqBytes(tc.encBytes, 1), ReplayWindow: 1024,
		}
		if tc.intBytes > 0 {
			c.IntegKey = seqBytes(tc.intBytes, 100)
		}
		if inbound { // B's view
			c.LocalTS, c.RemoteTS = []netip.Prefix{lanB}, []netip.Prefix{lanA}
		} else {
			c.LocalTS, c.RemoteTS = []netip.Prefix{lanA}, []netip.Prefix{lanB}
		}
		return c
	}
	var err error
	if out, err = NewSA(mk(false), nil); err != nil {
		t.Fatal(err)
	}
	if in, err = NewSA(mk(true), nil); err != nil {
		t.Fatal(err)
	}
	return out, in
}

// ipv4Packet builds an IPv4/UDP packet from 10.10.1.2 to 10.10.2.2 of n bytes.
func ipv4Packet(n int, seed byte) []byte {
	if n < 28 {
		n = 28
	}
	p := seqBytes(n, seed)
	p[0], p[1] = 0x45, 0
	binary.BigEndian.PutUint16(p[2:], uint16(n))
	p[8], p[9] = 64, 17
	copy(p[12:16], []byte{10, 10, 1, 2})
	copy(p[16:20], []byte{10, 10, 2, 2})
	binary.BigEndian.PutUint16(p[10:], 0)
	binary.BigEndian.PutUint16(p[10:], ^checksum(p[:20], 0))
	return p
}

// encapCopy seals a copy of inner and returns the ESP packet.
func encapCopy(t testing.TB, sa *SA, inner []byte) []byte {
	t.Helper()
	buf := make([]byte, Headroom+len(inner), Headroom+len(inner)+Tailroom)
	copy(buf[Headroom:], inner)
	pkt, err := sa.Encap(buf, Headroom, len(inner))
	if err != nil {
		t.Fatalf("Encap: %v", err)
	}
	return append([]byte(nil), pkt...)
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range transforms {
		t.Run(tc.name, func(t *testing.T) {
			out, in := testPair(t, tc, 0x1000)
			for _, n := range []int{28, 29, 30, 31, 32, 33, 64, 100, 1400, 1500, 8192} {
				inner := ipv4Packet(n, byte(n))
				pkt := encapCopy(t, out, inner)
				if want := out.Overhead(n) + n; len(pkt) != want {
					t.Errorf("n=%d: ESP packet is %d bytes, want %d", n, len(pkt), want)
				}
				if bytes.Contains(pkt, inner[20:]) {
					t.Errorf("n=%d: payload visible in ESP packet", n)
				}
				got, err := in.Decap(pkt)
				if err != nil {
					t.Fatalf("n=%d: Decap: %v", n, err)
				}
				if !bytes.Equal(got, inner) {
					t.Fatalf("n=%d: inner packet differs after round trip", n)
				}
			}
			if s := in.Snapshot(); s.Packets != 11 || s.AuthFailures != 0 {
				t.Errorf("inbound counters %+v, want 11 packets and no failures", s)
			}
		})
	}
}

// TestGCMKnownAnswer checks the key/salt split and nonce construction
// against McGrew and Viega's GCM test case 4 (AES-128, 96-bit IV
// cafebabe facedbaddecaf888), read as salt cafebabe and explicit IV
// facedbaddecaf888, which is exactly how RFC 4106 builds its nonce.
func TestGCMKnownAnswer(t *testing.T) {
	key, _ := hex.DecodeString("feffe9928665731c6d6a8f9467308308" + "cafebabe")
	plain, _ := hex.DecodeString("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
	aad, _ := hex.DecodeString("feedfacedeadbeeffeedfacedeadbeefabaddad2")
	want, _ := hex.DecodeString("42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091" + "5bc94fbc3221a5db94fae95ae7121a47")
	s, err := newSuite(ipsec.Transform{Encryption: EncAESGCM, EncKeyBits: 128, ICVBits: 128}, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc := s.newScratch()
	iv, _ := hex.DecodeString("facedbaddecaf888")
	copy(sc.nonce[saltLen:], iv)
	if got := s.aead.Seal(nil, sc.nonce[:], plain, aad); !bytes.Equal(got, want) {
		t.Fatalf("GCM test case 4:\n got %x\nwant %x", got, want)
	}
}

// TestWireFormat rebuilds each ESP packet independently from RFC 4303,
// RFC 4106, RFC 7634 and RFC 4868 with the standard library and compares
// it byte for byte with what Encap produced.
func TestWireFormat(t *testing.T) {
	for _, tc := range []transformCase{transforms[0], transforms[3], transforms[5]} {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := testPair(t, tc, 0xc0ffee01)
			encKey := seqBytes(tc.encBytes, 1)
			for seq := uint32(1); seq <= 3; seq++ {
				inner := ipv4Packet(61+int(seq), byte(seq))
				got := encapCopy(t, out, inner)

				var want []byte
				want = binary.BigEndian.AppendUint32(want, 0xc0ffee01)
				want = binary.BigEndian.AppendUint32(want, seq)
				align := 4
				if tc.t.Encryption == EncAESCBC {
					align = 16
				}
				plain := append([]byte(nil), inner...)
				for i := 1; (len(plain)+2)%align != 0; i++ {
					plain = append(plain, byte(i))
				}
				plain = append(plain, byte(len(plain)-len(inner)), 4)
				switch tc.t.Encryption {
				case EncAESGCM, EncChaPoly:
					var aead cipher.AEAD
					k := encKey[:len(encKey)-4]
					if tc.t.Encryption == EncAESGCM {
						b, _ := aes.NewCipher(k)
						aead, _ = cipher.NewGCM(b)
					} else {
						aead, _ = chacha20poly1305.New(k)
					}
					iv := binary.BigEndian.AppendUint64(nil, uint64(seq))
					nonce := append(append([]byte(nil), encKey[len(encKey)-4:]...), iv...)
					aad := append([]byte(nil), want[:8]...)
					want = append(want, iv...)
					want = aead.Seal(want, nonce, plain, aad)
				case EncAESCBC:
					iv := got[8:24] // random by design: take it from the packet
					want = append(want, iv...)
					b, _ := aes.NewCipher(encKey)
					ct := make([]byte, len(plain))
					cipher.NewCBCEncrypter(b, iv).CryptBlocks(ct, plain)
					want = append(want, ct...)
					m := hmac.New(sha256.New, seqBytes(tc.intBytes, 100))
					m.Write(want)
					want = append(want, m.Sum(nil)[:16]...)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("seq %d:\n got %x\nwant %x", seq, got, want)
				}
			}
		})
	}
}

func TestCBCIVsDiffer(t *testing.T) {
	out, _ := testPair(t, transforms[5], 0x2000)
	a := encapCopy(t, out, ipv4Packet(100, 1))
	b := encapCopy(t, out, ipv4Packet(100, 1))
	if bytes.Equal(a[8:24], b[8:24]) {
		t.Fatalf("two packets share the CBC IV %x", a[8:24])
	}
}

func TestDecapErrors(t *testing.T) {
	tc := transforms[0]
	cbc := transforms[5]
	type testCase struct {
		name    string
		tc      transformCase
		mangle  func(out *SA, pkt []byte) []byte
		want    error
		counter func(s CounterSnapshot) uint64
	}
	outside := func() []byte { // a packet from outside the selectors
		p := ipv4Packet(60, 3)
		copy(p[12:16], []byte{192, 0, 2, 1})
		return p
	}
	cases := []testCase{
		{"truncated header", tc, func(_ *SA, p []byte) []byte { return p[:12] }, ErrTruncated, nil},
		{"truncated ICV", tc, func(_ *SA, p []byte) []byte { return p[:len(p)-1] }, ErrTruncated, nil},
		{"cbc not block aligned", cbc, func(_ *SA, p []byte) []byte { return append(p, 0) }, ErrTruncated, nil},
		{"bad ICV", tc, func(_ *SA, p []byte) []byte { p[len(p)-1] ^= 1; return p }, ErrAuth,
			func(s CounterSnapshot) uint64 { return s.AuthFailures }},
		{"bad ciphertext", tc, func(_ *SA, p []byte) []byte { p[20] ^= 0x80; return p }, ErrAuth,
			func(s CounterSnapshot) uint64 { return s.AuthFailures }},
		{"bad seq (in AAD)", tc, func(_ *SA, p []byte) []byte { p[7]++; return p }, ErrAuth,
			func(s CounterSnapshot) uint64 { return s.AuthFailures }},
		{"cbc bad HMAC", cbc, func(_ *SA, p []byte) []byte { p[len(p)-3] ^= 4; return p }, ErrAuth,
			func(s CounterSnapshot) uint64 { return s.AuthFailures }},
		{"seq zero", tc, func(_ *SA, p []byte) []byte { copy(p[4:8], []byte{0, 0, 0, 0}); return p }, ErrReplay,
			func(s CounterSnapshot) uint64 { return s.ReplayDrops }},
		{"outside selectors", tc, func(out *SA, _ []byte) []byte { return encapCopy(t, out, outside()) }, ErrPolicy,
			func(s CounterSnapshot) uint64 { return s.PolicyDrops }},
		{"not IP", tc, func(out *SA, _ []byte) []byte {
			// Seal a valid IPv4 packet, then claim IPv6 in a re-sealed trailer.
			p := ipv4Packet(60, 9)
			pkt := sealRaw(t, out, p, 41)
			return pkt
		}, ErrBadInner, func(s CounterSnapshot) uint64 { return s.BadPadding }},
		{"dummy", tc, func(out *SA, _ []byte) []byte { return sealRaw(t, out, ipv4Packet(40, 1), 59) }, ErrDummy, nil},
		{"unknown next header", tc, func(out *SA, _ []byte) []byte { return sealRaw(t, out, ipv4Packet(40, 1), 17) }, ErrBadPadding,
			func(s CounterSnapshot) uint64 { return s.BadPadding }},
		{"bad pad bytes", tc, func(out *SA, _ []byte) []byte { return sealBadPad(t, out) }, ErrBadPadding,
			func(s CounterSnapshot) uint64 { return s.BadPadding }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, in := testPair(t, c.tc, 0x3000)
			pkt := c.mangle(out, encapCopy(t, out, ipv4Packet(60, 7)))
			_, err := in.Decap(pkt)
			if !errors.Is(err, c.want) {
				t.Fatalf("Decap error %v, want %v", err, c.want)
			}
			if c.counter != nil {
				if got := c.counter(in.Snapshot()); got != 1 {
					t.Errorf("counter for %v is %d, want 1", c.want, got)
				}
			}
			if s := in.Snapshot(); s.Packets != 0 {
				t.Errorf("dropped packet counted as delivered: %+v", s)
			}
		})
	}
}

// sealRaw builds a valid ESP packet (AES-GCM) around body with the given
// next header, bypassing Encap's own choice of next header.
func sealRaw(t testing.TB, sa *SA, body []byte, next byte) []byte {
	t.Helper()
	return sealWith(t, sa, body, next, func(pad []byte) {})
}

func sealBadPad(t testing.TB, sa *SA) []byte {
	return sealWith(t, sa, ipv4Packet(61, 5), 4, func(pad []byte) {
		if len(pad) == 0 {
			t.Fatal("test packet has no padding to corrupt")
		}
		pad[0] = 9
	})
}

func sealWith(t testing.TB, sa *SA, body []byte, next byte, corrupt func(pad []byte)) []byte {
	t.Helper()
	seq, err := sa.nextSeq()
	if err != nil {
		t.Fatal(err)
	}
	pkt := binary.BigEndian.AppendUint32(nil, sa.SPI)
	pkt = binary.BigEndian.AppendUint32(pkt, seq)
	iv := binary.BigEndian.AppendUint64(nil, uint64(seq))
	pkt = append(pkt, iv...)
	plain := append([]byte(nil), body...)
	for i := 1; (len(plain)+2)%4 != 0; i++ {
		plain = append(plain, byte(i))
	}
	corrupt(plain[len(body):])
	plain = append(plain, byte(len(plain)-len(body)), next)
	nonce := append(sa.suite.salt[:], iv...)
	return sa.suite.aead.Seal(pkt, nonce, plain, pkt[:8])
}

func TestReplay(t *testing.T) {
	out, in := testPair(t, transforms[0], 0x4000)
	var pkts [][]byte
	for i := 0; i < 3000; i++ {
		pkts = append(pkts, encapCopy(t, out, ipv4Packet(40, byte(i))))
	}
	decap := func(i int) error {
		_, err := in.Decap(append([]byte(nil), pkts[i]...))
		return err
	}
	steps := []struct {
		seq  int // index into pkts: sequence number is index+1
		want error
	}{
		{0, nil}, {0, ErrReplay}, {2, nil}, {1, nil}, {1, ErrReplay},
		{2999, nil},              // jump far ahead
		{2999 - 1024, nil},       // 1025 behind: still inside (window is at least 1024)
		{2999 - 1024, ErrReplay}, // twice
		{100, ErrReplay},         // far too old
		{2998, nil}, {2998, ErrReplay},
	}
	for _, s := range steps {
		if err := decap(s.seq); !errors.Is(err, s.want) {
			t.Fatalf("packet with seq %d: error %v, want %v", s.seq+1, err, s.want)
		}
	}
	if got := in.Snapshot().ReplayDrops; got != 5 {
		t.Errorf("ReplayDrops = %d, want 5", got)
	}
}

func TestReplayWindowSlidesByBlocks(t *testing.T) {
	w := newReplayWindow(1024)
	if w.size < 1024 {
		t.Fatalf("window covers %d packets, want at least 1024", w.size)
	}
	// Accept every other number far past several ring lengths; old bits
	// from a previous lap must never make a fresh number look replayed.
	for seq := uint64(1); seq < 20000; seq += 2 {
		if ok, _ := w.accept(seq); !ok {
			t.Fatalf("fresh seq %d refused", seq)
		}
	}
	for seq := uint64(19999 - 1000); seq < 19999; seq += 2 {
		if w.check(seq) {
			t.Fatalf("seq %d accepted twice", seq)
		}
		if !w.check(seq + 1) {
			t.Fatalf("never-seen seq %d inside the window refused", seq+1)
		}
	}
}

func TestSequenceExhaustion(t *testing.T) {
	var expires []bool
	tc := transforms[0]
	c := &ipsec.ChildSA{SPI: 0x5000, Transform: tc.t, EncKey: seqBytes(tc.encBytes, 1)}
	sa, err := NewSA(c, func(_ *SA, hard bool) { expires = append(expires, hard) })
	if err != nil {
		t.Fatal(err)
	}
	sa.seq.Store(1<<32 - softSeqMargin - 2)
	inner := ipv4Packet(40, 1)
	for i := 0; i < 2; i++ {
		encapCopy(t, sa, inner)
	}
	if fmt.Sprint(expires) != "[false]" {
		t.Fatalf("expires after reaching the soft margin: %v, want [false]", expires)
	}
	sa.seq.Store(1<<32 - 2)
	encapCopy(t, sa, inner) // seq 0xffffffff is the last one
	buf := make([]byte, Headroom+40+Tailroom)
	copy(buf[Headroom:], inner)
	if _, err := sa.Encap(buf, Headroom, 40); !errors.Is(err, ErrSeqExhausted) {
		t.Fatalf("Encap past 2^32-1: %v, want ErrSeqExhausted", err)
	}
	if _, err := sa.Encap(buf, Headroom, 40); !errors.Is(err, ErrExpired) {
		t.Fatalf("Encap on the dead SA: %v, want ErrExpired", err)
	}
	if fmt.Sprint(expires) != "[false true]" {
		t.Fatalf("expires = %v, want [false true]", expires)
	}
}

func TestByteLifetime(t *testing.T) {
	var expires []bool
	tc := transforms[3]
	c := &ipsec.ChildSA{SPI: 0x6000, Transform: tc.t, EncKey: seqBytes(tc.encBytes, 1), SoftBytes: 100, HardBytes: 200}
	sa, err := NewSA(c, func(_ *SA, hard bool) { expires = append(expires, hard) })
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		encapCopy(t, sa, ipv4Packet(60, 1))
	}
	if fmt.Sprint(expires) != "[false true]" {
		t.Fatalf("expires after 240 bytes = %v, want [false true]", expires)
	}
}

func TestEncapNeedsRoom(t *testing.T) {
	out, _ := testPair(t, transforms[0], 0x7000)
	inner := ipv4Packet(100, 1)
	buf := make([]byte, 4+len(inner), 4+len(inner)+Tailroom)
	copy(buf[4:], inner)
	if _, err := out.Encap(buf, 4, len(inner)); !errors.Is(err, ErrOversized) {
		t.Errorf("Encap without headroom: %v, want ErrOversized", err)
	}
	buf = make([]byte, Headroom+len(inner))
	copy(buf[Headroom:], inner)
	if _, err := out.Encap(buf, Headroom, len(inner)); !errors.Is(err, ErrOversized) {
		t.Errorf("Encap without tailroom: %v, want ErrOversized", err)
	}
	buf = make([]byte, Headroom+40, Headroom+40+Tailroom)
	buf[Headroom] = 0x20
	if _, err := out.Encap(buf, Headroom, 40); !errors.Is(err, ErrBadInner) {
		t.Errorf("Encap of a non-IP packet: %v, want ErrBadInner", err)
	}
}

func TestNewSARejects(t *testing.T) {
	cases := []struct {
		name string
		c    ipsec.ChildSA
	}{
		{"unknown cipher", ipsec.ChildSA{SPI: 0x1000, Transform: ipsec.Transform{Encryption: "cbc(des)"}, EncKey: make([]byte, 8)}},
		{"gcm key size mismatch", ipsec.ChildSA{SPI: 0x1000, Transform: ipsec.Transform{Encryption: EncAESGCM, EncKeyBits: 256}, EncKey: make([]byte, 20)}},
		{"gcm 64-bit ICV", ipsec.ChildSA{SPI: 0x1000, Transform: ipsec.Transform{Encryption: EncAESGCM, ICVBits: 64}, EncKey: make([]byte, 20)}},
		{"gcm without salt", ipsec.ChildSA{SPI: 0x1000, Transform: ipsec.Transform{Encryption: EncAESGCM}, EncKey: make([]byte, 4)}},
		{"cbc without integrity", ipsec.ChildSA{SPI: 0x1000, Transform: ipsec.Transform{Encryption: EncAESCBC}, EncKey: make([]byte, 16)}},
		{"sha256 truncated to 96", ipsec.ChildSA{SPI: 0x1000, Transform: ipsec.Transform{Encryption: EncAESCBC, Integrity: IntegSHA256, ICVBits: 96}, EncKey: make([]byte, 16), IntegKey: make([]byte, 32)}},
		{"reserved SPI", ipsec.ChildSA{SPI: 7, Transform: transforms[0].t, EncKey: make([]byte, 20)}},
	}
	for _, c := range cases {
		if _, err := NewSA(&c.c, nil); err == nil {
			t.Errorf("%s: NewSA accepted it", c.name)
		}
	}
}

// TestChaChaKnownAnswer checks the key/salt split of RFC 7634 against the
// AEAD vector of RFC 7539 section 2.8.2, whose 96-bit nonce 07000000
// 4041424344454647 is read as salt 07000000 and explicit IV 40..47. The
// tag covers AAD and ciphertext, so matching it checks both.
func TestChaChaKnownAnswer(t *testing.T) {
	key := make([]byte, 32, 36)
	for i := range key {
		key[i] = 0x80 + byte(i)
	}
	key = append(key, 0x07, 0, 0, 0)
	s, err := newSuite(ipsec.Transform{Encryption: EncChaPoly, EncKeyBits: 256, ICVBits: 128}, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc := s.newScratch()
	copy(sc.nonce[saltLen:], []byte{0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47})
	aad, _ := hex.DecodeString("50515253c0c1c2c3c4c5c6c7")
	plain := []byte("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.")
	out := s.aead.Seal(nil, sc.nonce[:], plain, aad)
	wantTag, _ := hex.DecodeString("1ae10b594f09e26a7e902ecbd0600691")
	wantStart, _ := hex.DecodeString("d31a8d34648e60db7b86afbc53ef7ec2")
	if got := out[len(out)-16:]; !bytes.Equal(got, wantTag) || !bytes.Equal(out[:16], wantStart) {
		t.Fatalf("RFC 7539 2.8.2: ciphertext starts %x, tag %x; want %x..., tag %x", out[:16], got, wantStart, wantTag)
	}
}
