package ike

import (
	"crypto/hmac"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"time"
)

// This file is IKEv1's phase 2: quick mode (RFC 2409 5.5) with and without
// PFS, one subnet pair per exchange, the responder-lifetime notify (RFC
// 2407 4.6.3.1), and the informational exchanges: deletes, notifies and
// dead peer detection (RFC 3706).

// v1Quick is one quick mode exchange in progress.
type v1Quick struct {
	msgID     uint32
	initiator bool
	iv        []byte
	ni, nr    []byte
	dh        dhKey
	inSPI     uint32
	local     Selector // our side's selector
	remote    Selector
	reqID     uint32
	replaces  *child
	offered   []Proposal
	out       *v1Pending
	lastIn    []byte // the peer's last message, for its retransmissions
	lastOut   []byte
	pc        *pendingChild // responder: negotiated, waiting for message 3
	life      time.Duration
	done      bool
	doneAt    time.Time
}

func (q *v1Quick) abort(ep *Endpoint) {
	if q.dh != nil {
		q.dh.Zero()
		q.dh = nil
	}
	if !q.done && q.inSPI != 0 {
		ep.freeSPI(q.inSPI)
	}
	if q.pc != nil {
		clear(q.pc.keys.encI)
		clear(q.pc.keys.encR)
		clear(q.pc.keys.integI)
		clear(q.pc.keys.integR)
		q.pc = nil
	}
}

// tick retransmits and expires a quick mode; true when it is finished.
func (q *v1Quick) tick(sa *IKESA, now time.Time) bool {
	if q.done {
		return now.Sub(q.doneAt) > closedMemory
	}
	p := q.out
	if p == nil || now.Before(p.next) {
		return false
	}
	if p.tries >= sa.cfg.retransmitTries() {
		q.abort(sa.ep)
		if q.initiator {
			sa.report(&Failure{Reason: ReasonPeerTimeout, Peer: sa.remote, Stage: "quick mode " + selectorsString([]Selector{q.local}) +
				" to " + selectorsString([]Selector{q.remote}), Tries: p.tries, After: now.Sub(p.first)})
		}
		return true
	}
	if p.tries > 0 {
		sa.ep.Stats.Retransmits.Add(1)
	}
	p.tries++
	p.next = now.Add(sa.cfg.retransmitTimeout() << (p.tries - 1))
	sa.send(p.pkt)
	return false
}

func (sa *IKESA) v1NewMsgID() uint32 {
	var b [4]byte
	for {
		io.ReadFull(sa.ep.rand, b[:])
		id := binary.BigEndian.Uint32(b[:])
		if _, used := sa.v1.quick[id]; id != 0 && !used {
			return id
		}
	}
}

// v1PhaseIV is the first IV of a phase 2 or informational exchange: the
// hash of phase 1's last CBC block and the message ID (RFC 2409 B).
func (sa *IKESA) v1PhaseIV(msgID uint32) []byte {
	v := sa.v1
	m := v.hash()
	m.Write(v.iv)
	m.Write(binary.BigEndian.AppendUint32(nil, msgID))
	return m.Sum(nil)[:len(v.iv)]
}

// v1Protected encodes HASH followed by the payloads, where the hash is
// prf(SKEYID_a, M-ID | pre | payloads).
func (sa *IKESA) v1Protected(msgID uint32, pre []byte, rest []v1Payload) []byte {
	restB := appendV1Payloads(nil, rest)
	h := sa.v1.prf.sum(sa.v1.skeyidA, binary.BigEndian.AppendUint32(nil, msgID), pre, restB)
	next := v1None
	if len(rest) > 0 {
		next = rest[0].Type
	}
	b := append([]byte{byte(next), 0}, binary.BigEndian.AppendUint16(nil, uint16(4+len(h)))...)
	return append(append(b, h...), restB...)
}

// v1Open decrypts a protected phase 2 or informational message and checks
// its leading HASH; it returns the payloads after the HASH, the bytes the
// HASH covered and the last ciphertext block.
func (sa *IKESA) v1Open(pkt []byte, h v1Header, iv []byte) (hashP []byte, rest []v1Payload, covered, last []byte, err error) {
	if h.Flags&v1FlagEncrypted == 0 {
		return nil, nil, nil, nil, fmt.Errorf("unencrypted %v after phase 1: %w", h.Exchange, ErrMalformed)
	}
	ps, plain, last, err := sa.v1Decrypt(pkt, h, iv)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if len(ps) == 0 || ps[0].Type != v1Hash {
		return nil, nil, nil, nil, fmt.Errorf("%v without a leading HASH: %w", h.Exchange, ErrMalformed)
	}
	end := 0
	for _, p := range ps {
		end += 4 + len(p.Body)
	}
	return ps[0].Body, ps[1:], plain[4+len(ps[0].Body) : end], last, nil
}

