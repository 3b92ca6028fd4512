package ike

import (
	"encoding/binary"
	"fmt"
)

// IKEv1 (ISAKMP, RFC 2408; the IPsec DOI, RFC 2407; IKE, RFC 2409) shares
// the 28-byte header layout with IKEv2 but not its payloads: this file is
// its codec. Payload bodies are kept as received, because the HASH
// payloads of IKEv1 sign payloads as they are on the wire.

// V1Version is the ISAKMP version octet (major 1, minor 0).
const V1Version = 0x10

// v1Exchange is an ISAKMP exchange type.
type v1Exchange uint8

const (
	v1Base          v1Exchange = 1
	v1MainMode      v1Exchange = 2 // "identity protection"
	v1AuthOnly      v1Exchange = 3
	v1Aggressive    v1Exchange = 4
	v1Informational v1Exchange = 5
	v1Transaction   v1Exchange = 6 // mode-config / XAUTH
	v1QuickMode     v1Exchange = 32
)

func (e v1Exchange) String() string {
	switch e {
	case v1MainMode:
		return "main mode"
	case v1Aggressive:
		return "aggressive mode"
	case v1Informational:
		return "informational"
	case v1QuickMode:
		return "quick mode"
	case v1Transaction:
		return "transaction (XAUTH/mode-config)"
	}
	return fmt.Sprintf("exchange %d", uint8(e))
}

// ISAKMP header flags.
const (
	v1FlagEncrypted = 1
	v1FlagCommit    = 2
	v1FlagAuthOnly  = 4
)

// v1PayloadType is an ISAKMP payload type.
type v1PayloadType uint8

const (
	v1None     v1PayloadType = 0
	v1SA       v1PayloadType = 1
	v1Proposal v1PayloadType = 2
	v1Transf   v1PayloadType = 3
	v1KE       v1PayloadType = 4
	v1ID       v1PayloadType = 5
	v1Cert     v1PayloadType = 6
	v1CertReq  v1PayloadType = 7
	v1Hash     v1PayloadType = 8
	v1Sig      v1PayloadType = 9
	v1Nonce    v1PayloadType = 10
	v1Notify   v1PayloadType = 11
	v1Delete   v1PayloadType = 12
	v1Vendor   v1PayloadType = 13
	v1NATD     v1PayloadType = 20 // RFC 3947
	v1NATOA    v1PayloadType = 21
)

// v1Header is the ISAKMP header.
type v1Header struct {
	CkyI, CkyR  uint64
	NextPayload v1PayloadType
	Version     uint8
	Exchange    v1Exchange
	Flags       uint8
	MessageID   uint32
	Length      uint32
}

// IsIKEv1 reports whether a datagram (without the NAT-T marker) carries
// an ISAKMP (IKEv1) header rather than an IKEv2 one.
func IsIKEv1(b []byte) bool { return len(b) >= HeaderLen && b[17]>>4 == 1 }

func decodeV1Header(b []byte) (v1Header, error) {
	var h v1Header
	if len(b) < HeaderLen {
		return h, fmt.Errorf("ISAKMP header of %d bytes: %w", len(b), ErrTruncated)
	}
	h.CkyI = binary.BigEndian.Uint64(b)
	h.CkyR = binary.BigEndian.Uint64(b[8:])
	h.NextPayload = v1PayloadType(b[16])
	h.Version = b[17]
	h.Exchange = v1Exchange(b[18])
	h.Flags = b[19]
	h.MessageID = binary.BigEndian.Uint32(b[20:])
	h.Length = binary.BigEndian.Uint32(b[24:])
	if h.Version>>4 != 1 {
		return h, fmt.Errorf("ISAKMP version %#x: %w", h.Version, ErrMalformed)
	}
	if h.Length < HeaderLen || int(h.Length) > len(b) || h.Length > MaxMessageLen {
		return h, fmt.Errorf("ISAKMP length %d of %d received: %w", h.Length, len(b), ErrMalformed)
	}
	if h.CkyI == 0 {
		return h, fmt.Errorf("zero initiator cookie: %w", ErrMalformed)
	}
	return h, nil
}

