package ike

import (
	"encoding/binary"
	"fmt"
)

// PayloadType identifies a payload in the chain (RFC 7296 3.2).
type PayloadType uint8

const (
	NoNextPayload  PayloadType = 0
	PayloadSA      PayloadType = 33
	PayloadKE      PayloadType = 34
	PayloadIDi     PayloadType = 35
	PayloadIDr     PayloadType = 36
	PayloadCERT    PayloadType = 37
	PayloadCERTREQ PayloadType = 38
	PayloadAUTH    PayloadType = 39
	PayloadNonce   PayloadType = 40
	PayloadNotify  PayloadType = 41
	PayloadDelete  PayloadType = 42
	PayloadVendor  PayloadType = 43
	PayloadTSi     PayloadType = 44
	PayloadTSr     PayloadType = 45
	PayloadSK      PayloadType = 46
	PayloadCP      PayloadType = 47
	PayloadEAP     PayloadType = 48
	PayloadSKF     PayloadType = 53 // RFC 7383 Encrypted Fragment
)

var payloadNames = map[PayloadType]string{
	PayloadSA: "SA", PayloadKE: "KE", PayloadIDi: "IDi", PayloadIDr: "IDr",
	PayloadCERT: "CERT", PayloadCERTREQ: "CERTREQ", PayloadAUTH: "AUTH",
	PayloadNonce: "Nonce", PayloadNotify: "N", PayloadDelete: "D",
	PayloadVendor: "V", PayloadTSi: "TSi", PayloadTSr: "TSr", PayloadSK: "SK",
	PayloadCP: "CP", PayloadEAP: "EAP", PayloadSKF: "SKF",
}

func (t PayloadType) String() string {
	if n, ok := payloadNames[t]; ok {
		return n
	}
	return fmt.Sprintf("payload(%d)", uint8(t))
}

// genericHeaderLen is the next-payload/critical/length header of every payload.
const genericHeaderLen = 4

// Payload is one decoded payload. appendBody appends the payload body
// (without the generic header).
type Payload interface {
	Type() PayloadType
	appendBody(b []byte) []byte
}

// DecodePayloads parses a payload chain starting with type first. An SK
// payload must be the last one (RFC 7296 3.14); its contents are kept sealed.
func DecodePayloads(first PayloadType, b []byte) ([]Payload, error) {
	var ps []Payload
	next := first
	for next != NoNextPayload {
		if len(b) < genericHeaderLen {
			return nil, fmt.Errorf("%v payload header: %w", next, ErrTruncated)
		}
		critical := b[1]&0x80 != 0
		plen := int(binary.BigEndian.Uint16(b[2:]))
		if plen < genericHeaderLen || plen > len(b) {
			return nil, fmt.Errorf("%v payload length %d, %d left: %w", next, plen, len(b), ErrMalformed)
		}
		if len(ps) >= 256 {
			return nil, fmt.Errorf("more than 256 payloads: %w", ErrMalformed)
		}
		body := b[genericHeaderLen:plen]
		t := next
		next = PayloadType(b[0])
		p, err := decodePayload(t, body)
		if err != nil {
			return nil, fmt.Errorf("%v payload: %w", t, err)
		}
		if p == nil {
			if critical {
				return nil, &UnsupportedCriticalError{Type: t}
			}
			p = &Unknown{PType: t, Data: body}
		}
		if e, ok := p.(*Encrypted); ok {
			e.NextPayload = next
			ps = append(ps, p)
			if plen != len(b) {
				return nil, fmt.Errorf("SK payload is not the last: %w", ErrMalformed)
			}
			return ps, nil
		}
		if f, ok := p.(*EncryptedFragment); ok {
			f.NextPayload = next
			ps = append(ps, p)
			if plen != len(b) {
				return nil, fmt.Errorf("SKF payload is not the last: %w", ErrMalformed)
			}
			return ps, nil
		}
		ps = append(ps, p)
		b = b[plen:]
	}
	// Bytes the header's length covers but no payload does are not
	// ignored: a responder keeps IKE_SA_INIT whole (it is signed in
	// IKE_AUTH), so padding would let a peer pin 64 KiB per half-open SA.
	if len(b) != 0 {
		return nil, fmt.Errorf("%d bytes after the last payload: %w", len(b), ErrMalformed)
	}
	return ps, nil
}