// v1StartQuickModes starts one quick mode per pair of our selectors that
// has no phase 2 SA yet (after a phase 1 rekey the SA took over the old
// one's).
func (sa *IKESA) v1StartQuickModes() {
	for _, l := range sa.cfg.LocalTS {
		for _, r := range sa.cfg.RemoteTS {
			ls, rs := SelectorFromPrefix(l), SelectorFromPrefix(r)
			if l.Addr().Is4() != r.Addr().Is4() || sa.v1ChildFor(ls, rs) != nil {
				continue
			}
			sa.v1StartQuick(ls, rs, nil)
		}
	}
}

func v1IDOf(s Selector) []byte {
	p, ok := s.prefix()
	if !ok {
		p = netip.PrefixFrom(s.Start, s.Start.BitLen())
	}
	a := p.Addr().AsSlice()
	mask := make([]byte, len(a))
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	t := uint8(v1IDIPv4Subnet)
	if p.Addr().Is6() {
		t = v1IDIPv6Subnet
	}
	return v1IDPayload{Type: t, Data: append(a, mask...)}.encode()
}

// v1SelectorOf reads a quick mode ID: an address, subnet or range, any
// protocol and port only.
func v1SelectorOf(b []byte) (Selector, error) {
	id, err := decodeV1ID(b)
	if err != nil {
		return Selector{}, err
	}
	if id.Protocol != 0 || id.Port != 0 {
		return Selector{}, fmt.Errorf("ID limited to protocol %d port %d: only whole subnets are supported", id.Protocol, id.Port)
	}
	switch id.Type {
	case uint8(IDIPv4), uint8(IDIPv6):
		a, ok := netip.AddrFromSlice(id.Data)
		if !ok {
			return Selector{}, fmt.Errorf("ID address of %d bytes", len(id.Data))
		}
		return SelectorFromPrefix(netip.PrefixFrom(a, a.BitLen())), nil
	case v1IDIPv4Subnet, v1IDIPv6Subnet:
		n := len(id.Data) / 2
		if (n != 4 && n != 16) || len(id.Data) != 2*n {
			return Selector{}, fmt.Errorf("ID subnet of %d bytes", len(id.Data))
		}
		a, _ := netip.AddrFromSlice(id.Data[:n])
		bits, seenZero := 0, false
		for _, c := range id.Data[n:] {
			for i := 7; i >= 0; i-- {
				if c&(1<<i) != 0 {
					if seenZero {
						return Selector{}, fmt.Errorf("ID netmask %x is not contiguous", id.Data[n:])
					}
					bits++
				} else {
					seenZero = true
				}
			}
		}
		return SelectorFromPrefix(netip.PrefixFrom(a, bits)), nil
	case v1IDIPv4Range, v1IDIPv6Range:
		n := len(id.Data) / 2
		if (n != 4 && n != 16) || len(id.Data) != 2*n {
			return Selector{}, fmt.Errorf("ID range of %d bytes", len(id.Data))
		}
		s, _ := netip.AddrFromSlice(id.Data[:n])
		e, _ := netip.AddrFromSlice(id.Data[n:])
		if e.Less(s) {
			return Selector{}, fmt.Errorf("ID range %v-%v is backwards", s, e)
		}
		return Selector{EndPort: 0xffff, Start: s, End: e}, nil
	}
	return Selector{}, fmt.Errorf("ID type %d is not an address", id.Type)
}

func (sa *IKESA) v1Encap() uint64 {
	if sa.v1.peerNATT && sa.encapESP() {
		return v1EncapUDPTunnel
	}
	return v1EncapTunnel
}

