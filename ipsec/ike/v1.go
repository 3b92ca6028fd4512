package ike

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"net/netip"
	"time"
)

// This file is IKEv1's phase 1: main mode with pre-shared keys (RFC 2409
// 5, 5.4), its keys and message protection, NAT-T detection (RFC 3947)
// and the dispatch of an ISAKMP SA's messages. An ISAKMP SA is an IKESA
// with v1 state, so that iked sees one kind of SA: the same events,
// Status, Delete and ChildUp hand-off as IKEv2.

// v1Stage is where a phase 1 negotiation is.
type v1Stage int

const (
	v1SentMM1 v1Stage = iota + 1 // initiator
	v1SentMM3
	v1SentMM5
	v1SentMM2 // responder
	v1SentMM4
	v1Done
)

func (s v1Stage) message() string {
	switch s {
	case v1SentMM1:
		return "main mode message 1"
	case v1SentMM3:
		return "main mode message 3"
	case v1SentMM5:
		return "main mode message 5"
	case v1SentMM2:
		return "main mode message 2"
	case v1SentMM4:
		return "main mode message 4"
	}
	return "main mode"
}

// v1State is the IKEv1 part of an ISAKMP SA (under the IKESA's lock).
type v1State struct {
	stage v1Stage

	hash   func() hash.Hash // the negotiated hash: plain for IVs, HMAC as prf
	prf    prf
	cipher func(key []byte) (cipher.Block, error)
	encKey []byte
	keyLen int

	skeyidD, skeyidA, skeyid []byte
	iv                       []byte // phase 1 CBC chain; after message 6 the last block

	saiB     []byte      // the initiator's SA payload body (HASH_I, HASH_R sign it)
	chosen   v1Transform // the phase 1 transform chosen
	propNum  uint8
	dh       dhKey
	gxi, gxr []byte
	ni, nr   []byte
	peerNATT bool // the peer sent the RFC 3947 vendor ID
	peerDPD  bool
	// peerSpoke: the peer sent an authenticated phase 2 or informational
	// message on this ISAKMP SA (see v1PeerCatchUp).
	peerSpoke bool
	life      time.Duration // agreed phase 1 lifetime (0: none)

	out     *v1Pending // our phase 1 message awaiting the answer (initiator)
	lastIn  [32]byte   // SHA-256 of the peer's last phase 1 message (both roles)
	lastOut []byte     // our answer to it, for its retransmissions

	quick map[uint32]*v1Quick // quick modes in progress, by message ID

	dpdSeq   uint32
	dpdTries int
	dpdFirst time.Time
	dpdNext  time.Time

	// reauthOf is the ISAKMP SA this one replaces (our phase 1 rekey),
	// until v1TakeOver marked it REKEYED.
	reauthOf *IKESA
	// takeOver: v1TakeOver found an older ISAKMP SA of the tunnel busy;
	// each tick tries again.
	takeOver bool
	// retireAt is when a REKEYED ISAKMP SA deletes itself.
	retireAt stamp
}

// v1RetireDelay is how long an ISAKMP SA replaced by our phase 1 rekey
// stays (REKEYED) before we delete it. The phase 2 SAs move to the new one
// at once at our end, but strongSwan moves them at its end in a job of its
// own after main mode (adopt_children_job) and ends every phase 2 SA still
// under an ISAKMP SA that is deleted before that job ran: a DELETE sent
// right after message 6 could overtake it on a busy machine, and we would
// go on sending into SAs the peer no longer has. strongSwan itself deletes
// the ISAKMP SA it replaced 10 s after that job.
const v1RetireDelay = 10 * time.Second

// v1Pending is a message of ours waiting for an answer, retransmitted.
type v1Pending struct {
	pkt         []byte
	first, next time.Time
	tries       int
	what        string
}

func (sa *IKESA) v1Send(pkt []byte, what string) {
	now := sa.ep.now()
	sa.v1.out = &v1Pending{pkt: pkt, first: now, next: now.Add(sa.cfg.retransmitTimeout()), tries: 1, what: what}
	sa.send(pkt)
}

// v1Header builds a header for this ISAKMP SA.
func (sa *IKESA) v1Header(ex v1Exchange, msgID uint32) v1Header {
	return v1Header{CkyI: sa.spiI, CkyR: sa.spiR, Exchange: ex, MessageID: msgID}
}

func newV1InitiatorSA(ep *Endpoint, cfg *PeerConfig) (*IKESA, error) {
	if !cfg.Remote.IsValid() || !cfg.Local.IsValid() {
		return nil, fmt.Errorf("local and remote address required")
	}
	if cfg.LocalAuth == AuthByCert || cfg.RemoteAuth == AuthByCert {
		return nil, fmt.Errorf("IKEv1 is supported with pre-shared keys only, not certificates")
	}
	if len(v1Phase1Transforms(cfg.ikeProposals(), 0)) == 0 {
		return nil, fmt.Errorf("no IKE proposal IKEv1 can carry (IKEv1 protects its messages with AES-CBC or 3DES, not AEAD): %s", ProposalsString(cfg.ikeProposals()))
	}
	sa := &IKESA{ep: ep, cfg: cfg, initiator: true, state: StateInitSent, local: cfg.Local, remote: cfg.Remote,
		created: stampOf(ep.now()), v1: &v1State{quick: map[uint32]*v1Quick{}}}
	sa.spiI = ep.randUint64()
	return sa, nil
}

// v1Start sends main mode message 1: our proposals and vendor IDs.
func (sa *IKESA) v1Start() {
	sa.v1.saiB = (&v1SAPayload{Proposals: []v1Prop{{Number: 1, Protocol: v1ProtoISAKMP,
		Transforms: v1Phase1Transforms(sa.cfg.ikeProposals(), sa.v1ProposedP1Life())}}}).encode()
	ps := []v1Payload{{v1SA, sa.v1.saiB}, {v1Vendor, v1VendorNATT}, {v1Vendor, v1VendorDPD}}
	sa.v1.stage = v1SentMM1
	sa.v1Send(encodeV1Plain(sa.v1Header(v1MainMode, 0), ps), "main mode message 1")
}

