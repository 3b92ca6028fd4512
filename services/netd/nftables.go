package netd

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// TableName is the one nftables table netd owns (family inet: IPv4 and IPv6
// in one ruleset). netd never touches any other table.
const TableName = "flashgate"

// NFTables applies rule Specs to the kernel and reads their counters back.
type NFTables struct {
	opts []nftables.ConnOption
}

// NewNFTables returns an applier for the current network namespace, or for
// another one with nftables.WithNetNSFd.
func NewNFTables(opts ...nftables.ConnOption) *NFTables {
	return &NFTables{opts: opts}
}

func (n *NFTables) conn() (*nftables.Conn, error) {
	c, err := nftables.New(append([]nftables.ConnOption{nftables.WithSockOptions(bigBuffers)}, n.opts...)...)
	if err != nil {
		return nil, fmt.Errorf("nftables: open netlink: %w", err)
	}
	return c, nil
}

// batchBuffer is the socket buffer for a whole ruleset: the batch goes to
// the kernel in one sendmsg, which fails with EMSGSIZE past the send buffer
// (about 200 KiB by default, some 500 rules). 8 MiB holds tens of
// thousands of rules; the kernel only allocates what is sent.
const batchBuffer = 8 << 20

// bigBuffers raises the netlink socket's buffers past net.core.wmem_max /
// rmem_max (SO_SNDBUFFORCE needs CAP_NET_ADMIN, which changing nftables
// needs anyway).
func bigBuffers(c *netlink.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, batchBuffer); serr != nil {
			return
		}
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, batchBuffer)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("netlink socket buffers: %w", err)
	}
	return nil
}

var table = &nftables.Table{Name: TableName, Family: nftables.TableFamilyINet}

// chains are the base chains, in the order they are created. Only the
// filter chains drop by policy; the NAT chains only rewrite.
func chains() []*nftables.Chain {
	drop, accept := nftables.ChainPolicyDrop, nftables.ChainPolicyAccept
	return []*nftables.Chain{
		{Name: ChainInput, Table: table, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &drop},
		{Name: ChainForward, Table: table, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &drop},
		{Name: chainPrerouting, Table: table, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest, Policy: &accept},
		{Name: chainPostrouting, Table: table, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept},
	}
}

// Apply replaces table inet flashgate with the given rules in one netlink
// batch: the table is created if missing, deleted, and created again with
// its chains and rules. The kernel applies a batch as one transaction, so
// packets see either the old ruleset or the new one, never an empty or a
// half-built one; a batch the kernel refuses changes nothing. Conntrack
// entries (and their NAT bindings) live outside the table and survive.
func (n *NFTables) Apply(specs []Spec) error {
	// Translate everything first: an error here must not leave a
	// half-queued batch behind.
	byChain := map[string][][]expr.Any{}
	comments := map[string][]string{}
	for _, s := range specs {
		ex, err := Exprs(s)
		if err != nil {
			return fmt.Errorf("nftables: rule %q: %w", s.String(), err)
		}
		byChain[s.Chain] = append(byChain[s.Chain], ex)
		comments[s.Chain] = append(comments[s.Chain], s.Comment)
	}
	c, err := n.conn()
	if err != nil {
		return err
	}
	c.AddTable(table) // so that the delete below cannot fail on a fresh box
	c.DelTable(table)
	c.AddTable(table)
	known := map[string]bool{}
	for _, ch := range chains() {
		known[ch.Name] = true
		c.AddChain(ch)
		for i, ex := range byChain[ch.Name] {
			c.AddRule(&nftables.Rule{Table: table, Chain: ch, Exprs: ex,
				UserData: userdata.AppendString(nil, userdata.TypeComment, comments[ch.Name][i])})
		}
	}
	for name := range byChain {
		if !known[name] {
			return fmt.Errorf("nftables: rule in unknown chain %q", name)
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: apply table inet %s (%d rules): %w", TableName, len(specs), err)
	}
	return nil
}

// Delete removes table inet flashgate (used by tests and on explicit
// request; netd itself never runs without it).
func (n *NFTables) Delete() error {
	c, err := n.conn()
	if err != nil {
		return err
	}
	c.DelTable(table)
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("nftables: delete table inet %s: %w", TableName, err)
	}
	return nil
}

// Rules lists the rules of table inet flashgate in kernel order with their
// counters. A missing table is an error: it means the box is unprotected.
func (n *NFTables) Rules() ([]netdapi.RuleCounter, error) {
	c, err := n.conn()
	if err != nil {
		return nil, err
	}
	var out []netdapi.RuleCounter
	for _, ch := range chains() {
		rules, err := c.GetRules(table, ch)
		if err != nil {
			return nil, fmt.Errorf("nftables: list chain %s: %w", ch.Name, err)
		}
		for _, r := range rules {
			rc := netdapi.RuleCounter{Chain: ch.Name, Handle: r.Handle}
			rc.Comment, _ = userdata.GetString(r.UserData, userdata.TypeComment)
			for _, e := range r.Exprs {
				if ctr, ok := e.(*expr.Counter); ok {
					rc.Packets, rc.Bytes = ctr.Packets, ctr.Bytes
				}
			}
			out = append(out, rc)
		}
	}
	return out, nil
}