// v1StartQuick negotiates a phase 2 SA for one selector pair, or a
// replacement for old.
func (sa *IKESA) v1StartQuick(local, remote Selector, old *child) {
	q := &v1Quick{msgID: sa.v1NewMsgID(), initiator: true, local: local, remote: remote, replaces: old, life: sa.v1ProposedP2Life()}
	q.iv = sa.v1PhaseIV(q.msgID)
	q.ni = make([]byte, 32)
	io.ReadFull(sa.ep.rand, q.ni)
	q.inSPI = sa.ep.allocSPI()
	if old != nil {
		q.reqID = old.reqID
		old.state = childRekeying
	} else {
		q.reqID = sa.ep.newReqID()
	}
	q.offered = sa.cfg.espProposals()
	pfs := sa.pfsGroup()
	rest := []v1Payload{{v1SA, (&v1SAPayload{Proposals: []v1Prop{{Number: 1, Protocol: v1ProtoESP, SPI: be32bytes(q.inSPI),
		Transforms: v1ESPTransforms(q.offered, pfs, sa.v1Encap(), q.life)}}}).encode()}, {v1Nonce, q.ni}}
	if pfs != 0 {
		dh, err := newDHKey(pfs, sa.ep.rand)
		if err != nil {
			sa.ep.freeSPI(q.inSPI)
			return
		}
		q.dh = dh
		rest = append(rest, v1Payload{v1KE, dh.Public()})
	}
	rest = append(rest, v1Payload{v1ID, v1IDOf(local)}, v1Payload{v1ID, v1IDOf(remote)})
	pkt, last := sa.v1Encrypt(sa.v1Header(v1QuickMode, q.msgID), v1Hash, sa.v1Protected(q.msgID, nil, rest), q.iv)
	q.iv = last
	now := sa.ep.now()
	q.out = &v1Pending{pkt: pkt, first: now, next: now.Add(sa.cfg.retransmitTimeout()), tries: 1, what: "quick mode"}
	sa.v1.quick[q.msgID] = q
	if hold := sa.established.wall(now).Add(v1PeerCatchUp); !sa.initiator && !sa.v1.peerSpoke && now.Before(hold) {
		// The tick sends it at hold (as a first send: tries 0).
		q.out.next, q.out.tries = hold, 0
		return
	}
	sa.send(pkt)
}

// v1PeerCatchUp is how long after main mode message 6 the responder holds
// its own first quick mode unless the peer has sent a phase 2 or
// informational message on the ISAKMP SA since. The peer may not have
// processed message 6 yet: strongSwan handles a quick mode that overtakes
// it (its threads can take them in either order) with phase 1's IV,
// cannot decrypt it and answers PAYLOAD-MALFORMED.
const v1PeerCatchUp = 2 * time.Second

// v1Heard notes an authenticated phase 2 or informational message from
// the peer.
func (sa *IKESA) v1Heard() {
	sa.lastRecv = stampOf(sa.ep.now())
	sa.v1.peerSpoke = true
}

// v1QuickMode handles a quick mode message.
func (sa *IKESA) v1QuickMode(pkt []byte, h v1Header, local, remote netip.AddrPort) {
	q := sa.v1.quick[h.MessageID]
	if q != nil && q.lastIn != nil && string(q.lastIn) == string(pkt) {
		if q.lastOut != nil {
			sa.ep.Stats.RetransmitsAnswered.Add(1)
			sa.send(q.lastOut)
		}
		return
	}
	if q != nil && q.done {
		sa.ep.Stats.OutOfWindow.Add(1)
		return
	}
	iv := sa.v1PhaseIV(h.MessageID)
	if q != nil {
		iv = q.iv
	}
	hashP, rest, covered, last, err := sa.v1Open(pkt, h, iv)
	if err != nil {
		sa.ep.Stats.BadICV.Add(1)
		return
	}
	mid := binary.BigEndian.AppendUint32(nil, h.MessageID)
	switch {
	case q == nil:
		if !hmac.Equal(hashP, sa.v1.prf.sum(sa.v1.skeyidA, mid, covered)) {
			sa.ep.Stats.BadICV.Add(1)
			return
		}
		sa.v1Heard()
		sa.v1Float(local, remote)
		sa.v1QuickRequest(pkt, h.MessageID, rest, last)
	case q.initiator:
		if !hmac.Equal(hashP, sa.v1.prf.sum(sa.v1.skeyidA, mid, q.ni, covered)) {
			sa.ep.Stats.BadICV.Add(1)
			return
		}
		sa.v1Heard()
		sa.v1QuickResponse(q, pkt, rest, last)
	default:
		want := sa.v1.prf.sum(sa.v1.skeyidA, []byte{0}, mid, q.ni, q.nr)
		if !hmac.Equal(hashP, want) || q.pc == nil {
			sa.ep.Stats.BadICV.Add(1)
			return
		}
		sa.v1Heard()
		pc := q.pc
		q.pc, q.out, q.done, q.doneAt = nil, nil, true, sa.ep.now()
		sa.v1AddChild(pc, q, false)
	}
}

// v1Offer reads the SA, nonce, KE and IDs of a quick mode message.
type v1Offer struct {
	sa              *v1SAPayload
	nonce, ke       []byte
	idci, idcr      *Selector
	responderLife   time.Duration
	responderLifeOK bool
}