// v1ProposedP1Life is the phase 1 lifetime we propose: the hard one.
func (sa *IKESA) v1ProposedP1Life() time.Duration {
	if sa.cfg.IKELifetime > 0 {
		return sa.cfg.IKELifetime + sa.cfg.IKELifetime/10
	}
	return v1DefaultP1Life
}

func (sa *IKESA) v1ProposedP2Life() time.Duration {
	if sa.cfg.ChildLifetime > 0 {
		return sa.cfg.ChildLifetime + sa.cfg.ChildLifetime/10
	}
	return v1DefaultP2Life
}

// handleV1 is the Endpoint's entry for ISAKMP messages.
func (ep *Endpoint) handleV1(pkt []byte, local, remote netip.AddrPort) {
	h, err := decodeV1Header(pkt)
	if err != nil {
		ep.Stats.Malformed.Add(1)
		return
	}
	pkt = pkt[:h.Length]
	if h.CkyR == 0 {
		if h.Exchange == v1Informational {
			// A refusal of our message 1 by a responder that kept no
			// state for it: libreswan sends its NO_PROPOSAL_CHOSEN with
			// no responder cookie (strongSwan sends one of its own).
			ep.mu.Lock()
			sa := ep.sas[h.CkyI]
			ep.mu.Unlock()
			if sa == nil || sa.v1 == nil || !sa.initiator || sa.remote.Addr() != remote.Addr() {
				ep.Stats.UnknownSPI.Add(1)
				return
			}
			sa.mu.Lock()
			if sa.spiR != 0 || h.Flags&v1FlagEncrypted != 0 {
				// Past message 2 the peer has a cookie for this SA.
				sa.mu.Unlock()
				ep.Stats.Malformed.Add(1)
				return
			}
			sa.v1Handle(pkt, h, local, remote)
			ev := sa.takeEvents()
			sa.mu.Unlock()
			runEvents(ev)
			return
		}
		if h.Exchange != v1MainMode && h.Exchange != v1Aggressive {
			ep.Stats.UnknownSPI.Add(1)
			return
		}
		ep.mu.Lock()
		existing := ep.initIndex[initKey{remote, h.CkyI}]
		ep.mu.Unlock()
		if existing != nil {
			existing.mu.Lock()
			existing.v1Handle(pkt, h, local, remote)
			ev := existing.takeEvents()
			existing.mu.Unlock()
			runEvents(ev)
			return
		}
		ep.v1HandleMM1(pkt, h, local, remote)
		return
	}
	ep.mu.Lock()
	sa := ep.sas[h.CkyR]
	if sa == nil || sa.v1 == nil || sa.initiator || sa.spiI != h.CkyI {
		sa = ep.sas[h.CkyI]
		if sa != nil && (sa.v1 == nil || !sa.initiator || (sa.spiR != 0 && sa.spiR != h.CkyR)) {
			sa = nil
		}
	}
	ep.mu.Unlock()
	if sa == nil {
		ep.Stats.UnknownSPI.Add(1)
		return
	}
	sa.mu.Lock()
	sa.v1Handle(pkt, h, local, remote)
	ev := sa.takeEvents()
	sa.mu.Unlock()
	runEvents(ev)
}

