package xfrm

import (
	"encoding/binary"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/ipsec"
)

var (
	gwA = netip.MustParseAddr("192.0.2.1")
	gwB = netip.MustParseAddr("198.51.100.7")
	lan = netip.MustParsePrefix("10.1.0.0/16")
	rem = netip.MustParsePrefix("10.2.3.0/24")
)

// childPair is the pair gateway A installs for a tunnel to B: GCM,
// NAT-T, lifetimes by time and bytes.
func childPair() (in, out *ipsec.ChildSA) {
	tr := ipsec.Transform{Encryption: "rfc4106(gcm(aes))", EncKeyBits: 128, ICVBits: 128}
	base := ipsec.ChildSA{
		ReqID: 7, Transform: tr,
		LocalTS: []netip.Prefix{lan}, RemoteTS: []netip.Prefix{rem},
		SoftLifetime: 50 * time.Minute, HardLifetime: time.Hour,
		SoftBytes: 900 << 20, HardBytes: 1 << 30,
		EncapSrcPort: 4500, EncapDstPort: 4500,
	}
	i, o := base, base
	i.SPI, i.Inbound, i.Src, i.Dst, i.EncKey = 0xc0de0001, true, gwB, gwA, key(20)
	o.SPI, o.Src, o.Dst, o.EncKey = 0xc0de0002, gwA, gwB, key(20)
	return &i, &o
}

func TestBuildState(t *testing.T) {
	in, out := childPair()
	st, err := buildState(in)
	if err != nil {
		t.Fatal(err)
	}
	want := &state{
		Src: gwB, Dst: gwA, SPI: 0xc0de0001, ReqID: 7,
		AEAD:         &algorithm{Name: "rfc4106(gcm(aes))", Key: key(20), Bits: 128},
		EncapSrcPort: 4500, EncapDstPort: 4500,
		ReplayWindow: 1024, // raised to our minimum
		SoftBytes:    900 << 20, HardBytes: 1 << 30, SoftSeconds: 3000, HardSeconds: 3600,
	}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("inbound state:\n expected %+v\n got      %+v", want, st)
	}
	ost, err := buildState(out)
	if err != nil {
		t.Fatal(err)
	}
	if ost.ReplayWindow != 0 || ost.Src != gwA || ost.Dst != gwB {
		t.Errorf("outbound state: expected no replay window and %v->%v, got %d and %v->%v", gwA, gwB, ost.ReplayWindow, ost.Src, ost.Dst)
	}

	in.ReplayWindow = 1 << 20
	if st, _ := buildState(in); st.ReplayWindow != replayWindowMax {
		t.Errorf("huge replay window: expected the kernel's maximum %d, got %d", replayWindowMax, st.ReplayWindow)
	}

	bad := []struct {
		name   string
		change func(c *ipsec.ChildSA)
		err    string
	}{
		{"SPI 0", func(c *ipsec.ChildSA) { c.SPI = 0 }, "SPI 0"},
		{"mixed families", func(c *ipsec.ChildSA) { c.Src = netip.MustParseAddr("2001:db8::1") }, "outer addresses"},
		{"one encap port", func(c *ipsec.ChildSA) { c.EncapDstPort = 0 }, "both ports"},
		{"soft after hard", func(c *ipsec.ChildSA) { c.SoftLifetime = 2 * time.Hour }, "soft lifetime"},
		{"soft bytes above hard", func(c *ipsec.ChildSA) { c.SoftBytes = 2 << 30 }, "soft byte limit"},
		{"bad key", func(c *ipsec.ChildSA) { c.EncKey = key(16) }, "want 20"},
	}
	for _, b := range bad {
		c, _ := childPair()
		b.change(c)
		if _, err := buildState(c); err == nil || !strings.Contains(err.Error(), b.err) {
			t.Errorf("%s: expected an error containing %q, got %v", b.name, b.err, err)
		}
	}
}