func (sa *IKESA) v1ReadQuick(ps []v1Payload) (*v1Offer, error) {
	o := &v1Offer{}
	var ids [][]byte
	for _, p := range ps {
		switch p.Type {
		case v1SA:
			s, err := decodeV1SA(p.Body)
			if err != nil {
				return nil, err
			}
			o.sa = s
		case v1Nonce:
			o.nonce = p.Body
		case v1KE:
			o.ke = p.Body
		case v1ID:
			ids = append(ids, p.Body)
		case v1Notify:
			n, err := decodeV1Notify(p.Body)
			if err == nil && n.Type == v1ResponderLifetime {
				if l, why := v1Lifetime(mustAttrs(n.Data), v1ESPAttrLifeType, v1ESPAttrLifeDur); why == "" && l > 0 {
					o.responderLife, o.responderLifeOK = l, true
				}
			}
		}
	}
	if o.sa == nil || o.nonce == nil || len(o.nonce) < 8 || len(o.nonce) > 256 {
		return nil, fmt.Errorf("quick mode message lacks SA or nonce")
	}
	switch len(ids) {
	case 0:
	case 2:
		i, err := v1SelectorOf(ids[0])
		if err != nil {
			return nil, err
		}
		r, err := v1SelectorOf(ids[1])
		if err != nil {
			return nil, err
		}
		o.idci, o.idcr = &i, &r
	default:
		return nil, fmt.Errorf("quick mode message with %d IDs", len(ids))
	}
	return o, nil
}

func mustAttrs(b []byte) []v1Attr {
	a, _ := decodeV1Attrs(b)
	return a
}

// v1QuickRequest is the responder's answer to quick mode message 1.
func (sa *IKESA) v1QuickRequest(pkt []byte, msgID uint32, ps []v1Payload, last []byte) {
	stage := "quick mode"
	o, err := sa.v1ReadQuick(ps)
	if err != nil {
		sa.report(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Stage: stage, Detail: err.Error()})
		sa.v1Notify(v1PayloadMalformed, v1ProtoESP, nil, nil)
		return
	}
	// Without IDs the SA is between the two gateways (RFC 2409 5.5).
	peerSide := SelectorFromPrefix(netip.PrefixFrom(sa.remote.Addr(), sa.remote.Addr().BitLen()))
	ourSide := SelectorFromPrefix(netip.PrefixFrom(sa.local.Addr(), sa.local.Addr().BitLen()))
	if o.idci != nil {
		peerSide, ourSide = *o.idci, *o.idcr
	}
	if !withinAny(peerSide, selectorsOf(sa.cfg.RemoteTS)) || !withinAny(ourSide, selectorsOf(sa.cfg.LocalTS)) {
		sa.v1Notify(v1InvalidIDInfo, v1ProtoESP, nil, nil)
		sa.report(&Failure{Reason: ReasonTSUnacceptable, Peer: sa.remote, Stage: stage,
			OurLocalTS: selectorsOf(sa.cfg.LocalTS), OurRemoteTS: selectorsOf(sa.cfg.RemoteTS),
			PeerLocalTS: []Selector{peerSide}, PeerRemoteTS: []Selector{ourSide}})
		return
	}
	var prop v1Prop
	found := false
	for _, p := range o.sa.Proposals {
		if p.Protocol == v1ProtoESP && len(p.SPI) == 4 {
			prop, found = p, true
			break
		}
	}
	ours := sa.cfg.espProposals()
	var theirs []Proposal
	if found {
		for _, t := range prop.Transforms {
			p, _, _, _ := v1ESPProposal(t)
			theirs = append(theirs, p)
		}
	}
	encapWant := sa.v1Encap()
	var chosen Proposal
	ti := -1
	if found {
		chosen, ti, found = v1Choose(ours, prop.Transforms, func(t v1Transform) (Proposal, bool) {
			p, encap, _, why := v1ESPProposal(t)
			udp := encap != v1EncapTunnel
			return p, why == "" && udp == (encapWant != v1EncapTunnel)
		})
	}
	if !found {
		sa.v1Notify(v1NoProposalChosen, v1ProtoESP, nil, nil)
		sa.report(&Failure{Reason: ReasonNoProposalChosen, Peer: sa.remote, Stage: stage, OurProposals: ours, PeerProposals: theirs,
			Detail: sa.v1EncapMismatch(ours, prop.Transforms, encapWant)})
		return
	}
	t := prop.Transforms[ti]
	_, _, life, _ := v1ESPProposal(t)
	q := &v1Quick{msgID: msgID, local: ourSide, remote: peerSide, ni: append([]byte(nil), o.nonce...), life: sa.v1ProposedP2Life()}
	var respLife []v1Payload
	if life > q.life {
		attrs := appendV1Attrs(nil, []v1Attr{{Type: v1ESPAttrLifeType, Value: v1LifeSeconds},
			{Type: v1ESPAttrLifeDur, Value: uint64(q.life / time.Second), TLV: true}})
		respLife = append(respLife, v1Payload{v1Notify, v1NotifyPayload{Protocol: v1ProtoESP, Type: v1ResponderLifetime,
			SPI: prop.SPI, Data: attrs}.encode()})
	} else if life > 0 {
		q.life = life
	}
	var gxy, ke []byte
	if len(chosen.DH) == 1 {
		if o.ke == nil {
			sa.v1Notify(v1NoProposalChosen, v1ProtoESP, nil, nil)
			sa.report(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Stage: stage, Detail: "PFS chosen but the peer sent no KE payload"})
			return
		}
		dh, err := newDHKey(chosen.DH[0], sa.ep.rand)
		if err != nil {
			return
		}
		defer dh.Zero()
		if gxy, err = dh.Shared(o.ke); err != nil {
			sa.report(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Stage: stage, Detail: err.Error()})
			return
		}
		defer clear(gxy)
		ke = dh.Public()
	}
	q.nr = make([]byte, 32)
	io.ReadFull(sa.ep.rand, q.nr)
	q.inSPI = sa.ep.allocSPI()
	outSPI := be32(prop.SPI)
	keys, err := sa.v1Keymat(chosen, gxy, q.ni, q.nr, q.inSPI, outSPI)
	if err != nil {
		sa.ep.freeSPI(q.inSPI)
		return
	}
	q.reqID = sa.ep.newReqID()
	if old := sa.v1ChildFor(ourSide, peerSide); old != nil {
		q.replaces = old
		q.reqID = old.reqID
	}
	q.pc = &pendingChild{c: &child{reqID: q.reqID, prop: internProposal(chosen), inSPI: q.inSPI, outSPI: outSPI,
		localTS: []Selector{ourSide}, remoteTS: []Selector{peerSide}}, keys: keys}
	rest := []v1Payload{{v1SA, (&v1SAPayload{Proposals: []v1Prop{{Number: prop.Number, Protocol: v1ProtoESP,
		SPI: be32bytes(q.inSPI), Transforms: []v1Transform{t}}}}).encode()}, {v1Nonce, q.nr}}
	if ke != nil {
		rest = append(rest, v1Payload{v1KE, ke})
	}
	if o.idci != nil {
		rest = append(rest, v1Payload{v1ID, v1IDOf(peerSide)}, v1Payload{v1ID, v1IDOf(ourSide)})
	}
	rest = append(rest, respLife...)
	out, lastOut := sa.v1Encrypt(sa.v1Header(v1QuickMode, msgID), v1Hash, sa.v1Protected(msgID, q.ni, rest), last)
	q.iv = lastOut
	q.lastIn, q.lastOut = append([]byte(nil), pkt...), out
	now := sa.ep.now()
	q.out = &v1Pending{pkt: out, first: now, next: now.Add(sa.cfg.retransmitTimeout()), tries: 1, what: "quick mode message 2"}
	sa.v1.quick[msgID] = q
	sa.send(out)
}