// v1HandleMM1 answers main mode message 1 (or refuses aggressive mode).
func (ep *Endpoint) v1HandleMM1(pkt []byte, h v1Header, local, remote netip.AddrPort) {
	if len(pkt) > ep.cfg.MaxInitSize {
		ep.Stats.InitTooLarge.Add(1)
		return
	}
	var cfg *PeerConfig
	if ep.cfg.PeerFor != nil {
		cfg = ep.cfg.PeerFor(local, remote)
	}
	if cfg == nil {
		ep.Stats.NoConfig.Add(1)
		return
	}
	report := func(f *Failure) {
		if ep.cfg.Events.Failure != nil {
			ep.cfg.Events.Failure(cfg, f)
		}
	}
	refuse := func(n v1NotifyType) {
		// An unprotected informational: there are no keys yet.
		hdr := v1Header{CkyI: h.CkyI, CkyR: ep.randUint64(), Exchange: v1Informational}
		ep.sendRaw(encodeV1Plain(hdr, []v1Payload{{v1Notify, v1NotifyPayload{Protocol: v1ProtoISAKMP, Type: n}.encode()}}), local, remote)
	}
	if cfg.Version != 1 {
		report(&Failure{Reason: ReasonWrongVersion, Peer: remote, Stage: h.Exchange.String(),
			Detail: "the peer speaks IKEv1 " + h.Exchange.String() + "; set ike_version 1 on this tunnel (it is set to IKEv2)"})
		return
	}
	if cfg.LocalAuth == AuthByCert || cfg.RemoteAuth == AuthByCert {
		refuse(v1NoProposalChosen)
		report(&Failure{Reason: ReasonProtocol, Peer: remote, Stage: h.Exchange.String(),
			Detail: "this IKEv1 tunnel is set to certificates; flashgate speaks IKEv1 with pre-shared keys only"})
		return
	}
	if h.Exchange == v1Aggressive {
		refuse(v1InvalidExchangeType)
		report(&Failure{Reason: ReasonProtocol, Peer: remote, Stage: "aggressive mode",
			Detail: "the peer wants IKEv1 aggressive mode, which flashgate refuses: it sends the pre-shared key's hash unprotected, so anyone who sees it can crack the key offline; configure main mode (identity protection) on the peer"})
		return
	}
	ps, err := decodeV1Payloads(h.NextPayload, pkt[HeaderLen:], false)
	if err != nil || h.MessageID != 0 || h.Flags&v1FlagEncrypted != 0 {
		ep.Stats.Malformed.Add(1)
		return
	}
	saP := findV1(ps, v1SA)
	if saP == nil {
		ep.Stats.Malformed.Add(1)
		return
	}
	sap, err := decodeV1SA(saP.Body)
	if err != nil || len(sap.Proposals) != 1 || sap.Proposals[0].Protocol != v1ProtoISAKMP {
		ep.Stats.Malformed.Add(1)
		refuse(v1PayloadMalformed)
		return
	}
	ours := cfg.ikeProposals()
	var theirs []Proposal
	var whyNot []string
	chosen, ti, ok := v1Choose(ours, sap.Proposals[0].Transforms, func(t v1Transform) (Proposal, bool) {
		p, _, why := v1Phase1Proposal(t)
		return p, why == ""
	})
	for _, t := range sap.Proposals[0].Transforms {
		p, _, why := v1Phase1Proposal(t)
		theirs = append(theirs, p)
		if why != "" {
			whyNot = append(whyNot, why)
		}
	}
	if !ok {
		refuse(v1NoProposalChosen)
		f := &Failure{Reason: ReasonNoProposalChosen, Peer: remote, Stage: "main mode", OurProposals: ours, PeerProposals: theirs}
		if len(whyNot) > 0 {
			f.Detail = whyNot[0]
		}
		report(f)
		return
	}
	now := ep.now()
	sa := &IKESA{ep: ep, cfg: cfg, state: StateHalfOpen, spiI: h.CkyI, spiR: ep.randUint64(), local: local, remote: remote,
		initRemote: remote, halfOpen: true, prop: internProposal(chosen), created: stampOf(now), lastRecv: stampOf(now), v1: &v1State{quick: map[uint32]*v1Quick{}}}
	v := sa.v1
	v.saiB = append([]byte(nil), saP.Body...)
	v.chosen = sap.Proposals[0].Transforms[ti]
	v.propNum = sap.Proposals[0].Number
	_, life, _ := v1Phase1Proposal(v.chosen)
	v.life = life
	if ours := sa.v1ProposedP1Life(); v.life == 0 || v.life > ours {
		v.life = ours
	}
	if err := sa.v1Suite(); err != nil {
		refuse(v1NoProposalChosen)
		return
	}
	sa.v1PeerVendors(ps)
	configured := cfg.Remote.Addr().IsValid() && cfg.Remote.Addr().Unmap() == remote.Addr().Unmap()
	if ok, _ := ep.registerLimited(sa, !configured); !ok {
		return
	}
	resp := []v1Payload{{v1SA, (&v1SAPayload{Proposals: []v1Prop{{Number: v.propNum, Protocol: v1ProtoISAKMP,
		Transforms: []v1Transform{v.chosen}}}}).encode()}}
	if v.peerNATT {
		resp = append(resp, v1Payload{v1Vendor, v1VendorNATT})
	}
	resp = append(resp, v1Payload{v1Vendor, v1VendorDPD})
	sa.mu.Lock()
	v.stage = v1SentMM2
	v.lastIn = sha256.Sum256(pkt)
	v.lastOut = encodeV1Plain(sa.v1Header(v1MainMode, 0), resp)
	sa.send(v.lastOut)
	sa.mu.Unlock()
}

func (sa *IKESA) v1PeerVendors(ps []v1Payload) {
	for _, p := range ps {
		if p.Type != v1Vendor {
			continue
		}
		switch {
		case bytes.Equal(p.Body, v1VendorNATT):
			sa.v1.peerNATT = true
		case bytes.Equal(p.Body, v1VendorDPD):
			sa.v1.peerDPD = true
		}
	}
}

// v1Suite sets up the hash, PRF and cipher of the chosen phase 1 suite.
func (sa *IKESA) v1Suite() error {
	v := sa.v1
	h, _ := v.chosen.attr(v1AttrHash)
	var err error
	if v.hash, err = v1HashFunc(h); err != nil {
		return err
	}
	v.prf = prf{id: sa.prop.PRF[0], hash: v.hash, size: v.hash().Size()}
	switch e := sa.prop.Encryption[0]; e.ID {
	case ENCR_AES_CBC:
		v.cipher, v.keyLen = aes.NewCipher, e.KeyBits/8
	case ENCR_3DES:
		v.cipher, v.keyLen = des.NewTripleDESCipher, 24
	default:
		return fmt.Errorf("encryption %v not supported for IKEv1", encrName(e))
	}
	return nil
}

// v1Handle processes one ISAKMP message for this SA (under sa.mu).
func (sa *IKESA) v1Handle(pkt []byte, h v1Header, local, remote netip.AddrPort) {
	if sa.state == StateDead {
		return
	}
	v := sa.v1
	switch h.Exchange {
	case v1MainMode:
		if v.stage == v1Done {
			// A retransmitted message 5 whose answer got lost.
			if !sa.initiator && sha256.Sum256(pkt) == v.lastIn && v.lastOut != nil {
				sa.ep.Stats.RetransmitsAnswered.Add(1)
				sa.send(v.lastOut)
				return
			}
			sa.ep.Stats.OutOfWindow.Add(1)
			return
		}
		if !sa.initiator && sha256.Sum256(pkt) == v.lastIn && v.lastOut != nil {
			sa.ep.Stats.RetransmitsAnswered.Add(1)
			sa.send(v.lastOut)
			return
		}
		if sa.initiator && sha256.Sum256(pkt) == v.lastIn {
			// The peer sent its last answer again: it saw a
			// retransmission of ours, or its own timer ran (libreswan
			// retransmits message 2 and 4). Taken for the next message,
			// a second message 2 would end the SA ("lacks KE or
			// nonce") just before the real message 4 came. Our own
			// timer sends our message again if it was lost.
			sa.ep.Stats.OutOfWindow.Add(1)
			return
		}
		sa.v1MainMode(pkt, h, local, remote)
	case v1Informational:
		sa.v1Informational(pkt, h, local, remote)
	case v1QuickMode:
		if v.stage != v1Done {
			sa.ep.Stats.EarlyRequests.Add(1)
			return
		}
		sa.v1QuickMode(pkt, h, local, remote)
	case v1Transaction:
		sa.report(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Stage: h.Exchange.String(),
			Detail: "the peer wants XAUTH or mode-config, which flashgate does not do; turn them off on the peer"})
	default:
		sa.ep.Stats.Malformed.Add(1)
	}
}