func TestBuildPolicies(t *testing.T) {
	in, out := childPair()
	v6l, v6r := netip.MustParsePrefix("2001:db8:1::/48"), netip.MustParsePrefix("2001:db8:2::1/64")
	out.LocalTS = append(out.LocalTS, v6l)
	out.RemoteTS = append(out.RemoteTS, v6r)
	got, err := buildPolicies(in, out)
	if err != nil {
		t.Fatal(err)
	}
	v6rm := v6r.Masked()
	o4 := selector{Src: lan, Dst: rem}
	i4 := selector{Src: rem, Dst: lan}
	o6 := selector{Src: v6l, Dst: v6rm}
	i6 := selector{Src: v6rm, Dst: v6l}
	want := []policy{
		{Sel: o4, Dir: policyOut, Priority: 0x4000 - 40, TmplSrc: gwA, TmplDst: gwB, ReqID: 7},
		{Sel: i4, Dir: policyIn, Priority: 0x4000 - 40, TmplSrc: gwB, TmplDst: gwA, ReqID: 7},
		{Sel: i4, Dir: policyFwd, Priority: 0x4000 - 40, TmplSrc: gwB, TmplDst: gwA, ReqID: 7},
		// v4 x v6 and v6 x v4 selector pairs are skipped.
		{Sel: o6, Dir: policyOut, Priority: 0x4000 - 112, TmplSrc: gwA, TmplDst: gwB, ReqID: 7},
		{Sel: i6, Dir: policyIn, Priority: 0x4000 - 112, TmplSrc: gwB, TmplDst: gwA, ReqID: 7},
		{Sel: i6, Dir: policyFwd, Priority: 0x4000 - 112, TmplSrc: gwB, TmplDst: gwA, ReqID: 7},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("policies:\n expected %+v\n got      %+v", want, got)
	}

	in2, out2 := childPair()
	in2.ReqID = 8
	if _, err := buildPolicies(in2, out2); err == nil || !strings.Contains(err.Error(), "reqids differ") {
		t.Errorf("pair with different reqids: expected an error, got %v", err)
	}
	_, out3 := childPair()
	out3.RemoteTS = []netip.Prefix{v6r}
	if _, err := buildPolicies(in, out3); err == nil || !strings.Contains(err.Error(), "no address family") {
		t.Errorf("v4 local with v6 remote only: expected an error, got %v", err)
	}
}

// attrs splits the attributes after the fixed part of a message into
// type -> payload.
func attrs(t *testing.T, b []byte) map[uint16][]byte {
	t.Helper()
	m := map[uint16][]byte{}
	for len(b) > 0 {
		if len(b) < 4 {
			t.Fatalf("%d trailing bytes", len(b))
		}
		n := int(binary.NativeEndian.Uint16(b[0:2]))
		if n < 4 || n > len(b) {
			t.Fatalf("attribute length %d of %d", n, len(b))
		}
		m[binary.NativeEndian.Uint16(b[2:4])] = b[4:n]
		b = b[(n+3)&^3:]
	}
	return m
}

