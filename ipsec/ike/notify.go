package ike

import (
	"encoding/binary"
	"fmt"
)

// NotifyType is a Notify message type (RFC 7296 3.10.1). Types below 16384
// are errors, the rest status.
type NotifyType uint16

const (
	UNSUPPORTED_CRITICAL_PAYLOAD NotifyType = 1
	INVALID_IKE_SPI              NotifyType = 4
	INVALID_MAJOR_VERSION        NotifyType = 5
	INVALID_SYNTAX               NotifyType = 7
	INVALID_MESSAGE_ID           NotifyType = 9
	INVALID_SPI                  NotifyType = 11
	NO_PROPOSAL_CHOSEN           NotifyType = 14
	INVALID_KE_PAYLOAD           NotifyType = 17
	AUTHENTICATION_FAILED        NotifyType = 24
	SINGLE_PAIR_REQUIRED         NotifyType = 34
	NO_ADDITIONAL_SAS            NotifyType = 35
	INTERNAL_ADDRESS_FAILURE     NotifyType = 36
	FAILED_CP_REQUIRED           NotifyType = 37
	TS_UNACCEPTABLE              NotifyType = 38
	INVALID_SELECTORS            NotifyType = 39
	TEMPORARY_FAILURE            NotifyType = 43
	CHILD_SA_NOT_FOUND           NotifyType = 44

	INITIAL_CONTACT               NotifyType = 16384
	SET_WINDOW_SIZE               NotifyType = 16385
	ADDITIONAL_TS_POSSIBLE        NotifyType = 16386
	IPCOMP_SUPPORTED              NotifyType = 16387
	NAT_DETECTION_SOURCE_IP       NotifyType = 16388
	NAT_DETECTION_DESTINATION_IP  NotifyType = 16389
	COOKIE                        NotifyType = 16390
	USE_TRANSPORT_MODE            NotifyType = 16391
	REKEY_SA                      NotifyType = 16393
	ESP_TFC_PADDING_NOT_SUPPORTED NotifyType = 16394
	NON_FIRST_FRAGMENTS_ALSO      NotifyType = 16395
	MOBIKE_SUPPORTED              NotifyType = 16396
	IKEV2_FRAGMENTATION_SUPPORTED NotifyType = 16430
	SIGNATURE_HASH_ALGORITHMS     NotifyType = 16431
)

var notifyNames = map[NotifyType]string{
	UNSUPPORTED_CRITICAL_PAYLOAD: "UNSUPPORTED_CRITICAL_PAYLOAD", INVALID_IKE_SPI: "INVALID_IKE_SPI",
	INVALID_MAJOR_VERSION: "INVALID_MAJOR_VERSION", INVALID_SYNTAX: "INVALID_SYNTAX",
	INVALID_MESSAGE_ID: "INVALID_MESSAGE_ID", INVALID_SPI: "INVALID_SPI",
	NO_PROPOSAL_CHOSEN: "NO_PROPOSAL_CHOSEN", INVALID_KE_PAYLOAD: "INVALID_KE_PAYLOAD",
	AUTHENTICATION_FAILED: "AUTHENTICATION_FAILED", SINGLE_PAIR_REQUIRED: "SINGLE_PAIR_REQUIRED",
	NO_ADDITIONAL_SAS: "NO_ADDITIONAL_SAS", INTERNAL_ADDRESS_FAILURE: "INTERNAL_ADDRESS_FAILURE",
	FAILED_CP_REQUIRED: "FAILED_CP_REQUIRED", TS_UNACCEPTABLE: "TS_UNACCEPTABLE",
	INVALID_SELECTORS: "INVALID_SELECTORS", TEMPORARY_FAILURE: "TEMPORARY_FAILURE",
	CHILD_SA_NOT_FOUND: "CHILD_SA_NOT_FOUND", INITIAL_CONTACT: "INITIAL_CONTACT",
	SET_WINDOW_SIZE: "SET_WINDOW_SIZE", ADDITIONAL_TS_POSSIBLE: "ADDITIONAL_TS_POSSIBLE",
	IPCOMP_SUPPORTED: "IPCOMP_SUPPORTED", NAT_DETECTION_SOURCE_IP: "NAT_DETECTION_SOURCE_IP",
	NAT_DETECTION_DESTINATION_IP: "NAT_DETECTION_DESTINATION_IP", COOKIE: "COOKIE",
	USE_TRANSPORT_MODE: "USE_TRANSPORT_MODE", REKEY_SA: "REKEY_SA",
	ESP_TFC_PADDING_NOT_SUPPORTED: "ESP_TFC_PADDING_NOT_SUPPORTED",
	NON_FIRST_FRAGMENTS_ALSO:      "NON_FIRST_FRAGMENTS_ALSO", MOBIKE_SUPPORTED: "MOBIKE_SUPPORTED",
	IKEV2_FRAGMENTATION_SUPPORTED: "IKEV2_FRAGMENTATION_SUPPORTED",
	SIGNATURE_HASH_ALGORITHMS:     "SIGNATURE_HASH_ALGORITHMS",
}