// v1Decrypt opens an encrypted message with iv and returns its payloads,
// the plaintext and the last ciphertext block (the next IV in a chain).
func (sa *IKESA) v1Decrypt(pkt []byte, h v1Header, iv []byte) ([]v1Payload, []byte, []byte, error) {
	v := sa.v1
	if v.encKey == nil {
		return nil, nil, nil, errNoKeys
	}
	ct := pkt[HeaderLen:]
	b, err := v.cipher(v.encKey)
	if err != nil {
		return nil, nil, nil, err
	}
	bs := b.BlockSize()
	if len(ct) == 0 || len(ct)%bs != 0 {
		return nil, nil, nil, fmt.Errorf("encrypted body of %d bytes: %w", len(ct), ErrMalformed)
	}
	plain := make([]byte, len(ct))
	cipher.NewCBCDecrypter(b, iv).CryptBlocks(plain, ct)
	ps, err := decodeV1Payloads(h.NextPayload, plain, true)
	if err != nil {
		return nil, nil, nil, err
	}
	return ps, plain, append([]byte(nil), ct[len(ct)-bs:]...), nil
}

// v1Encrypt builds an encrypted message from the encoded payload chain,
// padded with zeros to the block size; it returns the message and its last
// ciphertext block.
func (sa *IKESA) v1Encrypt(h v1Header, first v1PayloadType, chain, iv []byte) ([]byte, []byte) {
	v := sa.v1
	b, _ := v.cipher(v.encKey)
	bs := b.BlockSize()
	pad := (bs - len(chain)%bs) % bs
	plain := append(append(make([]byte, 0, len(chain)+pad), chain...), make([]byte, pad)...)
	h.Flags |= v1FlagEncrypted
	h.NextPayload = first
	out := h.append(make([]byte, 0, HeaderLen+len(plain)))
	out = append(out, plain...)
	cipher.NewCBCEncrypter(b, iv).CryptBlocks(out[HeaderLen:], plain)
	binary.BigEndian.PutUint32(out[24:], uint32(len(out)))
	return out, append([]byte(nil), out[len(out)-bs:]...)
}

func (sa *IKESA) v1NATD(ap netip.AddrPort) []byte {
	m := sa.v1.hash()
	var b [16]byte
	binary.BigEndian.PutUint64(b[:], sa.spiI)
	binary.BigEndian.PutUint64(b[8:], sa.spiR)
	m.Write(b[:])
	m.Write(ap.Addr().Unmap().AsSlice())
	binary.BigEndian.PutUint16(b[:], ap.Port())
	m.Write(b[:2])
	return m.Sum(nil)
}

// v1NATDPayloads are our NAT-D payloads: the peer's address first, then
// ours (RFC 3947 3.2), ours faked with ForceEncap.
func (sa *IKESA) v1NATDPayloads() []v1Payload {
	if !sa.v1.peerNATT {
		return nil
	}
	ours := sa.v1NATD(sa.local)
	if sa.cfg.ForceEncap {
		ours = sa.v1NATD(netip.AddrPortFrom(netip.IPv4Unspecified(), 0))
	}
	return []v1Payload{{v1NATD, sa.v1NATD(sa.remote)}, {v1NATD, ours}}
}

// v1DetectNAT reads the peer's NAT-D payloads.
func (sa *IKESA) v1DetectNAT(ps []v1Payload) {
	var ds [][]byte
	for _, p := range ps {
		if p.Type == v1NATD {
			ds = append(ds, p.Body)
		}
	}
	if len(ds) >= 2 {
		sa.natLocal = !bytes.Equal(ds[0], sa.v1NATD(sa.local))
		match := false
		for _, d := range ds[1:] {
			match = match || bytes.Equal(d, sa.v1NATD(sa.remote))
		}
		sa.natRemote = !match
	}
	if sa.cfg.ForceEncap && sa.v1.peerNATT {
		sa.natLocal = true
	}
}

// v1Keys derives SKEYID and its three children (RFC 2409 5) and the
// phase 1 IV.
func (sa *IKESA) v1Keys(gxy []byte) {
	v := sa.v1
	v.skeyid = v.prf.sum(sa.cfg.PSK, v.ni, v.nr)
	ck := make([]byte, 16)
	binary.BigEndian.PutUint64(ck, sa.spiI)
	binary.BigEndian.PutUint64(ck[8:], sa.spiR)
	v.skeyidD = v.prf.sum(v.skeyid, gxy, ck, []byte{0})
	v.skeyidA = v.prf.sum(v.skeyid, v.skeyidD, gxy, ck, []byte{1})
	skeyidE := v.prf.sum(v.skeyid, v.skeyidA, gxy, ck, []byte{2})
	defer clear(skeyidE)
	// Appendix B: stretch SKEYID_e when the cipher needs more.
	var k []byte
	if len(skeyidE) >= v.keyLen {
		k = append(k, skeyidE...)
	} else {
		last := v.prf.sum(skeyidE, []byte{0})
		k = append(k, last...)
		for len(k) < v.keyLen {
			last = v.prf.sum(skeyidE, last)
			k = append(k, last...)
		}
	}
	v.encKey = k[:v.keyLen]
	m := v.hash()
	m.Write(v.gxi)
	m.Write(v.gxr)
	b, _ := v.cipher(v.encKey)
	v.iv = m.Sum(nil)[:b.BlockSize()]
}

