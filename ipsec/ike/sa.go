package ike

import (
	"encoding/binary"
	"fmt"
)

// TransformType is a transform's type (RFC 7296 3.3.2).
type TransformType uint8

const (
	TransformENCR  TransformType = 1
	TransformPRF   TransformType = 2
	TransformINTEG TransformType = 3
	TransformDH    TransformType = 4
	TransformESN   TransformType = 5
)

// AttrKeyLength is the only transform attribute IKEv2 defines; it is always
// sent in TV format (RFC 7296 3.3.5).
const AttrKeyLength = 14

// TransformAttribute is one attribute. TV is true for the short (type/value)
// format, whose value is Short; otherwise Value holds the TLV bytes.
type TransformAttribute struct {
	Type  uint16
	TV    bool
	Short uint16
	Value []byte
}

// WireTransform is one transform substructure.
type WireTransform struct {
	Type  TransformType
	ID    uint16
	Attrs []TransformAttribute
}

// KeyLength returns the key length attribute, or 0.
func (t *WireTransform) KeyLength() int {
	for _, a := range t.Attrs {
		if a.Type == AttrKeyLength && a.TV {
			return int(a.Short)
		}
	}
	return 0
}

// WireProposal is one proposal substructure of an SA payload.
type WireProposal struct {
	Number     uint8
	Protocol   ProtocolID
	SPI        []byte
	Transforms []WireTransform
}

// SA is the Security Association payload.
type SA struct{ Proposals []WireProposal }

func (*SA) Type() PayloadType { return PayloadSA }

func (p *SA) appendBody(b []byte) []byte {
	for i, pr := range p.Proposals {
		last := byte(2)
		if i == len(p.Proposals)-1 {
			last = 0
		}
		start := len(b)
		b = append(b, last, 0, 0, 0, pr.Number, byte(pr.Protocol), byte(len(pr.SPI)), byte(len(pr.Transforms)))
		b = append(b, pr.SPI...)
		for j, t := range pr.Transforms {
			tlast := byte(3)
			if j == len(pr.Transforms)-1 {
				tlast = 0
			}
			ts := len(b)
			b = append(b, tlast, 0, 0, 0, byte(t.Type), 0)
			b = binary.BigEndian.AppendUint16(b, t.ID)
			for _, a := range t.Attrs {
				if a.TV {
					b = binary.BigEndian.AppendUint16(b, 0x8000|a.Type)
					b = binary.BigEndian.AppendUint16(b, a.Short)
				} else {
					b = binary.BigEndian.AppendUint16(b, a.Type&0x7fff)
					b = binary.BigEndian.AppendUint16(b, uint16(len(a.Value)))
					b = append(b, a.Value...)
				}
			}
			binary.BigEndian.PutUint16(b[ts+2:], uint16(len(b)-ts))
		}
		binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	}
	return b
}

func decodeSA(body []byte) (*SA, error) {
	sa := &SA{}
	b := body
	for len(b) > 0 {
		if len(b) < 8 {
			return nil, fmt.Errorf("proposal header: %w", ErrTruncated)
		}
		last := b[0]
		plen := int(binary.BigEndian.Uint16(b[2:]))
		if plen < 8 || plen > len(b) {
			return nil, fmt.Errorf("proposal length %d, %d left: %w", plen, len(b), ErrMalformed)
		}
		if last != 0 && last != 2 {
			return nil, fmt.Errorf("proposal 'last' field %d: %w", last, ErrMalformed)
		}
		pr := WireProposal{Number: b[4], Protocol: ProtocolID(b[5])}
		spiSize := int(b[6])
		ntrans := int(b[7])
		if 8+spiSize > plen {
			return nil, fmt.Errorf("proposal %d SPI size %d: %w", pr.Number, spiSize, ErrMalformed)
		}
		pr.SPI = b[8 : 8+spiSize]
		tb := b[8+spiSize : plen]
		// Each transform is at least 8 bytes: bound the allocation by the buffer.
		if ntrans*8 > len(tb) {
			return nil, fmt.Errorf("proposal %d claims %d transforms in %d bytes: %w", pr.Number, ntrans, len(tb), ErrMalformed)
		}
		pr.Transforms = make([]WireTransform, 0, ntrans)
		for i := 0; i < ntrans; i++ {
			if len(tb) < 8 {
				return nil, fmt.Errorf("proposal %d transform %d: %w", pr.Number, i, ErrTruncated)
			}
			tlen := int(binary.BigEndian.Uint16(tb[2:]))
			if tlen < 8 || tlen > len(tb) {
				return nil, fmt.Errorf("proposal %d transform %d length %d: %w", pr.Number, i, tlen, ErrMalformed)
			}
			t := WireTransform{Type: TransformType(tb[4]), ID: binary.BigEndian.Uint16(tb[6:])}
			ab := tb[8:tlen]
			for len(ab) > 0 {
				if len(ab) < 4 {
					return nil, fmt.Errorf("transform attribute: %w", ErrTruncated)
				}
				at := binary.BigEndian.Uint16(ab)
				if at&0x8000 != 0 {
					t.Attrs = append(t.Attrs, TransformAttribute{Type: at & 0x7fff, TV: true, Short: binary.BigEndian.Uint16(ab[2:])})
					ab = ab[4:]
					continue
				}
				n := int(binary.BigEndian.Uint16(ab[2:]))
				if 4+n > len(ab) {
					return nil, fmt.Errorf("transform attribute length %d: %w", n, ErrMalformed)
				}
				t.Attrs = append(t.Attrs, TransformAttribute{Type: at, Value: ab[4 : 4+n]})
				ab = ab[4+n:]
			}
			pr.Transforms = append(pr.Transforms, t)
			tb = tb[tlen:]
		}
		if len(tb) != 0 {
			return nil, fmt.Errorf("proposal %d: %d bytes after its transforms: %w", pr.Number, len(tb), ErrMalformed)
		}
		sa.Proposals = append(sa.Proposals, pr)
		b = b[plen:]
		if last == 0 {
			break
		}
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d bytes after the last proposal: %w", len(b), ErrMalformed)
	}
	if len(sa.Proposals) == 0 {
		return nil, fmt.Errorf("no proposals: %w", ErrMalformed)
	}
	return sa, nil
}