func decodePayload(t PayloadType, body []byte) (Payload, error) {
	switch t {
	case PayloadSA:
		return decodeSA(body)
	case PayloadKE:
		if len(body) < 4 {
			return nil, ErrTruncated
		}
		return &KE{Group: DHGroup(binary.BigEndian.Uint16(body)), Data: body[4:]}, nil
	case PayloadIDi, PayloadIDr:
		if len(body) < 4 {
			return nil, ErrTruncated
		}
		return &ID{Responder: t == PayloadIDr, IDType: IDType(body[0]), Data: body[4:]}, nil
	case PayloadCERT, PayloadCERTREQ:
		if len(body) < 1 {
			return nil, ErrTruncated
		}
		return &Cert{Request: t == PayloadCERTREQ, Encoding: body[0], Data: body[1:]}, nil
	case PayloadAUTH:
		if len(body) < 4 {
			return nil, ErrTruncated
		}
		return &Auth{Method: AuthMethod(body[0]), Data: body[4:]}, nil
	case PayloadNonce:
		// RFC 7296 3.9: between 16 and 256 octets.
		if len(body) < 16 || len(body) > 256 {
			return nil, fmt.Errorf("nonce of %d bytes: %w", len(body), ErrMalformed)
		}
		return &Nonce{Data: body}, nil
	case PayloadNotify:
		return decodeNotify(body)
	case PayloadDelete:
		return decodeDelete(body)
	case PayloadVendor:
		return &Vendor{Data: body}, nil
	case PayloadTSi, PayloadTSr:
		return decodeTS(t, body)
	case PayloadSK:
		return &Encrypted{Data: body}, nil
	case PayloadSKF:
		return decodeFragment(body)
	case PayloadCP:
		return decodeCP(body)
	case PayloadEAP:
		// RFC 3748: Code(1) Identifier(1) Length(2); the length must match.
		if len(body) < 4 || int(binary.BigEndian.Uint16(body[2:])) != len(body) {
			return nil, fmt.Errorf("EAP message length: %w", ErrMalformed)
		}
		return &EAP{Data: body}, nil
	}
	return nil, nil
}

func appendPayloads(b []byte, ps []Payload) []byte {
	for i, p := range ps {
		next := NoNextPayload
		if e, ok := p.(*Encrypted); ok {
			next = e.NextPayload
		} else if f, ok := p.(*EncryptedFragment); ok {
			next = f.NextPayload
		} else if i+1 < len(ps) {
			next = ps[i+1].Type()
		}
		start := len(b)
		b = append(b, byte(next), 0, 0, 0)
		b = p.appendBody(b)
		binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	}
	return b
}

// KE is the Key Exchange payload. For ECP groups Data is x||y (RFC 5903).
type KE struct {
	Group DHGroup
	Data  []byte
}

func (*KE) Type() PayloadType { return PayloadKE }
func (p *KE) appendBody(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(p.Group))
	return append(append(b, 0, 0), p.Data...)
}

// IDType is the identification type of IDi/IDr (RFC 7296 3.5).
type IDType uint8

const (
	IDIPv4   IDType = 1
	IDFQDN   IDType = 2
	IDRFC822 IDType = 3
	IDIPv6   IDType = 5
	IDDERDN  IDType = 9
	IDKeyID  IDType = 11
)

// ID is IDi or IDr.
type ID struct {
	Responder bool
	IDType    IDType
	Data      []byte
}

func (p *ID) Type() PayloadType {
	if p.Responder {
		return PayloadIDr
	}
	return PayloadIDi
}
func (p *ID) appendBody(b []byte) []byte {
	return append(append(b, byte(p.IDType), 0, 0, 0), p.Data...)
}

// Cert is CERT or CERTREQ (RFC 7296 3.6, 3.7). Encoding 4 (X.509
// signature) carries one DER certificate in a CERT, and concatenated SHA-1
// hashes of CA public keys in a CERTREQ; see certs.go.
type Cert struct {
	Request  bool
	Encoding uint8
	Data     []byte
}