// v1IDPayload is our phase 1 identity.
func (sa *IKESA) v1OurID() []byte {
	return v1IDPayload{Type: uint8(sa.cfg.LocalID.Type), Data: sa.cfg.LocalID.Data}.encode()
}

func (sa *IKESA) v1AuthHash(initiator bool, idBody []byte) []byte {
	v := sa.v1
	ck := make([]byte, 16)
	if initiator {
		binary.BigEndian.PutUint64(ck, sa.spiI)
		binary.BigEndian.PutUint64(ck[8:], sa.spiR)
		return v.prf.sum(v.skeyid, v.gxi, v.gxr, ck, v.saiB, idBody)
	}
	binary.BigEndian.PutUint64(ck, sa.spiR)
	binary.BigEndian.PutUint64(ck[8:], sa.spiI)
	return v.prf.sum(v.skeyid, v.gxr, v.gxi, ck, v.saiB, idBody)
}

// v1MainMode advances main mode with the peer's message.
func (sa *IKESA) v1MainMode(pkt []byte, h v1Header, local, remote netip.AddrPort) {
	v := sa.v1
	if sa.initiator && sa.spiR == 0 {
		sa.spiR = h.CkyR
	}
	var ps []v1Payload
	var lastBlock []byte
	var err error
	if h.Flags&v1FlagEncrypted != 0 {
		ps, _, lastBlock, err = sa.v1Decrypt(pkt, h, v.iv)
		if err != nil {
			if v.stage == v1SentMM4 {
				// Message 5 did not decrypt: with PSK this is what a
				// different key looks like. The peer gets a notice
				// (which it cannot read either, but it learns of one).
				sa.ep.Stats.AuthFailures.Add(1)
				sa.v1Notify(v1AuthFailed, v1ProtoISAKMP, cookies(sa.spiI, sa.spiR), nil)
				sa.v1Fail(&Failure{Reason: ReasonAuthenticationFailed, Peer: sa.remote, Stage: "main mode message 5",
					Detail: "pre-shared key mismatch: the peer's identity message does not decrypt with the key derived from our secret"})
				return
			}
			sa.ep.Stats.BadICV.Add(1)
			return
		}
	} else if ps, err = decodeV1Payloads(h.NextPayload, pkt[HeaderLen:], false); err != nil {
		sa.ep.Stats.Malformed.Add(1)
		return
	}
	sa.lastRecv = stampOf(sa.ep.now())
	if sa.initiator {
		v.lastIn = sha256.Sum256(pkt)
	}
	switch v.stage {
	case v1SentMM1:
		sa.v1GotMM2(ps)
	case v1SentMM3:
		sa.v1GotMM4(ps)
	case v1SentMM5:
		if h.Flags&v1FlagEncrypted == 0 {
			sa.ep.Stats.Malformed.Add(1)
			return
		}
		sa.v1GotMM6(ps, lastBlock, local, remote)
	case v1SentMM2:
		sa.v1GotMM3(pkt, ps)
	case v1SentMM4:
		if h.Flags&v1FlagEncrypted == 0 {
			sa.ep.Stats.Malformed.Add(1)
			return
		}
		sa.v1GotMM5(pkt, ps, lastBlock, local, remote)
	}
}

func (sa *IKESA) v1GotMM2(ps []v1Payload) {
	v := sa.v1
	saP := findV1(ps, v1SA)
	if saP == nil {
		sa.ep.Stats.Malformed.Add(1)
		return
	}
	sap, err := decodeV1SA(saP.Body)
	if err != nil || len(sap.Proposals) != 1 || len(sap.Proposals[0].Transforms) != 1 {
		sa.v1Fail(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Stage: "main mode message 2", Detail: "the answer does not hold one chosen transform"})
		return
	}
	t := sap.Proposals[0].Transforms[0]
	p, life, why := v1Phase1Proposal(t)
	if why != "" || !acceptable(sa.cfg.ikeProposals(), p) {
		sa.v1Fail(&Failure{Reason: ReasonNoProposalChosen, Peer: sa.remote, Stage: "main mode message 2",
			OurProposals: sa.cfg.ikeProposals(), PeerProposals: []Proposal{p}, Detail: "the peer chose a proposal we did not offer"})
		return
	}
	sa.prop, v.chosen = internProposal(p), t
	v.life = sa.v1ProposedP1Life()
	if life > 0 && life < v.life {
		v.life = life
	}
	if err := sa.v1Suite(); err != nil {
		sa.v1Fail(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Stage: "main mode message 2", Detail: err.Error()})
		return
	}
	sa.v1PeerVendors(ps)
	if v.dh, err = newDHKey(p.DH[0], sa.ep.rand); err != nil {
		sa.v1Fail(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Stage: "main mode message 2", Detail: err.Error()})
		return
	}
	v.gxi = v.dh.Public()
	v.ni = make([]byte, 32)
	io.ReadFull(sa.ep.rand, v.ni)
	out := []v1Payload{{v1KE, v.gxi}, {v1Nonce, v.ni}}
	out = append(out, sa.v1NATDPayloads()...)
	v.stage = v1SentMM3
	sa.v1Send(encodeV1Plain(sa.v1Header(v1MainMode, 0), out), "main mode message 3")
}

// v1KEFrom checks the peer's KE payload and computes g^xy.
func (sa *IKESA) v1KEFrom(ps []v1Payload) ([]byte, []byte, error) {
	ke, nonce := findV1(ps, v1KE), findV1(ps, v1Nonce)
	if ke == nil || nonce == nil {
		return nil, nil, fmt.Errorf("message lacks KE or nonce")
	}
	if len(nonce.Body) < 8 || len(nonce.Body) > 256 {
		return nil, nil, fmt.Errorf("nonce of %d bytes", len(nonce.Body))
	}
	gxy, err := sa.v1.dh.Shared(ke.Body)
	if err != nil {
		return nil, nil, err
	}
	return gxy, nonce.Body, nil
}