// v1EncapMismatch says why no transform was chosen when the algorithms
// of one would do and only its encapsulation mode differs from what the
// NAT detection decided (want): the lists of algorithms alone would read
// as if they matched. "" when the algorithms do not match either.
func (sa *IKESA) v1EncapMismatch(ours []Proposal, theirs []v1Transform, want uint64) string {
	_, i, ok := v1Choose(ours, theirs, func(t v1Transform) (Proposal, bool) {
		p, _, _, why := v1ESPProposal(t)
		return p, why == ""
	})
	if !ok {
		return ""
	}
	_, offered, _, _ := v1ESPProposal(theirs[i])
	if want == v1EncapTunnel {
		return fmt.Sprintf("the peer offers ESP in UDP (encapsulation mode %d), but NAT detection found no NAT between us: "+
			"the peer should offer bare ESP, or announce a NAT to force UDP (libreswan's encapsulation=yes)", offered)
	}
	why := "a NAT is between us"
	if sa.cfg.ForceEncap {
		why = "we carry ESP only in UDP (our data plane is the userspace one) and announced a NAT for it"
	}
	return "the peer offers ESP without UDP encapsulation (encapsulation mode " + strconv.FormatUint(offered, 10) + "), but " + why +
		": the peer ignores NAT detection (libreswan's encapsulation=no; set auto or yes)"
}

// v1ChildFor finds an installed phase 2 SA for the selector pair.
func (sa *IKESA) v1ChildFor(local, remote Selector) *child {
	for _, c := range sa.children {
		if (c.state == childInstalled || c.state == childRekeying) && len(c.localTS) == 1 && len(c.remoteTS) == 1 &&
			c.localTS[0] == local && c.remoteTS[0] == remote {
			return c
		}
	}
	return nil
}