// Hits adds up the rule counters by chain and comment, in first-seen
// order. Log rules are left out: their packets are counted by the rule
// that follows them.
func Hits(rules []netdapi.RuleCounter) []netdapi.HitCounter {
	var out []netdapi.HitCounter
	idx := map[string]int{}
	for _, r := range rules {
		if strings.HasSuffix(r.Comment, logSuffix) {
			continue
		}
		i, ok := idx[r.Chain+" "+r.Comment]
		if !ok {
			i = len(out)
			idx[r.Chain+" "+r.Comment] = i
			out = append(out, netdapi.HitCounter{Rule: r.Chain + " " + r.Comment})
		}
		out[i].Packets += r.Packets
		out[i].Bytes += r.Bytes
	}
	return out
}

// The kernel's keys for "meta secpath" and "rt ipsec"
// (linux/netfilter/nf_tables.h), which google/nftables and x/sys do not
// name: NFT_META_SECPATH follows NFT_META_PRANDOM, NFT_RT_XFRM follows
// NFT_RT_TCPMSS.
const (
	metaKeySecpath = expr.MetaKeyPRANDOM + 1
	rtKeyXFRM      = expr.RtTCPMSS + 1
)

// Exprs translates one Spec into nftables expressions: matches in the
// order String prints them, a counter, then the verdict.
func Exprs(s Spec) ([]expr.Any, error) {
	var ex []expr.Any
	cmp := func(op expr.CmpOp, data []byte) { ex = append(ex, &expr.Cmp{Op: op, Register: 1, Data: data}) }
	meta := func(k expr.MetaKey) { ex = append(ex, &expr.Meta{Key: k, Register: 1}) }
	payload := func(base expr.PayloadBase, off, n uint32) {
		ex = append(ex, &expr.Payload{DestRegister: 1, Base: base, Offset: off, Len: n})
	}
	if s.IIf != "" {
		meta(expr.MetaKeyIIFNAME)
		cmp(expr.CmpOpEq, ifname(s.IIf))
	}
	if s.OIf != "" {
		meta(expr.MetaKeyOIFNAME)
		cmp(expr.CmpOpEq, ifname(s.OIf))
	}
	// Both are booleans the kernel loads as one byte (nft_meta_get_eval,
	// nft_rt_get_eval): "exists" is equal to 1, "missing" to 0.
	boolean := func(m IPsecMatch) {
		if m == IPsecExists {
			cmp(expr.CmpOpEq, []byte{1})
		} else {
			cmp(expr.CmpOpEq, []byte{0})
		}
	}
	if s.Decrypted != IPsecAny {
		meta(metaKeySecpath)
		boolean(s.Decrypted)
	}
	if s.Encrypted != IPsecAny {
		ex = append(ex, &expr.Rt{Register: 1, Key: rtKeyXFRM})
		boolean(s.Encrypted)
	}
	fam := s.family()
	if fam != 0 {
		meta(expr.MetaKeyNFPROTO)
		if fam == 4 {
			cmp(expr.CmpOpEq, []byte{unix.NFPROTO_IPV4})
		} else {
			cmp(expr.CmpOpEq, []byte{unix.NFPROTO_IPV6})
		}
	}
	for _, m := range []struct {
		p       netip.Prefix
		off4    uint32
		off6    uint32
		present bool
	}{{s.Src, 12, 8, s.Src.IsValid()}, {s.Dst, 16, 24, s.Dst.IsValid()}} {
		if !m.present {
			continue
		}
		if (m.p.Addr().Is4()) != (fam == 4) {
			return nil, fmt.Errorf("source and destination are of different address families")
		}
		addr := m.p.Masked().Addr().AsSlice()
		off := m.off4
		if fam == 6 {
			off = m.off6
		}
		payload(expr.PayloadBaseNetworkHeader, off, uint32(len(addr)))
		if m.p.Bits() < len(addr)*8 {
			ex = append(ex, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(len(addr)),
				Mask: prefixMask(m.p.Bits(), len(addr)), Xor: make([]byte, len(addr))})
		}
		cmp(expr.CmpOpEq, addr)
	}
	if s.Proto != 0 {
		meta(expr.MetaKeyL4PROTO)
		cmp(expr.CmpOpEq, []byte{s.Proto})
	}
	for _, pm := range []struct {
		r   PortRange
		off uint32
	}{{s.SPort, 0}, {s.DPort, 2}} {
		if pm.r.Lo == 0 {
			continue
		}
		if s.Proto != protoTCP && s.Proto != protoUDP {
			return nil, fmt.Errorf("ports need tcp or udp")
		}
		payload(expr.PayloadBaseTransportHeader, pm.off, 2)
		if pm.r.Lo == pm.r.Hi {
			cmp(expr.CmpOpEq, binaryutil.BigEndian.PutUint16(pm.r.Lo))
		} else {
			cmp(expr.CmpOpGte, binaryutil.BigEndian.PutUint16(pm.r.Lo))
			cmp(expr.CmpOpLte, binaryutil.BigEndian.PutUint16(pm.r.Hi))
		}
	}
	if s.ICMP != nil {
		if s.Proto != protoICMP && s.Proto != protoICMPv6 {
			return nil, fmt.Errorf("an ICMP type needs protocol icmp or icmpv6")
		}
		payload(expr.PayloadBaseTransportHeader, 0, 1)
		if s.ICMP.Lo == s.ICMP.Hi {
			cmp(expr.CmpOpEq, []byte{s.ICMP.Lo})
		} else {
			cmp(expr.CmpOpGte, []byte{s.ICMP.Lo})
			cmp(expr.CmpOpLte, []byte{s.ICMP.Hi})
		}
	}
	if s.TCPSyn {
		if s.Proto != protoTCP {
			return nil, fmt.Errorf("the SYN flag needs protocol tcp")
		}
		payload(expr.PayloadBaseTransportHeader, 13, 1)
		ex = append(ex, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{tcpFlagSYN}, Xor: []byte{0}})
		cmp(expr.CmpOpNeq, []byte{0})
	}
	if s.ToLocal {
		ex = append(ex, &expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true})
		cmp(expr.CmpOpEq, binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL))
	}
	// Conntrack state and status are host-endian bit fields.
	ctBits := func(key expr.CtKey, bits uint32) {
		ex = append(ex,
			&expr.Ct{Key: key, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(bits), Xor: make([]byte, 4)})
		cmp(expr.CmpOpNeq, make([]byte, 4))
	}
	if s.CtState != 0 {
		ctBits(expr.CtKeySTATE, s.CtState)
	}
	if s.CtDNAT {
		ctBits(expr.CtKeySTATUS, ipsDstNAT)
	}

	switch s.Verdict {
	case VerdictAccept:
		ex = append(ex, &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictAccept})
	case VerdictDrop:
		ex = append(ex, &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop})
	case VerdictReject:
		r := &expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}
		if s.Proto == protoTCP {
			r = &expr.Reject{Type: unix.NFT_REJECT_TCP_RST}
		}
		ex = append(ex, &expr.Counter{}, r)
	case VerdictMasquerade:
		ex = append(ex, &expr.Counter{}, &expr.Masq{})
	case VerdictClampMSS:
		if !s.TCPSyn {
			return nil, fmt.Errorf("MSS clamping needs a TCP SYN match")
		}
		// nft's "tcp option maxseg size set rt mtu": the route's MSS
		// (host order, 16 bits) into the option's two bytes at offset 2.
		ex = append(ex, &expr.Counter{},
			&expr.Rt{Register: 1, Key: expr.RtTCPMSS},
			&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 2, Size: 2},
			&expr.Exthdr{SourceRegister: 1, Op: expr.ExthdrOpTcpopt, Type: tcpOptMaxSeg, Offset: 2, Len: 2})
	case VerdictDNAT:
		if !s.DNAT.IsValid() {
			return nil, fmt.Errorf("dnat without an address")
		}
		if fam == 0 {
			// The NAT expression needs the family; match it explicitly.
			return nil, fmt.Errorf("dnat needs the family matched (set by the destination)")
		}
		ex = append(ex, &expr.Counter{}, &expr.Immediate{Register: 1, Data: s.DNAT.AsSlice()})
		nat := &expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegAddrMax: 1, Specified: true}
		if s.DNAT.Is6() {
			nat.Family = unix.NFPROTO_IPV6
		}
		if s.DNATPort != 0 {
			ex = append(ex, &expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(s.DNATPort)})
			nat.RegProtoMin, nat.RegProtoMax = 2, 2
		}
		ex = append(ex, nat)
	case VerdictLog:
		prefix := []byte(s.Log)
		ex = append(ex,
			&expr.Limit{Type: expr.LimitTypePkts, Rate: 10, Unit: expr.LimitTimeSecond, Burst: 20},
			&expr.Counter{},
			&expr.Log{Key: 1 << unix.NFTA_LOG_PREFIX, Data: prefix})
	default:
		return nil, fmt.Errorf("unknown verdict %q", s.Verdict)
	}
	return ex, nil
}

// The TCP SYN flag and the MSS option's kind.
const (
	tcpFlagSYN   = 0x02
	tcpOptMaxSeg = 2
)

// ipsDstNAT is IPS_DST_NAT of enum ip_conntrack_status.
const ipsDstNAT = 1 << 5

// ifname pads an interface name to IFNAMSIZ, as the kernel stores it.
func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

func prefixMask(bits, n int) []byte {
	m := make([]byte, n)
	for i := range m {
		switch {
		case bits >= 8:
			m[i] = 0xff
			bits -= 8
		case bits > 0:
			m[i] = byte(0xff << (8 - bits))
			bits = 0
		}
	}
	return m
}