// TestEncodeNewSA checks the NEWSA message against the kernel's layout on
// both ABIs: i386 (u64 aligned to 4: xfrm_usersa_info is 220 bytes) and
// x86-64 (224 bytes). Offsets are those of include/uapi/linux/xfrm.h.
func TestEncodeNewSA(t *testing.T) {
	in, _ := childPair()
	st, err := buildState(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		l      layout
		fixed  int
		expire int
	}{{layout{4}, 220, 224}, {layout{8}, 224, 232}} {
		if got := tc.l.usersaInfoLen(); got != tc.fixed {
			t.Errorf("align %d: xfrm_usersa_info is %d bytes, expected %d", tc.l.align, got, tc.fixed)
		}
		if got := tc.l.userExpireLen(); got != tc.expire {
			t.Errorf("align %d: xfrm_user_expire is %d bytes, expected %d", tc.l.align, got, tc.expire)
		}
		b := tc.l.encodeNewSA(st)
		ne := binary.NativeEndian
		checks := []struct {
			what      string
			got, want uint64
		}{
			{"selector family", uint64(ne.Uint16(b[40:])), 2},
			{"SPI (big endian)", uint64(binary.BigEndian.Uint32(b[72:])), 0xc0de0001},
			{"proto", uint64(b[76]), 50},
			{"soft bytes", ne.Uint64(b[96:]), 900 << 20},
			{"hard bytes", ne.Uint64(b[104:]), 1 << 30},
			{"soft packets", ne.Uint64(b[112:]), xfrmInf},
			{"soft seconds", ne.Uint64(b[128:]), 3000},
			{"hard seconds", ne.Uint64(b[136:]), 3600},
			{"reqid", uint64(ne.Uint32(b[208:])), 7},
			{"family", uint64(ne.Uint16(b[212:])), 2},
			{"mode", uint64(b[214]), modeTunnel},
			{"legacy replay window", uint64(b[215]), 0},
			{"flags (no ESN)", uint64(b[216]), 0},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("align %d: %s = %#x, expected %#x", tc.l.align, c.what, c.got, c.want)
			}
		}
		if !netip.AddrFrom4([4]byte(b[56:60])).IsValid() || netip.AddrFrom4([4]byte(b[56:60])) != gwA || netip.AddrFrom4([4]byte(b[80:84])) != gwB {
			t.Errorf("align %d: addresses dst %v src %v, expected %v %v", tc.l.align, b[56:60], b[80:84], gwA, gwB)
		}
		a := attrs(t, b[tc.fixed:])
		aead := a[attrAlgAEAD]
		if len(aead) != 72+20 || strings.TrimRight(string(aead[:64]), "\x00") != "rfc4106(gcm(aes))" ||
			ne.Uint32(aead[64:]) != 160 || ne.Uint32(aead[68:]) != 128 {
			t.Errorf("align %d: AEAD attribute %x: expected rfc4106(gcm(aes)), 160 key bits incl. salt, ICV 128", tc.l.align, aead)
		}
		enc := a[attrEncap]
		if len(enc) != 24 || ne.Uint16(enc[0:]) != 2 || binary.BigEndian.Uint16(enc[2:]) != 4500 || binary.BigEndian.Uint16(enc[4:]) != 4500 {
			t.Errorf("align %d: encap attribute %x: expected ESPINUDP 4500->4500", tc.l.align, enc)
		}
		esn := a[attrReplayESN]
		if len(esn) != 24+4*32 || ne.Uint32(esn[0:]) != 32 || ne.Uint32(esn[20:]) != 1024 {
			t.Errorf("align %d: replay attribute %x: expected a 32-word bitmap for a 1024-packet window", tc.l.align, esn)
		}
		if _, ok := a[attrAlgCrypt]; ok {
			t.Errorf("align %d: AEAD SA carries a cipher attribute too", tc.l.align)
		}
		info, err := tc.l.decodeUsersaInfo(b)
		if err != nil || info.SPI != st.SPI || info.Dst != gwA || info.Src != gwB || info.ReqID != 7 {
			t.Errorf("align %d: decoding our own usersa_info: %+v, %v", tc.l.align, info, err)
		}
	}
}