func (h *v1Header) append(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, h.CkyI)
	b = binary.BigEndian.AppendUint64(b, h.CkyR)
	b = append(b, byte(h.NextPayload), V1Version, byte(h.Exchange), h.Flags)
	b = binary.BigEndian.AppendUint32(b, h.MessageID)
	return binary.BigEndian.AppendUint32(b, h.Length)
}

// v1Payload is one payload: its type and body (without the generic header).
type v1Payload struct {
	Type v1PayloadType
	Body []byte
}

// maxV1Payloads bounds the payloads of one message (each is at least 4
// bytes, so MaxMessageLen bounds them anyway; this keeps slices small).
const maxV1Payloads = 64

// decodeV1Payloads walks the payload chain. trailing allows bytes after the
// last payload: the padding of a decrypted body (RFC 2409 5.3).
func decodeV1Payloads(first v1PayloadType, b []byte, trailing bool) ([]v1Payload, error) {
	var out []v1Payload
	next := first
	for next != v1None {
		if len(out) == maxV1Payloads {
			return nil, fmt.Errorf("more than %d payloads: %w", maxV1Payloads, ErrMalformed)
		}
		if len(b) < 4 {
			return nil, fmt.Errorf("payload %d header: %w", next, ErrTruncated)
		}
		n := int(binary.BigEndian.Uint16(b[2:]))
		if n < 4 || n > len(b) {
			return nil, fmt.Errorf("payload %d length %d, %d left: %w", next, n, len(b), ErrMalformed)
		}
		if b[1] != 0 {
			return nil, fmt.Errorf("payload %d: reserved octet %#x: %w", next, b[1], ErrMalformed)
		}
		out = append(out, v1Payload{Type: next, Body: b[4:n]})
		next = v1PayloadType(b[0])
		b = b[n:]
	}
	if len(b) != 0 && !trailing {
		return nil, fmt.Errorf("%d bytes after the last payload: %w", len(b), ErrMalformed)
	}
	return out, nil
}

// appendV1Payloads encodes the chain; the caller sets the header's
// NextPayload to ps[0].Type.
func appendV1Payloads(b []byte, ps []v1Payload) []byte {
	for i, p := range ps {
		next := v1None
		if i+1 < len(ps) {
			next = ps[i+1].Type
		}
		b = append(b, byte(next), 0)
		b = binary.BigEndian.AppendUint16(b, uint16(4+len(p.Body)))
		b = append(b, p.Body...)
	}
	return b
}

// encodeV1Plain builds an unencrypted message.
func encodeV1Plain(h v1Header, ps []v1Payload) []byte {
	h.NextPayload = v1None
	if len(ps) > 0 {
		h.NextPayload = ps[0].Type
	}
	b := appendV1Payloads(h.append(make([]byte, 0, 512)), ps)
	binary.BigEndian.PutUint32(b[24:], uint32(len(b)))
	return b
}

func findV1(ps []v1Payload, t v1PayloadType) *v1Payload {
	for i := range ps {
		if ps[i].Type == t {
			return &ps[i]
		}
	}
	return nil
}

// --- SA payload (RFC 2408 3.4-3.6, RFC 2407 4.6.1) ---

const (
	v1DOIIPsec          = 1
	v1SitIdentityOnly   = 1
	v1ProtoISAKMP       = 1
	v1ProtoESP          = 3
	v1KeyIKE            = 1 // transform ID of a phase 1 transform
	v1MaxProposals      = 32
	v1MaxTransforms     = 64
	v1MaxAttrs          = 32
	v1MaxAttrValueBytes = 8
)

// v1Attr is one data attribute. TV attributes have a 16-bit value; TLV
// ones (e.g. a life duration) up to 8 bytes here, as a number.
type v1Attr struct {
	Type  uint16
	Value uint64
	TLV   bool
}

type v1Transform struct {
	Number, ID uint8
	Attrs      []v1Attr
}

func (t *v1Transform) attr(typ uint16) (uint64, bool) {
	for _, a := range t.Attrs {
		if a.Type == typ {
			return a.Value, true
		}
	}
	return 0, false
}