func (sa *IKESA) v1GotMM4(ps []v1Payload) {
	v := sa.v1
	gxy, nr, err := sa.v1KEFrom(ps)
	if err != nil {
		sa.v1Fail(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Stage: "main mode message 4", Detail: err.Error()})
		return
	}
	defer clear(gxy)
	v.gxr = findV1(ps, v1KE).Body
	v.gxr = append([]byte(nil), v.gxr...)
	v.nr = append([]byte(nil), nr...)
	v.dh.Zero()
	v.dh = nil
	sa.v1Keys(gxy)
	sa.v1DetectNAT(ps)
	// RFC 3947 4: float to port 4500 with message 5 when there is a NAT.
	if v.peerNATT && sa.encapESP() {
		sa.local = netip.AddrPortFrom(sa.local.Addr(), sa.ep.cfg.NATTPort)
		sa.remote = netip.AddrPortFrom(sa.remote.Addr(), sa.cfg.nattPort())
	}
	id := sa.v1OurID()
	chain := []v1Payload{{v1ID, id}, {v1Hash, sa.v1AuthHash(true, id)}}
	if sa.ep.firstContact(sa) && sa.v1.reauthOf == nil {
		chain = append(chain, v1Payload{v1Notify, v1NotifyPayload{Protocol: v1ProtoISAKMP, Type: v1InitialContact,
			SPI: cookies(sa.spiI, sa.spiR)}.encode()})
	}
	pkt, last := sa.v1Encrypt(sa.v1Header(v1MainMode, 0), v1ID, appendV1Payloads(nil, chain), v.iv)
	v.iv = last
	v.stage = v1SentMM5
	sa.state = StateAuthSent
	sa.v1Send(pkt, "main mode message 5")
}

func cookies(i, r uint64) []byte {
	b := binary.BigEndian.AppendUint64(nil, i)
	return binary.BigEndian.AppendUint64(b, r)
}

// v1CheckPeerID checks the peer's ID and HASH; why is empty when good.
func (sa *IKESA) v1CheckPeerID(ps []v1Payload, peerIsInitiator bool) (why string, invalidID bool) {
	idp, hp := findV1(ps, v1ID), findV1(ps, v1Hash)
	if idp == nil || hp == nil {
		return "pre-shared key mismatch: the peer's identity message does not decode with the key derived from our secret", false
	}
	id, err := decodeV1ID(idp.Body)
	if err != nil {
		return "the peer's ID payload is malformed", false
	}
	peer := Identity{Type: IDType(id.Type), Data: id.Data}
	if !hmac.Equal(hp.Body, sa.v1AuthHash(peerIsInitiator, idp.Body)) {
		return fmt.Sprintf("pre-shared key mismatch: the HASH of peer %s does not verify with our secret", peer), false
	}
	if !sa.cfg.RemoteID.IsZero() && (uint8(sa.cfg.RemoteID.Type) != id.Type || subtle.ConstantTimeCompare(sa.cfg.RemoteID.Data, id.Data) != 1) {
		return fmt.Sprintf("identity mismatch: the peer calls itself %s, we expect %s", peer, sa.cfg.RemoteID), true
	}
	return "", false
}

func (sa *IKESA) v1GotMM3(pkt []byte, ps []v1Payload) {
	v := sa.v1
	ke := findV1(ps, v1KE)
	if ke == nil {
		sa.ep.Stats.Malformed.Add(1)
		return
	}
	var err error
	if v.dh, err = newDHKey(sa.prop.DH[0], sa.ep.rand); err != nil {
		return
	}
	gxy, ni, err := sa.v1KEFrom(ps)
	if err != nil {
		sa.ep.Stats.Malformed.Add(1)
		sa.v1Fail(&Failure{Reason: ReasonProtocol, Peer: sa.remote, Stage: "main mode message 3", Detail: err.Error()})
		return
	}
	defer clear(gxy)
	v.gxi = append([]byte(nil), ke.Body...)
	v.gxr = v.dh.Public()
	v.ni = append([]byte(nil), ni...)
	v.nr = make([]byte, 32)
	io.ReadFull(sa.ep.rand, v.nr)
	v.dh.Zero()
	v.dh = nil
	sa.v1Keys(gxy)
	sa.v1DetectNAT(ps)
	out := []v1Payload{{v1KE, v.gxr}, {v1Nonce, v.nr}}
	out = append(out, sa.v1NATDPayloads()...)
	v.stage = v1SentMM4
	v.lastIn = sha256.Sum256(pkt)
	v.lastOut = encodeV1Plain(sa.v1Header(v1MainMode, 0), out)
	sa.send(v.lastOut)
}

func (sa *IKESA) v1GotMM5(pkt []byte, ps []v1Payload, lastBlock []byte, local, remote netip.AddrPort) {
	v := sa.v1
	if why, badID := sa.v1CheckPeerID(ps, true); why != "" {
		sa.ep.Stats.AuthFailures.Add(1)
		n := v1AuthFailed
		if badID {
			n = v1InvalidIDInfo
		}
		v.iv = lastBlock
		sa.v1Notify(n, v1ProtoISAKMP, cookies(sa.spiI, sa.spiR), nil)
		sa.v1Fail(&Failure{Reason: ReasonAuthenticationFailed, Peer: sa.remote, Stage: "main mode message 5", Detail: why})
		return
	}
	sa.v1Float(local, remote)
	v.iv = lastBlock
	id := sa.v1OurID()
	chain := []v1Payload{{v1ID, id}, {v1Hash, sa.v1AuthHash(false, id)}}
	out, last := sa.v1Encrypt(sa.v1Header(v1MainMode, 0), v1ID, appendV1Payloads(nil, chain), v.iv)
	v.iv = last
	v.lastIn = sha256.Sum256(pkt)
	v.lastOut = out
	sa.send(out)
	contact := false
	for _, p := range ps {
		if p.Type == v1Notify {
			if n, err := decodeV1Notify(p.Body); err == nil && n.Type == v1InitialContact {
				contact = true
			}
		}
	}
	sa.v1Established(contact)
}

