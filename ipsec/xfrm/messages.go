package xfrm

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The XFRM netlink structures contain 64-bit counters, so their size and the
// offset of the attributes that follow depend on how the kernel's ABI aligns
// a u64: 8 bytes on x86-64, 4 on i386. xfrm_usersa_info is 224 bytes on one
// and 220 on the other. vishvananda/netlink hard-codes the x86-64 sizes, which
// puts every attribute (the algorithms and keys) 4 bytes off on the i386
// kernels most of our boards run, so the fixed structures are encoded here,
// for the alignment of the architecture we are built for.
type layout struct{ align int }

// native is the layout of the kernel we run on: Go's alignment of uint64
// matches the C ABI on both 386 and amd64.
var native = layout{align: int(unsafe.Alignof(uint64(0)))}

func (l layout) pad(n int) int { return (n + l.align - 1) &^ (l.align - 1) }

const (
	selectorLen   = 56
	usersaIDLen   = 24
	userpolicyID  = 64
	userTmplLen   = 64
	encapTmplLen  = 24
	replayESNHead = 24
)

func (l layout) usersaInfoLen() int     { return l.pad(217) }
func (l layout) userpolicyInfoLen() int { return l.pad(164) }
func (l layout) userExpireLen() int     { return l.pad(l.usersaInfoLen() + 1) }
func (l layout) userAcquireLen() int    { return l.pad(96 + l.userpolicyInfoLen() + 16) }

var ne = binary.NativeEndian

const xfrmInf = ^uint64(0)

// putAddr writes an xfrm_address_t: IPv4 in the first four bytes.
func putAddr(b []byte, a netip.Addr) {
	if !a.IsValid() {
		return
	}
	if a.Is4() {
		v4 := a.As4()
		copy(b[:4], v4[:])
		return
	}
	v6 := a.As16()
	copy(b[:16], v6[:])
}