type v1Prop struct {
	Number, Protocol uint8
	SPI              []byte
	Transforms       []v1Transform
}

type v1SAPayload struct {
	DOI, Situation uint32
	Proposals      []v1Prop
}

func decodeV1SA(b []byte) (*v1SAPayload, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("SA payload of %d bytes: %w", len(b), ErrTruncated)
	}
	sa := &v1SAPayload{DOI: binary.BigEndian.Uint32(b), Situation: binary.BigEndian.Uint32(b[4:])}
	if sa.DOI != v1DOIIPsec {
		return nil, fmt.Errorf("SA payload DOI %d, not IPsec: %w", sa.DOI, ErrMalformed)
	}
	if sa.Situation != v1SitIdentityOnly {
		return nil, fmt.Errorf("SA payload situation %d (only SIT_IDENTITY_ONLY is supported): %w", sa.Situation, ErrMalformed)
	}
	props, err := decodeV1Payloads(v1Proposal, b[8:], false)
	if err != nil {
		return nil, fmt.Errorf("SA payload: %w", err)
	}
	if len(props) == 0 || len(props) > v1MaxProposals {
		return nil, fmt.Errorf("SA payload with %d proposals: %w", len(props), ErrMalformed)
	}
	for _, pp := range props {
		if pp.Type != v1Proposal {
			return nil, fmt.Errorf("SA payload holds payload %d, not a proposal: %w", pp.Type, ErrMalformed)
		}
		p, err := decodeV1Proposal(pp.Body)
		if err != nil {
			return nil, err
		}
		sa.Proposals = append(sa.Proposals, p)
	}
	return sa, nil
}

func decodeV1Proposal(b []byte) (v1Prop, error) {
	var p v1Prop
	if len(b) < 4 {
		return p, fmt.Errorf("proposal of %d bytes: %w", len(b), ErrTruncated)
	}
	p.Number, p.Protocol = b[0], b[1]
	spiSize, n := int(b[2]), int(b[3])
	if 4+spiSize > len(b) || spiSize > 16 {
		return p, fmt.Errorf("proposal %d SPI size %d: %w", p.Number, spiSize, ErrMalformed)
	}
	p.SPI = b[4 : 4+spiSize]
	ts, err := decodeV1Payloads(v1Transf, b[4+spiSize:], false)
	if err != nil {
		return p, fmt.Errorf("proposal %d: %w", p.Number, err)
	}
	if len(ts) != n || n == 0 || n > v1MaxTransforms {
		return p, fmt.Errorf("proposal %d claims %d transforms, holds %d: %w", p.Number, n, len(ts), ErrMalformed)
	}
	for _, tp := range ts {
		if tp.Type != v1Transf {
			return p, fmt.Errorf("proposal %d holds payload %d, not a transform: %w", p.Number, tp.Type, ErrMalformed)
		}
		t, err := decodeV1Transform(tp.Body)
		if err != nil {
			return p, fmt.Errorf("proposal %d: %w", p.Number, err)
		}
		p.Transforms = append(p.Transforms, t)
	}
	return p, nil
}

func decodeV1Transform(b []byte) (v1Transform, error) {
	var t v1Transform
	if len(b) < 4 {
		return t, fmt.Errorf("transform of %d bytes: %w", len(b), ErrTruncated)
	}
	t.Number, t.ID = b[0], b[1]
	var err error
	t.Attrs, err = decodeV1Attrs(b[4:])
	if err != nil {
		return t, fmt.Errorf("transform %d: %w", t.Number, err)
	}
	return t, nil
}