func (p *Cert) Type() PayloadType {
	if p.Request {
		return PayloadCERTREQ
	}
	return PayloadCERT
}
func (p *Cert) appendBody(b []byte) []byte { return append(append(b, p.Encoding), p.Data...) }

// AuthMethod is the AUTH payload's method (RFC 7296 3.8).
type AuthMethod uint8

const (
	AuthRSA          AuthMethod = 1
	AuthSharedKeyMIC AuthMethod = 2
	AuthDSS          AuthMethod = 3
	AuthECDSA256     AuthMethod = 9  // RFC 4754: ECDSA with SHA-256 on P-256
	AuthECDSA384     AuthMethod = 10 // ECDSA with SHA-384 on P-384
	AuthECDSA521     AuthMethod = 11 // ECDSA with SHA-512 on P-521
	AuthDigitalSig   AuthMethod = 14 // RFC 7427
)

// Auth is the Authentication payload.
type Auth struct {
	Method AuthMethod
	Data   []byte
}

func (*Auth) Type() PayloadType { return PayloadAUTH }
func (p *Auth) appendBody(b []byte) []byte {
	return append(append(b, byte(p.Method), 0, 0, 0), p.Data...)
}

// Nonce is Ni or Nr.
type Nonce struct{ Data []byte }

func (*Nonce) Type() PayloadType            { return PayloadNonce }
func (p *Nonce) appendBody(b []byte) []byte { return append(b, p.Data...) }

// Vendor is a Vendor ID payload.
type Vendor struct{ Data []byte }

func (*Vendor) Type() PayloadType            { return PayloadVendor }
func (p *Vendor) appendBody(b []byte) []byte { return append(b, p.Data...) }

// Encrypted is the SK payload (RFC 7296 3.14): IV, ciphertext, ICV, still
// sealed. NextPayload is the type of the first payload inside.
type Encrypted struct {
	NextPayload PayloadType
	Data        []byte
}

func (*Encrypted) Type() PayloadType            { return PayloadSK }
func (p *Encrypted) appendBody(b []byte) []byte { return append(b, p.Data...) }

// CPAttribute is one configuration attribute.
type CPAttribute struct {
	Type  uint16
	Value []byte
}

// CP is the Configuration payload (RFC 7296 3.15). flashgate parses it and
// does not answer it: site-to-site tunnels hand out no addresses.
type CP struct {
	CfgType    uint8
	Attributes []CPAttribute
}

func (*CP) Type() PayloadType { return PayloadCP }
func (p *CP) appendBody(b []byte) []byte {
	b = append(b, p.CfgType, 0, 0, 0)
	for _, a := range p.Attributes {
		b = binary.BigEndian.AppendUint16(b, a.Type&0x7fff)
		b = binary.BigEndian.AppendUint16(b, uint16(len(a.Value)))
		b = append(b, a.Value...)
	}
	return b
}

func decodeCP(body []byte) (*CP, error) {
	if len(body) < 4 {
		return nil, ErrTruncated
	}
	p := &CP{CfgType: body[0]}
	b := body[4:]
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("CP attribute: %w", ErrTruncated)
		}
		n := int(binary.BigEndian.Uint16(b[2:]))
		if 4+n > len(b) {
			return nil, fmt.Errorf("CP attribute length %d: %w", n, ErrMalformed)
		}
		p.Attributes = append(p.Attributes, CPAttribute{Type: binary.BigEndian.Uint16(b) & 0x7fff, Value: b[4 : 4+n]})
		b = b[4+n:]
	}
	return p, nil
}

// EAP is the EAP payload, kept opaque: flashgate does not do EAP and
// answers IKE_AUTH requests that want it with AUTHENTICATION_FAILED.
type EAP struct{ Data []byte }

func (*EAP) Type() PayloadType            { return PayloadEAP }
func (p *EAP) appendBody(b []byte) []byte { return append(b, p.Data...) }

// Unknown is a non-critical payload of a type this package does not know;
// RFC 7296 2.5 says to skip it. It is kept so that re-encoding is faithful.
type Unknown struct {
	PType PayloadType
	Data  []byte
}

func (p *Unknown) Type() PayloadType          { return p.PType }
func (p *Unknown) appendBody(b []byte) []byte { return append(b, p.Data...) }
