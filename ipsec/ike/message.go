package ike

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ExchangeType is the IKE header's exchange type (RFC 7296 3.1).
type ExchangeType uint8

const (
	IKE_SA_INIT     ExchangeType = 34
	IKE_AUTH        ExchangeType = 35
	CREATE_CHILD_SA ExchangeType = 36
	INFORMATIONAL   ExchangeType = 37
)

func (e ExchangeType) String() string {
	switch e {
	case IKE_SA_INIT:
		return "IKE_SA_INIT"
	case IKE_AUTH:
		return "IKE_AUTH"
	case CREATE_CHILD_SA:
		return "CREATE_CHILD_SA"
	case INFORMATIONAL:
		return "INFORMATIONAL"
	}
	return fmt.Sprintf("exchange(%d)", uint8(e))
}

// Header flags (RFC 7296 3.1).
const (
	FlagInitiator = 0x08 // sender is the original initiator of the IKE SA
	FlagVersion   = 0x10 // sender could speak a higher major version
	FlagResponse  = 0x20 // message is a response
)

// Version is IKEv2's major.minor version octet.
const Version = 0x20

// HeaderLen is the length of the fixed IKE header.
const HeaderLen = 28

// MaxMessageLen bounds what the decoder accepts. IKE messages without
// fragmentation fit one UDP datagram; anything larger is refused before any
// allocation happens.
const MaxMessageLen = 65535

// Header is the fixed IKE header.
type Header struct {
	SPIi, SPIr  uint64
	NextPayload PayloadType
	Version     uint8
	Exchange    ExchangeType
	Flags       uint8
	MessageID   uint32
	Length      uint32
}

// IsResponse reports whether the R flag is set.
func (h *Header) IsResponse() bool { return h.Flags&FlagResponse != 0 }

// FromInitiator reports whether the I flag is set.
func (h *Header) FromInitiator() bool { return h.Flags&FlagInitiator != 0 }

// Errors returned by the decoder; wrapped with context.
var (
	ErrTruncated  = errors.New("truncated")
	ErrMalformed  = errors.New("malformed")
	ErrBadVersion = errors.New("unsupported IKE major version")
)

// UnsupportedCriticalError is returned when a payload of an unknown type has
// its critical bit set; RFC 7296 2.5 requires rejecting the whole message
// with UNSUPPORTED_CRITICAL_PAYLOAD carrying that type.
type UnsupportedCriticalError struct{ Type PayloadType }

func (e *UnsupportedCriticalError) Error() string {
	return fmt.Sprintf("unsupported critical payload type %d", uint8(e.Type))
}

// DecodeHeader parses the fixed header and checks its length field against
// the datagram.
func DecodeHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderLen {
		return h, fmt.Errorf("IKE header: %d bytes: %w", len(b), ErrTruncated)
	}
	h.SPIi = binary.BigEndian.Uint64(b[0:])
	h.SPIr = binary.BigEndian.Uint64(b[8:])
	h.NextPayload = PayloadType(b[16])
	h.Version = b[17]
	h.Exchange = ExchangeType(b[18])
	h.Flags = b[19]
	h.MessageID = binary.BigEndian.Uint32(b[20:])
	h.Length = binary.BigEndian.Uint32(b[24:])
	if h.Version>>4 != 2 {
		return h, fmt.Errorf("IKE header version %#x: %w", h.Version, ErrBadVersion)
	}
	if h.Length < HeaderLen || h.Length > MaxMessageLen {
		return h, fmt.Errorf("IKE header length %d: %w", h.Length, ErrMalformed)
	}
	if int(h.Length) > len(b) {
		return h, fmt.Errorf("IKE header length %d, datagram %d: %w", h.Length, len(b), ErrTruncated)
	}
	return h, nil
}

func (h *Header) append(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, h.SPIi)
	b = binary.BigEndian.AppendUint64(b, h.SPIr)
	v := h.Version
	if v == 0 {
		v = Version
	}
	b = append(b, byte(h.NextPayload), v, byte(h.Exchange), h.Flags)
	b = binary.BigEndian.AppendUint32(b, h.MessageID)
	return binary.BigEndian.AppendUint32(b, h.Length)
}

// Message is a decoded IKE message. For a protected message the payloads
// are outside the SK payload; the SK payload itself is the last entry, as
// *Encrypted, until it is opened.
type Message struct {
	Header
	Payloads []Payload

	encoded []byte // the bytes it was decoded from, for AUTH's signed octets
}

// DecodeMessage parses an IKE message: the header and the payload chain.
// Trailing bytes after Header.Length are ignored (RFC 7296 permits none, but
// some stacks pad datagrams). Every length is validated against the buffer
// before anything is allocated.
func DecodeMessage(b []byte) (*Message, error) {
	h, err := DecodeHeader(b)
	if err != nil {
		return nil, err
	}
	ps, err := DecodePayloads(h.NextPayload, b[HeaderLen:h.Length])
	if err != nil {
		return nil, fmt.Errorf("%v message %d: %w", h.Exchange, h.MessageID, err)
	}
	return &Message{Header: h, Payloads: ps, encoded: b[:h.Length]}, nil
}

// Encode serialises the message, filling in the next-payload chain and all
// lengths. An *Encrypted payload is copied as it is (already sealed).
func (m *Message) Encode() []byte {
	return m.AppendEncode(make([]byte, 0, 512))
}

// AppendEncode is Encode appending to b.
func (m *Message) AppendEncode(b []byte) []byte {
	start := len(b)
	h := m.Header
	h.NextPayload = NoNextPayload
	if len(m.Payloads) > 0 {
		h.NextPayload = m.Payloads[0].Type()
	}
	b = h.append(b)
	b = appendPayloads(b, m.Payloads)
	binary.BigEndian.PutUint32(b[start+24:], uint32(len(b)-start))
	return b
}

// Find returns the first payload of type t, or nil.
func (m *Message) Find(t PayloadType) Payload { return findPayload(m.Payloads, t) }

func findPayload(ps []Payload, t PayloadType) Payload {
	for _, p := range ps {
		if p.Type() == t {
			return p
		}
	}
	return nil
}