// v1QuickResponse is the initiator's handling of quick mode message 2.
func (sa *IKESA) v1QuickResponse(q *v1Quick, pkt []byte, ps []v1Payload, last []byte) {
	stage := "quick mode"
	fail := func(f *Failure) {
		q.abort(sa.ep)
		delete(sa.v1.quick, q.msgID)
		if q.replaces != nil && q.replaces.state == childRekeying {
			q.replaces.state = childInstalled
		}
		sa.report(f)
	}
	o, err := sa.v1ReadQuick(ps)
	if err != nil {
		fail(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Stage: stage, Detail: err.Error()})
		return
	}
	if len(o.sa.Proposals) != 1 || len(o.sa.Proposals[0].Transforms) != 1 || len(o.sa.Proposals[0].SPI) != 4 {
		fail(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Stage: stage, Detail: "the answer does not hold one chosen transform"})
		return
	}
	p, _, life, why := v1ESPProposal(o.sa.Proposals[0].Transforms[0])
	if why != "" || !acceptable(q.offered, p) {
		fail(&Failure{Reason: ReasonNoProposalChosen, Peer: sa.remote, Stage: stage, OurProposals: q.offered,
			PeerProposals: []Proposal{p}, Detail: "the peer chose a proposal we did not offer"})
		return
	}
	if o.idci != nil && (*o.idci != q.local || *o.idcr != q.remote) {
		fail(&Failure{Reason: ReasonTSUnacceptable, Peer: sa.remote, Stage: stage, OurLocalTS: []Selector{q.local}, OurRemoteTS: []Selector{q.remote},
			PeerLocalTS: []Selector{*o.idcr}, PeerRemoteTS: []Selector{*o.idci}, Detail: "the peer changed our IDs"})
		return
	}
	if life > 0 && life < q.life {
		q.life = life
	}
	if o.responderLifeOK && o.responderLife < q.life {
		q.life = o.responderLife
	}
	var gxy []byte
	if len(p.DH) == 1 {
		if q.dh == nil || o.ke == nil {
			fail(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Stage: stage, Detail: "PFS group or KE payload does not match our offer"})
			return
		}
		if gxy, err = q.dh.Shared(o.ke); err != nil {
			fail(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Stage: stage, Detail: err.Error()})
			return
		}
		defer clear(gxy)
	}
	if q.dh != nil {
		q.dh.Zero()
		q.dh = nil
	}
	q.nr = append([]byte(nil), o.nonce...)
	outSPI := be32(o.sa.Proposals[0].SPI)
	keys, err := sa.v1Keymat(p, gxy, q.ni, q.nr, q.inSPI, outSPI)
	if err != nil {
		fail(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Stage: stage, Detail: err.Error()})
		return
	}
	mid := binary.BigEndian.AppendUint32(nil, q.msgID)
	h3 := sa.v1.prf.sum(sa.v1.skeyidA, []byte{0}, mid, q.ni, q.nr)
	chain := append([]byte{0, 0}, binary.BigEndian.AppendUint16(nil, uint16(4+len(h3)))...)
	out, _ := sa.v1Encrypt(sa.v1Header(v1QuickMode, q.msgID), v1Hash, append(chain, h3...), last)
	q.lastIn, q.lastOut = append([]byte(nil), pkt...), out
	q.out, q.done, q.doneAt = nil, true, sa.ep.now()
	sa.send(out)
	pc := &pendingChild{c: &child{reqID: q.reqID, prop: internProposal(p), inSPI: q.inSPI, outSPI: outSPI,
		localTS: []Selector{q.local}, remoteTS: []Selector{q.remote}}, keys: keys}
	sa.v1AddChild(pc, q, true)
}

// v1Keymat derives both directions' keys (RFC 2409 5.5): KEYMAT =
// prf(SKEYID_d, [g^xy |] protocol | SPI | Ni_b | Nr_b), stretched, for the
// SPI the receiving end chose. The keys come back in childKeys' outbound
// (encI, integI) and inbound (encR, integR) slots.
func (sa *IKESA) v1Keymat(p Proposal, gxy, ni, nr []byte, inSPI, outSPI uint32) (*childKeys, error) {
	elen, err := encrKeyLen(p.Encryption[0])
	if err != nil {
		return nil, err
	}
	alen := 0
	if len(p.Integrity) > 0 {
		if _, alen, _, err = integInfo(p.Integrity[0]); err != nil {
			return nil, err
		}
	}
	km := func(spi uint32) []byte {
		seed := make([]byte, 0, len(gxy)+5+len(ni)+len(nr))
		seed = append(append(seed, gxy...), v1ProtoESP)
		seed = append(append(append(seed, be32bytes(spi)...), ni...), nr...)
		defer clear(seed)
		var out, last []byte
		for len(out) < elen+alen {
			last = sa.v1.prf.sum(sa.v1.skeyidD, last, seed)
			out = append(out, last...)
		}
		return out[:elen+alen]
	}
	in, out := km(inSPI), km(outSPI)
	return &childKeys{encI: out[:elen], integI: out[elen:], encR: in[:elen], integR: in[elen:]}, nil
}