func (sa *IKESA) v1GotMM6(ps []v1Payload, lastBlock []byte, local, remote netip.AddrPort) {
	v := sa.v1
	if why, _ := sa.v1CheckPeerID(ps, false); why != "" {
		v.iv = lastBlock
		sa.v1Notify(v1AuthFailed, v1ProtoISAKMP, cookies(sa.spiI, sa.spiR), nil)
		sa.v1Fail(&Failure{Reason: ReasonAuthenticationFailed, Peer: sa.remote, Stage: "main mode message 6", Detail: why})
		return
	}
	sa.v1Float(local, remote)
	v.iv = lastBlock
	v.out = nil
	sa.v1Established(false)
	sa.v1StartQuickModes()
}

// v1Float follows the peer to the NAT-T port.
func (sa *IKESA) v1Float(local, remote netip.AddrPort) {
	if local.Port() == sa.ep.cfg.NATTPort {
		sa.local, sa.remote = local, remote
	}
}

// v1Established finishes phase 1: reports IKEUp, and takes over the phase 2
// SAs of the tunnel's older ISAKMP SAs with this peer (a phase 1 rekey by
// either side) unless the peer said INITIAL-CONTACT (it restarted: they are
// gone at its end).
func (sa *IKESA) v1Established(initialContact bool) {
	v := sa.v1
	now := sa.ep.now()
	sa.state = StateEstablished
	sa.established = stampOf(now)
	v.stage = v1Done
	v.out = nil
	clear(v.skeyid)
	v.skeyid, v.gxi, v.gxr, v.ni, v.nr, v.saiB = nil, nil, nil, nil, nil, nil
	if v.life > 0 {
		soft := v.life * 10 / 11
		if sa.initiator {
			sa.rekeyAt = stampOf(now.Add(sa.jitter(soft)))
		} else {
			sa.rekeyAt = stampOf(now.Add(soft + (v.life-soft)/2))
		}
		if sa.cfg.IKELifetime == 0 {
			sa.rekeyAt = 0
		}
		sa.expireAt = stampOf(now.Add(v.life))
	}
	sa.ep.clearHalfOpen(sa)
	if initialContact {
		sa.ep.dropOthers(sa)
	} else {
		v.takeOver = !sa.v1TakeOver()
	}
	sa.emit(func() {
		if sa.ep.cfg.Events.IKEUp != nil {
			sa.ep.cfg.Events.IKEUp(sa)
		}
	})
}

// v1TakeOver finishes a phase 1 rekey, ours or the peer's: sa, just
// established, takes the phase 2 SAs of the tunnel's ISAKMP SAs with this
// peer that were established before it (phase 2 SAs outlive the ISAKMP SA
// that negotiated them), and those become REKEYED: no timers of their own
// any more. The one our rekey replaces (reauthOf) is deleted v1RetireDelay
// later; the peer deletes those it replaced, or they end with their
// lifetime. Their locks come second here (the order elsewhere is older
// first), so they are only tried: it reports false when one was busy, and
// sa's tick calls it again.
func (sa *IKESA) v1TakeOver() bool {
	done := true
	for _, o := range sa.ep.SAsOf(sa.cfg) {
		if o == sa || o.v1 == nil {
			continue
		}
		if !o.mu.TryLock() {
			done = false
			continue
		}
		if o.state != StateDead && o.remote.Addr() == sa.remote.Addr() && !sa.established.before(o.established) {
			sa.v1Adopt(o)
			if o.state == StateEstablished {
				o.state = StateRekeyed
				o.replacedBy = sa
				o.rekeyAt = 0
				o.v1.retireAt = o.expireAt
				if o == sa.v1.reauthOf {
					o.v1.retireAt = stampOf(sa.ep.now().Add(v1RetireDelay))
				}
			}
		}
		o.mu.Unlock()
	}
	if done {
		sa.v1.reauthOf = nil
	}
	return done
}

// v1Adopt moves o's phase 2 SAs to sa, with both locks held. A rekey of
// one that o had in flight is abandoned with o's quick modes; sa's timers
// start it again.
func (sa *IKESA) v1Adopt(o *IKESA) {
	if len(o.children) == 0 {
		return
	}
	sa.children = append(sa.children, o.children...)
	o.children = nil
	for id, q := range o.v1.quick {
		if c := q.replaces; c != nil && c.state == childRekeying {
			c.state, c.rekeyAt = childInstalled, stampOf(sa.ep.now())
		}
		q.abort(sa.ep)
		delete(o.v1.quick, id)
	}
}

// v1Fail ends a negotiation or SA with a failure.
func (sa *IKESA) v1Fail(f *Failure) {
	sa.fail(f)
}

// v1Die is the v1 part of die.
func (v *v1State) zero(ep *Endpoint) {
	if v == nil {
		return
	}
	clear(v.skeyid)
	clear(v.skeyidA)
	clear(v.skeyidD)
	clear(v.encKey)
	v.encKey = nil
	if v.dh != nil {
		v.dh.Zero()
		v.dh = nil
	}
	for id, q := range v.quick {
		q.abort(ep)
		delete(v.quick, id)
	}
}

// v1Close deletes the ISAKMP SA and its phase 2 SAs, telling the peer
// (IKEv1 deletes are not answered).
func (sa *IKESA) v1Close() {
	if sa.state == StateDead {
		return
	}
	if sa.v1.stage == v1Done && sa.v1.encKey != nil {
		for _, c := range sa.children {
			sa.v1Delete(v1ProtoESP, [][]byte{be32bytes(c.inSPI)})
		}
		sa.v1Delete(v1ProtoISAKMP, [][]byte{cookies(sa.spiI, sa.spiR)})
	}
	sa.die(sa.closeReason)
}