func TestEncodeCBCAndPolicy(t *testing.T) {
	in, out := childPair()
	for _, c := range []*ipsec.ChildSA{in, out} {
		c.Transform = ipsec.Transform{Encryption: "cbc(aes)", EncKeyBits: 128, Integrity: "hmac(sha256)"}
		c.EncKey, c.IntegKey = key(16), key(32)
		c.EncapSrcPort, c.EncapDstPort = 0, 0
	}
	st, err := buildState(out)
	if err != nil {
		t.Fatal(err)
	}
	l := layout{4}
	b := l.encodeNewSA(st)
	a := attrs(t, b[220:])
	ne := binary.NativeEndian
	if c := a[attrAlgCrypt]; len(c) != 68+16 || ne.Uint32(c[64:]) != 128 {
		t.Errorf("cipher attribute %x: expected cbc(aes) with a 128-bit key", c)
	}
	if au := a[attrAlgAuthTrunc]; len(au) != 72+32 || strings.TrimRight(string(au[:64]), "\x00") != "hmac(sha256)" || ne.Uint32(au[68:]) != 128 {
		t.Errorf("auth attribute %x: expected hmac(sha256) truncated to 128 bits", au)
	}
	for _, typ := range []uint16{attrAlgAEAD, attrEncap, attrReplayESN} {
		if _, ok := a[typ]; ok {
			t.Errorf("outbound CBC SA without NAT-T carries attribute %d", typ)
		}
	}

	pols, err := buildPolicies(in, out)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []layout{{4}, {8}} {
		p := l.encodePolicy(&pols[0]) // out
		fixed := l.userpolicyInfoLen()
		if want := map[int]int{4: 164, 8: 168}[l.align]; fixed != want {
			t.Errorf("align %d: xfrm_userpolicy_info is %d bytes, expected %d", l.align, fixed, want)
		}
		if p[42] != 24 || p[43] != 16 || netip.AddrFrom4([4]byte(p[0:4])) != rem.Addr() || netip.AddrFrom4([4]byte(p[16:20])) != lan.Addr() {
			t.Errorf("align %d: selector dst/%d src/%d %v %v, expected %v %v", l.align, p[42], p[43], p[0:4], p[16:20], rem, lan)
		}
		if p[160] != policyOut || ne.Uint32(p[152:]) != 0x4000-40 {
			t.Errorf("align %d: dir %d priority %#x", l.align, p[160], ne.Uint32(p[152:]))
		}
		tmpl := attrs(t, p[fixed:])[attrTmpl]
		if len(tmpl) != 64 || netip.AddrFrom4([4]byte(tmpl[0:4])) != gwB || tmpl[20] != 50 || ne.Uint16(tmpl[24:]) != 2 ||
			netip.AddrFrom4([4]byte(tmpl[28:32])) != gwA || ne.Uint32(tmpl[44:]) != 7 || tmpl[48] != modeTunnel {
			t.Errorf("align %d: template %x: expected ESP tunnel %v->%v reqid 7", l.align, tmpl, gwA, gwB)
		}
		id := encodePolicyID(&pols[1])
		if len(id) != 64 || id[60] != policyIn || netip.AddrFrom4([4]byte(id[0:4])) != lan.Addr() {
			t.Errorf("policy id %x: expected dir in, dst %v", id, lan)
		}
	}
}

func TestDecodeExpireAndAcquire(t *testing.T) {
	in, _ := childPair()
	st, _ := buildState(in)
	for _, l := range []layout{{4}, {8}} {
		sa := l.encodeNewSA(st)[:l.usersaInfoLen()]
		msg := append(append([]byte{}, sa...), make([]byte, l.userExpireLen()-len(sa))...)
		msg[l.usersaInfoLen()] = 1
		e, err := l.decodeExpire(msg)
		if err != nil || !e.Hard || e.SA.SPI != in.SPI {
			t.Errorf("align %d: expire: got %+v, %v; expected hard expire of %08x", l.align, e, err, in.SPI)
		}
		if _, err := l.decodeExpire(msg[:100]); err == nil {
			t.Errorf("align %d: truncated expire decoded without error", l.align)
		}

		// xfrm_user_acquire: id, saddr, selector at 96, policy, then
		// aalgos/ealgos/calgos/seq, then XFRMA_TMPL.
		fixed := l.userAcquireLen()
		acq := make([]byte, fixed)
		putSelector(acq[96:152], selector{Src: lan, Dst: rem}, 2)
		binary.NativeEndian.PutUint32(acq[96+l.userpolicyInfoLen()+12:], 42)
		tmpl := make([]byte, 64)
		copy(tmpl[0:4], gwB.AsSlice())
		binary.NativeEndian.PutUint16(tmpl[24:], 2)
		copy(tmpl[28:32], gwA.AsSlice())
		binary.NativeEndian.PutUint32(tmpl[44:], 7)
		acq = attr(acq, 8 /* XFRMA_SEC_CTX, skipped */, []byte{1, 2, 3})
		acq = attr(acq, attrTmpl, tmpl)
		got, err := l.decodeAcquire(acq)
		want := Acquire{ReqID: 7, Src: gwA, Dst: gwB, Local: lan, Remote: rem, Seq: 42}
		if err != nil || got != want {
			t.Errorf("align %d: acquire: expected %+v, got %+v, %v", l.align, want, got, err)
		}
		if _, err := l.decodeAcquire(acq[:fixed]); err == nil {
			t.Errorf("align %d: acquire without template decoded without error", l.align)
		}
	}
}