// v1AddChild installs a negotiated phase 2 SA; weInitiated is who ran the
// quick mode.
func (sa *IKESA) v1AddChild(pc *pendingChild, q *v1Quick, weInitiated bool) {
	replaces := uint32(0)
	old := q.replaces
	if old != nil && sa.childByInSPI(old.inSPI) == old {
		replaces = old.inSPI
	} else {
		old = nil
	}
	// childKeys hold outbound keys in the I slots: addChild's initiator view.
	sa.addChild(pc, true, replaces)
	c := pc.c
	now := sa.ep.now()
	c.rekeyAt, c.expireAt = 0, 0
	if q.life > 0 {
		soft := q.life * 10 / 11
		if weInitiated {
			c.rekeyAt = stampOf(now.Add(sa.jitter(soft)))
		} else {
			c.rekeyAt = stampOf(now.Add(soft + (q.life-soft)/2))
		}
		if sa.cfg.ChildLifetime == 0 && !weInitiated {
			c.rekeyAt = 0
		}
		c.expireAt = stampOf(now.Add(q.life))
	}
	if old == nil {
		return
	}
	if weInitiated {
		sa.v1DeleteChild(old, nil)
		return
	}
	// The peer's rekey: its DELETE of the old SA follows, or it expires.
	old.state = childRekeyed
	old.rekeyAt = 0
	if grace := stampOf(now.Add(closedMemory)); old.expireAt.IsZero() || grace.before(old.expireAt) {
		old.expireAt = grace
	}
}

// v1DeleteChild tells the peer and removes the phase 2 SA.
func (sa *IKESA) v1DeleteChild(c *child, reason error) {
	sa.v1Delete(v1ProtoESP, [][]byte{be32bytes(c.inSPI)})
	c.state = childDeleting
	sa.removeChild(c, reason)
}

// v1Notify sends an informational exchange with one notify.
func (sa *IKESA) v1Notify(t v1NotifyType, proto uint8, spi, data []byte) {
	sa.v1Info(v1Payload{v1Notify, v1NotifyPayload{Protocol: proto, Type: t, SPI: spi, Data: data}.encode()})
}

// v1Delete sends an informational exchange with one delete.
func (sa *IKESA) v1Delete(proto uint8, spis [][]byte) {
	sa.v1Info(v1Payload{v1Delete, v1DeletePayload{Protocol: proto, SPIs: spis}.encode()})
}

func (sa *IKESA) v1Info(p v1Payload) {
	if sa.v1.encKey == nil || sa.v1.skeyidA == nil {
		return
	}
	msgID := sa.v1NewMsgID()
	pkt, _ := sa.v1Encrypt(sa.v1Header(v1Informational, msgID), v1Hash, sa.v1Protected(msgID, nil, []v1Payload{p}), sa.v1PhaseIV(msgID))
	sa.send(pkt)
}

// v1Informational handles deletes and notifies from the peer.
func (sa *IKESA) v1Informational(pkt []byte, h v1Header, local, remote netip.AddrPort) {
	v := sa.v1
	var ps []v1Payload
	if h.Flags&v1FlagEncrypted == 0 {
		// Unprotected: only believed while phase 1 is under way, where the
		// peer has no keys to protect its refusal with.
		if v.stage == v1Done {
			sa.ep.Stats.Malformed.Add(1)
			return
		}
		var err error
		if ps, err = decodeV1Payloads(h.NextPayload, pkt[HeaderLen:], false); err != nil {
			sa.ep.Stats.Malformed.Add(1)
			return
		}
	} else {
		if v.skeyidA == nil {
			sa.ep.Stats.Malformed.Add(1)
			return
		}
		hashP, rest, covered, _, err := sa.v1Open(pkt, h, sa.v1PhaseIV(h.MessageID))
		if err != nil || !hmac.Equal(hashP, v.prf.sum(v.skeyidA, binary.BigEndian.AppendUint32(nil, h.MessageID), covered)) {
			if v.stage == v1SentMM5 {
				// The peer's key differs from ours: it could not read
				// message 5 and tells us so with keys we do not share.
				sa.v1Fail(&Failure{Reason: ReasonAuthenticationFailed, ByPeer: true, Peer: sa.remote, Stage: "main mode message 5",
					Detail: "we are " + sa.cfg.LocalID.String() + "; the peer's notice does not decrypt with our key either: the pre-shared keys differ"})
				return
			}
			sa.ep.Stats.BadICV.Add(1)
			return
		}
		ps = rest
		sa.v1Heard()
		sa.v1Float(local, remote)
	}
	for _, p := range ps {
		switch p.Type {
		case v1Notify:
			n, err := decodeV1Notify(p.Body)
			if err != nil {
				sa.ep.Stats.Malformed.Add(1)
				continue
			}
			sa.v1GotNotify(n)
		case v1Delete:
			d, err := decodeV1Delete(p.Body)
			if err != nil || h.Flags&v1FlagEncrypted == 0 {
				sa.ep.Stats.Malformed.Add(1)
				continue
			}
			sa.v1GotDelete(d)
		}
		if sa.state == StateDead {
			return
		}
	}
}