func decodeV1Attrs(b []byte) ([]v1Attr, error) {
	var out []v1Attr
	for len(b) > 0 {
		if len(out) == v1MaxAttrs {
			return nil, fmt.Errorf("more than %d attributes: %w", v1MaxAttrs, ErrMalformed)
		}
		if len(b) < 4 {
			return nil, fmt.Errorf("attribute: %w", ErrTruncated)
		}
		typ := binary.BigEndian.Uint16(b)
		if typ&0x8000 != 0 {
			out = append(out, v1Attr{Type: typ & 0x7fff, Value: uint64(binary.BigEndian.Uint16(b[2:]))})
			b = b[4:]
			continue
		}
		n := int(binary.BigEndian.Uint16(b[2:]))
		if 4+n > len(b) {
			return nil, fmt.Errorf("attribute %d length %d: %w", typ, n, ErrMalformed)
		}
		if n > v1MaxAttrValueBytes {
			return nil, fmt.Errorf("attribute %d of %d bytes (at most %d): %w", typ, n, v1MaxAttrValueBytes, ErrMalformed)
		}
		var v uint64
		for _, c := range b[4 : 4+n] {
			v = v<<8 | uint64(c)
		}
		out = append(out, v1Attr{Type: typ, Value: v, TLV: true})
		b = b[4+n:]
	}
	return out, nil
}

func appendV1Attrs(b []byte, as []v1Attr) []byte {
	for _, a := range as {
		if !a.TLV && a.Value <= 0xffff {
			b = binary.BigEndian.AppendUint16(b, 0x8000|a.Type)
			b = binary.BigEndian.AppendUint16(b, uint16(a.Value))
			continue
		}
		b = binary.BigEndian.AppendUint16(b, a.Type&0x7fff)
		b = binary.BigEndian.AppendUint16(b, 4)
		b = binary.BigEndian.AppendUint32(b, uint32(a.Value))
	}
	return b
}

func (sa *v1SAPayload) encode() []byte {
	b := binary.BigEndian.AppendUint32(nil, v1DOIIPsec)
	b = binary.BigEndian.AppendUint32(b, v1SitIdentityOnly)
	var props []v1Payload
	for _, p := range sa.Proposals {
		body := []byte{p.Number, p.Protocol, byte(len(p.SPI)), byte(len(p.Transforms))}
		body = append(body, p.SPI...)
		var ts []v1Payload
		for _, t := range p.Transforms {
			tb := appendV1Attrs([]byte{t.Number, t.ID, 0, 0}, t.Attrs)
			ts = append(ts, v1Payload{Type: v1Transf, Body: tb})
		}
		body = appendV1Payloads(body, ts)
		props = append(props, v1Payload{Type: v1Proposal, Body: body})
	}
	return appendV1Payloads(b, props)
}

// --- ID (RFC 2407 4.6.2) ---

const (
	v1IDIPv4Subnet = 4
	v1IDIPv6Subnet = 6
	v1IDIPv4Range  = 7
	v1IDIPv6Range  = 8
)

type v1IDPayload struct {
	Type     uint8
	Protocol uint8
	Port     uint16
	Data     []byte
}

func decodeV1ID(b []byte) (v1IDPayload, error) {
	if len(b) < 4 {
		return v1IDPayload{}, fmt.Errorf("ID payload of %d bytes: %w", len(b), ErrTruncated)
	}
	return v1IDPayload{Type: b[0], Protocol: b[1], Port: binary.BigEndian.Uint16(b[2:]), Data: b[4:]}, nil
}

func (id v1IDPayload) encode() []byte {
	b := []byte{id.Type, id.Protocol}
	b = binary.BigEndian.AppendUint16(b, id.Port)
	return append(b, id.Data...)
}

// --- Notification and Delete (RFC 2408 3.14, 3.15) ---

type v1NotifyType uint16

const (
	v1InvalidPayloadType  v1NotifyType = 1
	v1PayloadMalformed    v1NotifyType = 16
	v1InvalidExchangeType v1NotifyType = 7
	v1NoProposalChosen    v1NotifyType = 14
	v1InvalidIDInfo       v1NotifyType = 18
	v1InvalidHashInfo     v1NotifyType = 23
	v1AuthFailed          v1NotifyType = 24
	v1ResponderLifetime   v1NotifyType = 24576
	v1ReplayStatus        v1NotifyType = 24577
	v1InitialContact      v1NotifyType = 24578
	v1RUThere             v1NotifyType = 36136 // RFC 3706
	v1RUThereAck          v1NotifyType = 36137
)