func getAddr(b []byte, family uint16) netip.Addr {
	if family == unix.AF_INET {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16([16]byte(b[:16]))
}

func family(a netip.Addr) uint16 {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// selector is struct xfrm_selector.
type selector struct {
	Src, Dst netip.Prefix
	Proto    uint8
}

func (s selector) family() uint16 {
	if s.Dst.IsValid() {
		return family(s.Dst.Addr())
	}
	if s.Src.IsValid() {
		return family(s.Src.Addr())
	}
	return 0
}

func putSelector(b []byte, s selector, fam uint16) {
	putAddr(b[0:16], s.Dst.Addr())
	putAddr(b[16:32], s.Src.Addr())
	ne.PutUint16(b[40:42], fam)
	if s.Dst.IsValid() {
		b[42] = uint8(s.Dst.Bits())
	}
	if s.Src.IsValid() {
		b[43] = uint8(s.Src.Bits())
	}
	b[44] = s.Proto
}

func getSelector(b []byte) selector {
	fam := ne.Uint16(b[40:42])
	if fam != unix.AF_INET && fam != unix.AF_INET6 {
		return selector{Proto: b[44]}
	}
	dst, _ := getAddr(b[0:16], fam).Prefix(int(b[42]))
	src, _ := getAddr(b[16:32], fam).Prefix(int(b[43]))
	return selector{Src: src, Dst: dst, Proto: b[44]}
}

// attr appends a netlink attribute (struct nlattr and payload, padded to 4).
func attr(b []byte, typ uint16, payload []byte) []byte {
	n := unix.SizeofNlAttr + len(payload)
	var hdr [unix.SizeofNlAttr]byte
	ne.PutUint16(hdr[0:2], uint16(n))
	ne.PutUint16(hdr[2:4], typ)
	b = append(b, hdr[:]...)
	b = append(b, payload...)
	for n%4 != 0 {
		b = append(b, 0)
		n++
	}
	return b
}

// Attribute types (enum xfrm_attr_type_t).
const (
	attrAlgAuth      = 1
	attrAlgCrypt     = 2
	attrEncap        = 4
	attrTmpl         = 5
	attrAlgAEAD      = 18
	attrAlgAuthTrunc = 20
	attrReplayESN    = 23
	attrIfID         = 31 // XFRMA_IF_ID: the XFRM interface of an SA or policy
)

// ifIDAttr appends XFRMA_IF_ID when id is not 0.
func ifIDAttr(b []byte, id uint32) []byte {
	if id == 0 {
		return b
	}
	v := make([]byte, 4)
	ne.PutUint32(v, id)
	return attr(b, attrIfID, v)
}

// Message types.
const (
	msgNewSA        = 0x10
	msgDelSA        = 0x11
	msgGetSA        = 0x12
	msgDelPolicy    = 0x14
	msgAcquire      = 0x17
	msgExpire       = 0x18
	msgUpdPolicy    = 0x19
	policyIn        = 0
	policyOut       = 1
	policyFwd       = 2
	modeTunnel      = 1
	groupAcquire    = 1
	groupExpire     = 2
	encapESPInUDP   = 2 // UDP_ENCAP_ESPINUDP
	replayWindowMax = 4096
)

// encodeAlgo builds struct xfrm_algo, xfrm_algo_auth or xfrm_algo_aead:
// name[64], key length in bits, then (for auth and AEAD) the truncation or
// ICV length in bits, then the key.
func encodeAlgo(a *algorithm, withBits bool) []byte {
	head := 68
	if withBits {
		head = 72
	}
	b := make([]byte, head+len(a.Key))
	copy(b[:64], a.Name)
	ne.PutUint32(b[64:68], uint32(len(a.Key)*8))
	if withBits {
		ne.PutUint32(b[68:72], uint32(a.Bits))
	}
	copy(b[head:], a.Key)
	return b
}

// encodeNewSA builds the XFRM_MSG_NEWSA payload for st. The result holds
// key material: the caller zeroes it after sending.
func (l layout) encodeNewSA(st *state) []byte {
	b := make([]byte, l.usersaInfoLen(), l.usersaInfoLen()+512)
	fam := family(st.Dst)
	putSelector(b[0:selectorLen], selector{}, fam) // tunnel mode: the policy selects traffic
	putAddr(b[56:72], st.Dst)
	binary.BigEndian.PutUint32(b[72:76], st.SPI)
	b[76] = unix.IPPROTO_ESP
	putAddr(b[80:96], st.Src)
	lim := func(v uint64) uint64 {
		if v == 0 {
			return xfrmInf
		}
		return v
	}
	ne.PutUint64(b[96:], lim(st.SoftBytes))
	ne.PutUint64(b[104:], lim(st.HardBytes))
	ne.PutUint64(b[112:], xfrmInf)
	ne.PutUint64(b[120:], xfrmInf)
	ne.PutUint64(b[128:], st.SoftSeconds)
	ne.PutUint64(b[136:], st.HardSeconds)
	ne.PutUint32(b[204:], st.Seq) // km.seq: the larval SA of this acquire goes
	ne.PutUint32(b[208:], st.ReqID)
	ne.PutUint16(b[212:], fam)
	b[214] = modeTunnel
	// b[215], the legacy 8-bit replay window, stays 0: the window is given
	// by XFRMA_REPLAY_ESN_VAL, the only way to ask for more than 32 packets
	// without turning on extended sequence numbers (flag XFRM_STATE_ESN).

	if st.AEAD != nil {
		b = attr(b, attrAlgAEAD, encodeAlgo(st.AEAD, true))
	}
	if st.Crypt != nil {
		b = attr(b, attrAlgCrypt, encodeAlgo(st.Crypt, false))
	}
	if st.Auth != nil {
		b = attr(b, attrAlgAuthTrunc, encodeAlgo(st.Auth, true))
	}
	if st.EncapSrcPort != 0 || st.EncapDstPort != 0 {
		e := make([]byte, encapTmplLen)
		ne.PutUint16(e[0:2], encapESPInUDP)
		binary.BigEndian.PutUint16(e[2:4], st.EncapSrcPort)
		binary.BigEndian.PutUint16(e[4:6], st.EncapDstPort)
		b = attr(b, attrEncap, e)
	}
	if st.ReplayWindow > 0 {
		words := (st.ReplayWindow + 31) / 32
		r := make([]byte, replayESNHead+4*int(words))
		ne.PutUint32(r[0:4], words)
		ne.PutUint32(r[20:24], st.ReplayWindow)
		b = attr(b, attrReplayESN, r)
	}
	return ifIDAttr(b, st.IfID)
}

// encodeUsersaID builds struct xfrm_usersa_id, which names an SA.
func encodeUsersaID(dst netip.Addr, spi uint32) []byte {
	b := make([]byte, usersaIDLen)
	putAddr(b[0:16], dst)
	binary.BigEndian.PutUint32(b[16:20], spi)
	ne.PutUint16(b[20:22], family(dst))
	b[22] = unix.IPPROTO_ESP
	return b
}

// encodePolicy builds the XFRM_MSG_UPDPOLICY payload for p: the policy and
// one ESP tunnel template.
func (l layout) encodePolicy(p *policy) []byte {
	b := make([]byte, l.userpolicyInfoLen())
	putSelector(b[0:selectorLen], p.Sel, p.Sel.family())
	for off := 56; off < 88; off += 8 { // byte and packet limits: none; time limits 0: none
		ne.PutUint64(b[off:], xfrmInf)
	}
	ne.PutUint32(b[152:], p.Priority)
	b[160] = p.Dir
	t := make([]byte, userTmplLen)
	putAddr(t[0:16], p.TmplDst)
	t[20] = unix.IPPROTO_ESP
	ne.PutUint16(t[24:26], family(p.TmplDst))
	putAddr(t[28:44], p.TmplSrc)
	ne.PutUint32(t[44:48], p.ReqID)
	t[48] = modeTunnel
	ne.PutUint32(t[52:56], ^uint32(0)) // any authentication
	ne.PutUint32(t[56:60], ^uint32(0)) // any encryption
	ne.PutUint32(t[60:64], ^uint32(0)) // any compression
	return ifIDAttr(attr(b, attrTmpl, t), p.IfID)
}

// encodePolicyID builds struct xfrm_userpolicy_id, which names a policy by
// selector and direction.
func encodePolicyID(p *policy) []byte {
	b := make([]byte, userpolicyID)
	putSelector(b[0:selectorLen], p.Sel, p.Sel.family())
	b[60] = p.Dir
	return ifIDAttr(b, p.IfID) // the kernel names a policy by its if_id too
}

// saInfo is what status needs from an xfrm_usersa_info.
type saInfo struct {
	Dst, Src        netip.Addr
	SPI, ReqID      uint32
	Bytes, Packets  uint64
	AddTime         uint64
	UseTime         uint64
	ReplayDrops     uint32
	IntegrityFailed uint32
}

func (l layout) decodeUsersaInfo(b []byte) (saInfo, error) {
	if len(b) < l.usersaInfoLen() {
		return saInfo{}, fmt.Errorf("xfrm_usersa_info: %d bytes, need %d", len(b), l.usersaInfoLen())
	}
	fam := ne.Uint16(b[212:214])
	if fam != unix.AF_INET && fam != unix.AF_INET6 {
		return saInfo{}, fmt.Errorf("xfrm_usersa_info: address family %d", fam)
	}
	return saInfo{
		Dst:             getAddr(b[56:72], fam),
		SPI:             binary.BigEndian.Uint32(b[72:76]),
		Src:             getAddr(b[80:96], fam),
		Bytes:           ne.Uint64(b[160:]),
		Packets:         ne.Uint64(b[168:]),
		AddTime:         ne.Uint64(b[176:]),
		UseTime:         ne.Uint64(b[184:]),
		ReplayDrops:     ne.Uint32(b[196:]),
		IntegrityFailed: ne.Uint32(b[200:]),
		ReqID:           ne.Uint32(b[208:]),
	}, nil
}

// expireMsg is an XFRM_MSG_EXPIRE: an SA reached a soft or hard limit.
type expireMsg struct {
	SA   saInfo
	Hard bool
}

func (l layout) decodeExpire(b []byte) (expireMsg, error) {
	if len(b) < l.usersaInfoLen()+1 {
		return expireMsg{}, fmt.Errorf("xfrm_user_expire: %d bytes", len(b))
	}
	sa, err := l.decodeUsersaInfo(b)
	if err != nil {
		return expireMsg{}, err
	}
	return expireMsg{SA: sa, Hard: b[l.usersaInfoLen()] != 0}, nil
}

// Acquire is the kernel asking for an SA: traffic matched an outbound
// policy (installed by Trap) for which no SA exists. iked answers by
// negotiating the CHILD_SA with that ReqID.
type Acquire struct {
	ReqID    uint32
	Src, Dst netip.Addr   // outer addresses from the policy's template
	Local    netip.Prefix // the selector of the policy that matched
	Remote   netip.Prefix
	Seq      uint32
}

// decodeAcquire parses an XFRM_MSG_ACQUIRE: struct xfrm_user_acquire (SA id,
// source address, selector, the policy, algorithm masks, seq) followed by
// attributes, among them XFRMA_TMPL carrying the reqid.
func (l layout) decodeAcquire(b []byte) (Acquire, error) {
	fixed := l.userAcquireLen()
	if len(b) < fixed {
		return Acquire{}, fmt.Errorf("xfrm_user_acquire: %d bytes, need %d", len(b), fixed)
	}
	sel := getSelector(b[96 : 96+selectorLen])
	a := Acquire{
		Local:  sel.Src,
		Remote: sel.Dst,
		Seq:    ne.Uint32(b[96+l.userpolicyInfoLen()+12:]),
	}
	for rest := b[fixed:]; len(rest) >= unix.SizeofNlAttr; {
		n := int(ne.Uint16(rest[0:2]))
		typ := ne.Uint16(rest[2:4]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if n < unix.SizeofNlAttr || n > len(rest) {
			return Acquire{}, fmt.Errorf("xfrm_user_acquire: attribute length %d of %d", n, len(rest))
		}
		if typ == attrTmpl && n >= unix.SizeofNlAttr+userTmplLen {
			t := rest[unix.SizeofNlAttr:]
			fam := ne.Uint16(t[24:26])
			if fam == unix.AF_INET || fam == unix.AF_INET6 {
				a.Dst = getAddr(t[0:16], fam)
				a.Src = getAddr(t[28:44], fam)
			}
			a.ReqID = ne.Uint32(t[44:48])
		}
		adv := (n + 3) &^ 3
		if adv > len(rest) {
			break
		}
		rest = rest[adv:]
	}
	if a.ReqID == 0 {
		return Acquire{}, fmt.Errorf("xfrm_user_acquire: no template with a reqid")
	}
	return a, nil
}