func (sa *IKESA) v1GotNotify(n v1NotifyPayload) {
	v := sa.v1
	switch n.Type {
	case v1RUThere:
		if v.stage == v1Done && len(n.Data) == 4 {
			sa.v1Notify(v1RUThereAck, v1ProtoISAKMP, cookies(sa.spiI, sa.spiR), n.Data)
		}
		return
	case v1RUThereAck:
		if len(n.Data) == 4 && binary.BigEndian.Uint32(n.Data) == v.dpdSeq {
			v.dpdTries = 0
		}
		return
	case v1InitialContact, v1ResponderLifetime, v1ReplayStatus:
		return
	}
	if n.Type >= 16384 {
		return // other status notifies
	}
	f := &Failure{ByPeer: true, Peer: sa.remote, Notify: NotifyType(n.Type), Detail: n.Type.String()}
	if v.stage != v1Done {
		f.Stage = v.stage.message()
		f.OurProposals = sa.cfg.ikeProposals()
		switch {
		case n.Type == v1NoProposalChosen:
			f.Reason = ReasonNoProposalChosen
		case v.stage == v1SentMM5 || n.Type == v1AuthFailed || n.Type == v1InvalidIDInfo:
			f.Reason = ReasonAuthenticationFailed
			f.Detail = fmt.Sprintf("it said %v; we are %s", n.Type, sa.cfg.LocalID)
		default:
			f.Reason = ReasonProtocol
		}
		sa.v1Fail(f)
		return
	}
	// An error about a quick mode of ours.
	for id, q := range v.quick {
		if !q.initiator || q.done {
			continue
		}
		f.Stage = "quick mode " + selectorsString([]Selector{q.local}) + " to " + selectorsString([]Selector{q.remote})
		switch n.Type {
		case v1NoProposalChosen:
			f.Reason, f.OurProposals = ReasonNoProposalChosen, q.offered
		case v1InvalidIDInfo:
			f.Reason, f.OurLocalTS, f.OurRemoteTS = ReasonTSUnacceptable, []Selector{q.local}, []Selector{q.remote}
		default:
			f.Reason = ReasonProtocol
		}
		q.abort(sa.ep)
		delete(v.quick, id)
		if q.replaces != nil && q.replaces.state == childRekeying {
			q.replaces.state = childInstalled
		}
		sa.report(f)
		return
	}
	f.Reason = ReasonProtocol
	f.Stage = "informational"
	sa.report(f)
}

// v1Successor returns a newer established ISAKMP SA of the tunnel with the
// same peer (one that replaced sa by a phase 1 rekey), locked, or nil.
// Called with sa.mu held: only SAs created after sa are locked (older
// first).
func (sa *IKESA) v1Successor() *IKESA {
	for _, o := range sa.ep.SAsOf(sa.cfg) {
		if o == sa || o.v1 == nil || !sa.created.before(o.created) {
			continue
		}
		o.mu.Lock()
		if o.state == StateEstablished && o.remote.Addr() == sa.remote.Addr() {
			return o
		}
		o.mu.Unlock()
	}
	return nil
}

func (sa *IKESA) v1GotDelete(d v1DeletePayload) {
	switch d.Protocol {
	case v1ProtoISAKMP:
		for _, s := range d.SPIs {
			if len(s) == 16 && binary.BigEndian.Uint64(s) == sa.spiI && binary.BigEndian.Uint64(s[8:]) == sa.spiR {
				if n := sa.v1Successor(); n != nil {
					// The end of a phase 1 rekey: the phase 2 SAs live on
					// under the new ISAKMP SA, which took them at its main
					// mode, or takes them now if this one was busy then.
					n.v1Adopt(sa)
					n.mu.Unlock()
					sa.die(nil)
					return
				}
				sa.fail(&Failure{Reason: ReasonPeerDeleted, ByPeer: true, Peer: sa.remote, Detail: "ISAKMP SA"})
				return
			}
		}
	case v1ProtoESP:
		for _, s := range d.SPIs {
			if len(s) != 4 {
				continue
			}
			c := sa.childByOutSPI(be32(s))
			if c == nil {
				continue
			}
			var reason error
			if c.state != childRekeyed {
				reason = &Failure{Reason: ReasonPeerDeleted, ByPeer: true, Peer: sa.remote, Detail: "phase 2 SA " + spiString(c.inSPI)}
			}
			c.state = childDeleting
			sa.removeChild(c, reason)
		}
	}
}