// v1Tick runs an ISAKMP SA's timers.
func (sa *IKESA) v1Tick(now time.Time) {
	v := sa.v1
	if p := v.out; p != nil && !now.Before(p.next) {
		if p.tries >= sa.cfg.retransmitTries() {
			f := &Failure{Reason: ReasonPeerTimeout, Peer: sa.remote, Stage: p.what, Tries: p.tries, After: now.Sub(p.first)}
			if v.stage == v1SentMM5 {
				// The peer answered messages 1 and 3, so it is there.
				f.Reason = ReasonAuthenticationFailed
				f.Detail = fmt.Sprintf("pre-shared key mismatch, most likely: the peer answered main mode up to the key exchange but not our identity (message 5, %d tries in %v); it cannot decrypt it when its secret differs from ours",
					p.tries, now.Sub(p.first).Round(time.Millisecond))
			}
			sa.v1Fail(f)
			return
		}
		p.tries++
		p.next = now.Add(sa.cfg.retransmitTimeout() << (p.tries - 1))
		sa.ep.Stats.Retransmits.Add(1)
		sa.send(p.pkt)
	}
	if sa.state == StateHalfOpen {
		if sa.created.since(now) > sa.ep.cfg.HalfOpenTimeout {
			sa.ep.Stats.HalfOpenExpired.Add(1)
			sa.die(nil)
		}
		return
	}
	if sa.state == StateRekeyed {
		// Replaced by a phase 1 rekey (v1TakeOver).
		if v.retireAt.reached(now) {
			sa.v1Close()
		}
		return
	}
	if sa.state != StateEstablished {
		return
	}
	if v.takeOver && sa.v1TakeOver() {
		v.takeOver = false
	}
	for id, q := range v.quick {
		if q.tick(sa, now) {
			delete(v.quick, id)
		}
		if sa.state == StateDead {
			return
		}
	}
	if sa.expireAt.reached(now) {
		sa.lastErr = &Failure{Reason: ReasonProtocol, Peer: sa.remote, Stage: "main mode",
			Detail: "the ISAKMP SA reached its lifetime and was not replaced"}
		sa.closeReason = sa.lastErr
		sa.v1Close()
		return
	}
	if sa.rekeyAt.reached(now) {
		sa.rekeyAt = 0
		sa.v1Reauth()
	}
	for _, c := range append([]*child(nil), sa.children...) {
		if c.state == childInstalled && c.rekeyAt.reached(now) {
			c.rekeyAt = 0
			sa.v1StartQuick(c.localTS[0], c.remoteTS[0], c)
		}
		if c.expireAt.reached(now) {
			c.expireAt = 0
			sa.v1DeleteChild(c, nil)
		}
	}
	sa.v1DPD(now)
	if sa.natLocal && sa.local.Port() == sa.ep.cfg.NATTPort && sa.lastSend.since(now) >= sa.cfg.keepalive() {
		sa.send(natKeepalive)
	}
}

// v1Reauth rekeys phase 1: a new main mode with the peer; once it is up it
// takes the phase 2 SAs and this ISAKMP SA is deleted v1RetireDelay later.
func (sa *IKESA) v1Reauth() {
	n, err := newV1InitiatorSA(sa.ep, sa.cfg)
	if err != nil {
		return
	}
	n.v1.reauthOf = sa
	if !sa.ep.register(n) {
		return
	}
	// n is new and unseen by other goroutines until registered; its first
	// message goes out under sa's lock, which is the older-first order.
	n.mu.Lock()
	n.v1Start()
	sa.events = append(sa.events, n.takeEvents()...)
	n.mu.Unlock()
}

// Replacing is the IKE SA that sa was started to replace while sa is
// being negotiated (our IKEv1 phase 1 rekey, a main mode of its own), and
// nil otherwise. An SA that ends with Replacing set is a failed rekey:
// the SA it was to replace carries on.
func (sa *IKESA) Replacing() *IKESA {
	sa.mu.Lock()
	defer sa.mu.Unlock()
	if sa.v1 == nil || sa.state == StateEstablished || sa.state == StateRekeyed {
		return nil
	}
	return sa.v1.reauthOf
}

// v1DPD sends R-U-THERE when the peer has been quiet for DPDDelay (RFC
// 3706) and declares it dead after RetransmitTries unanswered.
func (sa *IKESA) v1DPD(now time.Time) {
	v := sa.v1
	if sa.cfg.DPDDelay <= 0 || !v.peerDPD {
		return
	}
	if v.dpdTries == 0 {
		if sa.lastRecv.since(now) < sa.cfg.DPDDelay {
			return
		}
		v.dpdFirst = now
	} else if now.Before(v.dpdNext) {
		return
	} else if v.dpdTries >= sa.cfg.retransmitTries() {
		sa.v1Fail(&Failure{Reason: ReasonPeerTimeout, Peer: sa.remote, Stage: "DPD R-U-THERE", Tries: v.dpdTries, After: now.Sub(v.dpdFirst)})
		return
	}
	v.dpdTries++
	v.dpdNext = now.Add(sa.cfg.retransmitTimeout() << (v.dpdTries - 1))
	if v.dpdSeq == 0 {
		var b [4]byte
		io.ReadFull(sa.ep.rand, b[:])
		v.dpdSeq = binary.BigEndian.Uint32(b[:])&0x7fffffff | 1
	}
	v.dpdSeq++
	sa.v1Notify(v1RUThere, v1ProtoISAKMP, cookies(sa.spiI, sa.spiR), binary.BigEndian.AppendUint32(nil, v.dpdSeq))
}