func (t v1NotifyType) String() string {
	switch t {
	case v1InvalidPayloadType:
		return "INVALID-PAYLOAD-TYPE"
	case v1InvalidExchangeType:
		return "INVALID-EXCHANGE-TYPE"
	case v1PayloadMalformed:
		return "PAYLOAD-MALFORMED"
	case v1NoProposalChosen:
		return "NO-PROPOSAL-CHOSEN"
	case v1InvalidIDInfo:
		return "INVALID-ID-INFORMATION"
	case v1InvalidHashInfo:
		return "INVALID-HASH-INFORMATION"
	case v1AuthFailed:
		return "AUTHENTICATION-FAILED"
	case v1ResponderLifetime:
		return "RESPONDER-LIFETIME"
	case v1InitialContact:
		return "INITIAL-CONTACT"
	case v1RUThere:
		return "R-U-THERE"
	case v1RUThereAck:
		return "R-U-THERE-ACK"
	}
	return fmt.Sprintf("notify %d", uint16(t))
}

type v1NotifyPayload struct {
	Protocol uint8
	Type     v1NotifyType
	SPI      []byte
	Data     []byte
}

func decodeV1Notify(b []byte) (v1NotifyPayload, error) {
	if len(b) < 8 {
		return v1NotifyPayload{}, fmt.Errorf("notify of %d bytes: %w", len(b), ErrTruncated)
	}
	n := v1NotifyPayload{Protocol: b[4], Type: v1NotifyType(binary.BigEndian.Uint16(b[6:]))}
	spiSize := int(b[5])
	if 8+spiSize > len(b) {
		return n, fmt.Errorf("notify SPI size %d: %w", spiSize, ErrMalformed)
	}
	n.SPI, n.Data = b[8:8+spiSize], b[8+spiSize:]
	return n, nil
}

func (n v1NotifyPayload) encode() []byte {
	b := binary.BigEndian.AppendUint32(nil, v1DOIIPsec)
	b = append(b, n.Protocol, byte(len(n.SPI)))
	b = binary.BigEndian.AppendUint16(b, uint16(n.Type))
	return append(append(b, n.SPI...), n.Data...)
}

type v1DeletePayload struct {
	Protocol uint8
	SPIs     [][]byte
}

func decodeV1Delete(b []byte) (v1DeletePayload, error) {
	if len(b) < 8 {
		return v1DeletePayload{}, fmt.Errorf("delete of %d bytes: %w", len(b), ErrTruncated)
	}
	d := v1DeletePayload{Protocol: b[4]}
	size, n := int(b[5]), int(binary.BigEndian.Uint16(b[6:]))
	if size == 0 || size > 16 || len(b)-8 != size*n {
		return d, fmt.Errorf("delete of %d SPIs of %d bytes in %d: %w", n, size, len(b)-8, ErrMalformed)
	}
	for i := 0; i < n; i++ {
		d.SPIs = append(d.SPIs, b[8+i*size:8+(i+1)*size])
	}
	return d, nil
}

func (d v1DeletePayload) encode() []byte {
	size := 0
	if len(d.SPIs) > 0 {
		size = len(d.SPIs[0])
	}
	b := binary.BigEndian.AppendUint32(nil, v1DOIIPsec)
	b = append(b, d.Protocol, byte(size))
	b = binary.BigEndian.AppendUint16(b, uint16(len(d.SPIs)))
	for _, s := range d.SPIs {
		b = append(b, s...)
	}
	return b
}

// Vendor IDs we send and look for.
var (
	// MD5("RFC 3947"): NAT traversal as in RFC 3947.
	v1VendorNATT = []byte{0x4a, 0x13, 0x1c, 0x81, 0x07, 0x03, 0x58, 0x45, 0x5c, 0x57, 0x28, 0xf2, 0x0e, 0x95, 0x45, 0x2f}
	// RFC 3706 section 5.3: dead peer detection.
	v1VendorDPD = []byte{0xaf, 0xca, 0xd7, 0x13, 0x68, 0xa1, 0xf1, 0xc9, 0x6b, 0x86, 0x96, 0xfc, 0x77, 0x57, 0x01, 0x00}
)