func TestExtAckMessage(t *testing.T) {
	ne := binary.NativeEndian
	// struct nlmsgerr with a capped echo (header only), then NLMSGERR_ATTR_MSG.
	msg := make([]byte, 4+16)
	ne.PutUint32(msg[0:], uint32(0xfffffffe)) // -ENOENT
	ne.PutUint32(msg[4:], 300)                // length of our request, not echoed
	msg = attr(msg, 1, []byte("Kernel was unable to initialize cryptographic operations\x00"))
	if got := extAckMessage(0x300, msg); got != "Kernel was unable to initialize cryptographic operations" {
		t.Errorf("capped ext ack: got %q", got)
	}
	// Uncapped: the whole request is echoed, the attributes follow it.
	full := make([]byte, 4+24)
	ne.PutUint32(full[4:], 24)
	full = attr(full, 1, []byte("Invalid policy direction\x00"))
	if got := extAckMessage(0x200, full); got != "Invalid policy direction" {
		t.Errorf("uncapped ext ack: got %q", got)
	}
	if got := extAckMessage(0, msg); got != "" {
		t.Errorf("without NLM_F_ACK_TLVS: got %q, expected nothing", got)
	}
	if got := extAckMessage(0x200, full[:30]); got != "" {
		t.Errorf("truncated: got %q, expected nothing", got)
	}
}

// The pair of a route tunnel carries its interface's if_id on both SAs and
// on every policy (XFRMA_IF_ID, native endian); the policy's id does too,
// since the kernel names a policy by it, and two route tunnels to one peer
// have the same any-to-any selectors.
func TestRouteTunnelIfID(t *testing.T) {
	in, out := childPair()
	any4 := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
	for _, c := range []*ipsec.ChildSA{in, out} {
		c.IfID, c.LocalTS, c.RemoteTS = 3, any4, any4
	}
	for _, l := range []layout{{4}, {8}} {
		for _, c := range []*ipsec.ChildSA{in, out} {
			st, err := buildState(c)
			if err != nil {
				t.Fatal(err)
			}
			if v := attrs(t, l.encodeNewSA(st)[l.usersaInfoLen():])[attrIfID]; len(v) != 4 || ne.Uint32(v) != 3 {
				t.Errorf("align %d: SA %08x if_id attribute %x, want 3", l.align, c.SPI, v)
			}
		}
		pols, err := buildPolicies(in, out)
		if err != nil {
			t.Fatal(err)
		}
		if len(pols) != 3 {
			t.Fatalf("%d policies for one any-to-any pair, want out, in, fwd", len(pols))
		}
		for i := range pols {
			if v := attrs(t, l.encodePolicy(&pols[i])[l.userpolicyInfoLen():])[attrIfID]; len(v) != 4 || ne.Uint32(v) != 3 {
				t.Errorf("align %d: policy %s if_id attribute %x, want 3", l.align, dirName(pols[i].Dir), v)
			}
			if v := attrs(t, encodePolicyID(&pols[i])[userpolicyID:])[attrIfID]; len(v) != 4 || ne.Uint32(v) != 3 {
				t.Errorf("policy id %s: if_id attribute %x, want 3", dirName(pols[i].Dir), v)
			}
		}
		other := pols[0]
		other.IfID = 4
		if samePolicy(&pols[0], &other) {
			t.Error("two route tunnels' policies with one selector count as one")
		}
	}
	// A policy tunnel's messages have no if_id at all.
	in, out = childPair()
	st, _ := buildState(out)
	if _, ok := attrs(t, native.encodeNewSA(st)[native.usersaInfoLen():])[attrIfID]; ok {
		t.Error("a policy tunnel's SA carries an if_id")
	}
	out.IfID = 1
	if _, err := buildPolicies(in, out); err == nil {
		t.Error("a pair with different if_ids was accepted")
	}
}