func (t NotifyType) String() string {
	if n, ok := notifyNames[t]; ok {
		return n
	}
	return fmt.Sprintf("notify(%d)", uint16(t))
}

// IsError reports whether t is an error type (below 16384).
func (t NotifyType) IsError() bool { return t < 16384 }

// ProtocolID names the protocol of a proposal, notify or delete.
type ProtocolID uint8

const (
	ProtoIKE ProtocolID = 1
	ProtoAH  ProtocolID = 2
	ProtoESP ProtocolID = 3
)

// Notify is the Notify payload.
type Notify struct {
	Protocol   ProtocolID
	SPI        []byte
	NotifyType NotifyType
	Data       []byte
}

func (*Notify) Type() PayloadType { return PayloadNotify }
func (p *Notify) appendBody(b []byte) []byte {
	b = append(b, byte(p.Protocol), byte(len(p.SPI)))
	b = binary.BigEndian.AppendUint16(b, uint16(p.NotifyType))
	return append(append(b, p.SPI...), p.Data...)
}

func decodeNotify(body []byte) (*Notify, error) {
	if len(body) < 4 {
		return nil, ErrTruncated
	}
	n := int(body[1])
	if 4+n > len(body) {
		return nil, fmt.Errorf("notify SPI size %d: %w", n, ErrMalformed)
	}
	return &Notify{
		Protocol:   ProtocolID(body[0]),
		NotifyType: NotifyType(binary.BigEndian.Uint16(body[2:])),
		SPI:        body[4 : 4+n],
		Data:       body[4+n:],
	}, nil
}

// Delete is the Delete payload (RFC 7296 3.11). For IKE there are no SPIs.
type Delete struct {
	Protocol ProtocolID
	SPISize  uint8
	SPIs     [][]byte
}

func (*Delete) Type() PayloadType { return PayloadDelete }
func (p *Delete) appendBody(b []byte) []byte {
	b = append(b, byte(p.Protocol), p.SPISize)
	b = binary.BigEndian.AppendUint16(b, uint16(len(p.SPIs)))
	for _, s := range p.SPIs {
		b = append(b, s...)
	}
	return b
}

func decodeDelete(body []byte) (*Delete, error) {
	if len(body) < 4 {
		return nil, ErrTruncated
	}
	p := &Delete{Protocol: ProtocolID(body[0]), SPISize: body[1]}
	n := int(binary.BigEndian.Uint16(body[2:]))
	if int(p.SPISize)*n != len(body)-4 {
		return nil, fmt.Errorf("delete: %d SPIs of %d bytes in %d: %w", n, p.SPISize, len(body)-4, ErrMalformed)
	}
	if p.SPISize == 0 && n > 0 {
		return nil, fmt.Errorf("delete: %d SPIs of size 0: %w", n, ErrMalformed)
	}
	p.SPIs = make([][]byte, n)
	for i := range p.SPIs {
		p.SPIs[i] = body[4+i*int(p.SPISize) : 4+(i+1)*int(p.SPISize)]
	}
	return p, nil
}

// notify finds the first notify of type t in ps.
func findNotify(ps []Payload, t NotifyType) *Notify {
	for _, p := range ps {
		if n, ok := p.(*Notify); ok && n.NotifyType == t {
			return n
		}
	}
	return nil
}

// firstErrorNotify returns the first error notify in ps, or nil.
func firstErrorNotify(ps []Payload) *Notify {
	for _, p := range ps {
		if n, ok := p.(*Notify); ok && n.NotifyType.IsError() {
			return n
		}
	}
	return nil
}
