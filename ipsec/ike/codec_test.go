package ike

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"testing"
)

// sampleMessage has one of every payload the codec knows.
func sampleMessage() *Message {
	ike := MustParseProposals(ProtoIKE, "aes128gcm16-prfsha256-ecp256,aes256-sha256-modp2048")
	return &Message{
		Header: Header{SPIi: 0x0102030405060708, SPIr: 0x1112131415161718, Version: Version,
			Exchange: IKE_SA_INIT, Flags: FlagInitiator, MessageID: 7},
		Payloads: []Payload{
			&Notify{NotifyType: COOKIE, Data: bytes.Repeat([]byte{9}, 20)},
			&SA{Proposals: []WireProposal{ike[0].ToWire(1, nil), ike[1].ToWire(2, spiBytes(42))}},
			&KE{Group: ECP256, Data: bytes.Repeat([]byte{1}, 64)},
			&Nonce{Data: bytes.Repeat([]byte{2}, 32)},
			&ID{IDType: IDFQDN, Data: []byte("gwA")},
			&ID{Responder: true, IDType: IDIPv4, Data: []byte{10, 0, 0, 1}},
			&Cert{Encoding: 4, Data: []byte("cert")},
			&Cert{Request: true, Encoding: 4, Data: bytes.Repeat([]byte{3}, 20)},
			&Auth{Method: AuthSharedKeyMIC, Data: bytes.Repeat([]byte{4}, 32)},
			&Notify{Protocol: ProtoESP, SPI: []byte{1, 2, 3, 4}, NotifyType: REKEY_SA},
			&Delete{Protocol: ProtoESP, SPISize: 4, SPIs: [][]byte{{1, 2, 3, 4}, {5, 6, 7, 8}}},
			&Delete{Protocol: ProtoIKE, SPIs: [][]byte{}},
			&Vendor{Data: []byte("flashgate")},
			&TS{Selectors: []Selector{SelectorFromPrefix(netip.MustParsePrefix("10.1.0.0/16"))}},
			&TS{Responder: true, Selectors: []Selector{
				SelectorFromPrefix(netip.MustParsePrefix("fd00::/64")),
				{Protocol: 6, StartPort: 80, EndPort: 80, Start: netip.MustParseAddr("10.2.0.1"), End: netip.MustParseAddr("10.2.0.9")}}},
			&CP{CfgType: 1, Attributes: []CPAttribute{{Type: 1}, {Type: 3, Value: []byte{1, 2, 3, 4}}}},
			&EAP{Data: []byte{1, 1, 0, 5, 1}},
			&Unknown{PType: 200, Data: []byte{1, 2}},
			&Encrypted{NextPayload: PayloadIDi, Data: bytes.Repeat([]byte{5}, 48)},
		},
	}
}

func TestMessageRoundTrip(t *testing.T) {
	m := sampleMessage()
	b := m.Encode()
	got, err := DecodeMessage(b)
	if err != nil {
		t.Fatalf("decode of our own encoding: %v", err)
	}
	m.Length = uint32(len(b))
	m.NextPayload = PayloadNotify
	if !reflect.DeepEqual(got.Header, m.Header) {
		t.Errorf("header: got %+v, want %+v", got.Header, m.Header)
	}
	if len(got.Payloads) != len(m.Payloads) {
		t.Fatalf("got %d payloads, want %d", len(got.Payloads), len(m.Payloads))
	}
	for i := range m.Payloads {
		// %+v prints nil and empty slices alike, which is the equality wanted here.
		if g, w := fmt.Sprintf("%+v", got.Payloads[i]), fmt.Sprintf("%+v", m.Payloads[i]); g != w {
			t.Errorf("payload %d (%v): got %s, want %s", i, m.Payloads[i].Type(), g, w)
		}
	}
	if b2 := got.Encode(); !bytes.Equal(b, b2) {
		t.Errorf("re-encoding differs:\n%x\n%x", b, b2)
	}
}

// TestKeyLengthIsTV checks the transform attribute wire format against the
// bytes RFC 7296 3.3.5 prescribes: AF=1, type 14, value in the length field.
func TestKeyLengthIsTV(t *testing.T) {
	p := MustParseProposals(ProtoESP, "aes256-sha256")[0]
	b := (&SA{Proposals: []WireProposal{p.ToWire(1, []byte{0xc0, 0, 0, 1})}}).appendBody(nil)
	// proposal header(8) + SPI(4), then the ENCR transform: 8 bytes + attribute.
	want := "0300000c" + "0100000c" + "800e0100"
	if got := hex.EncodeToString(b[12 : 12+12]); got != want {
		t.Errorf("ENCR transform = %s, want %s", got, want)
	}
	if b[4] != 1 || ProtocolID(b[5]) != ProtoESP || b[6] != 4 || b[7] != 3 {
		t.Errorf("proposal header %x: want number 1, ESP, SPI size 4, 3 transforms", b[4:8])
	}
}

func TestDecodeRejects(t *testing.T) {
	good := sampleMessage().Encode()
	hdr := func(np PayloadType, body ...byte) []byte {
		h := Header{SPIi: 1, Version: Version, Exchange: IKE_SA_INIT, NextPayload: np, Length: uint32(HeaderLen + len(body))}
		return append(h.append(nil), body...)
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"short header", good[:20], ErrTruncated},
		{"length beyond datagram", good[:len(good)-1], ErrTruncated},
		{"IKEv1 version", append(append([]byte{}, good[:17]...), append([]byte{0x10}, good[18:]...)...), ErrBadVersion},
		{"payload length too small", hdr(PayloadNonce, 0, 0, 0, 2), ErrMalformed},
		{"payload length past end", hdr(PayloadNonce, 0, 0, 0, 40, 1, 2), ErrMalformed},
		{"short nonce", hdr(PayloadNonce, 0, 0, 0, 8, 1, 2, 3, 4), ErrMalformed},
		{"SA with no proposals", hdr(PayloadSA, 0, 0, 0, 4), ErrMalformed},
		{"SA with huge transform count", hdr(PayloadSA, 0, 0, 0, 12, 0, 0, 0, 8, 1, 1, 0, 255), ErrMalformed},
		{"TS count lies", hdr(PayloadTSi, 0, 0, 0, 8, 200, 0, 0, 0), ErrMalformed},
		{"delete count lies", hdr(PayloadDelete, 0, 0, 0, 8, 3, 4, 0xff, 0xff), ErrMalformed},
		{"notify SPI past end", hdr(PayloadNotify, 0, 0, 0, 8, 3, 9, 0, 1), ErrMalformed},
		{"EAP length lies", hdr(PayloadEAP, 0, 0, 0, 8, 1, 1, 0, 9), ErrMalformed},
		{"SK not last", hdr(PayloadSK, byte(PayloadNonce), 0, 0, 4, 0, 0, 0, 4), ErrMalformed},
	}
	for _, tt := range tests {
		_, err := DecodeMessage(tt.in)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: got error %v, want %v", tt.name, err, tt.want)
		}
	}
	var uc *UnsupportedCriticalError
	if _, err := DecodeMessage(hdr(200, 0, 0x80, 0, 4)); !errors.As(err, &uc) || uc.Type != 200 {
		t.Errorf("unknown critical payload: got %v, want UnsupportedCriticalError{200}", err)
	}
	if m, err := DecodeMessage(hdr(200, 0, 0, 0, 4)); err != nil || len(m.Payloads) != 1 {
		t.Errorf("unknown non-critical payload: got %v, %v; want it skipped", m, err)
	}
}

func TestSelectorPrefixes(t *testing.T) {
	tests := []struct {
		start, end string
		want       []string
	}{
		{"10.0.0.0", "10.0.0.255", []string{"10.0.0.0/24"}},
		{"10.0.0.1", "10.0.0.6", []string{"10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/31", "10.0.0.6/32"}},
		{"0.0.0.0", "255.255.255.255", []string{"0.0.0.0/0"}},
		{"fd00::", "fd00::ffff", []string{"fd00::/112"}},
	}
	for _, tt := range tests {
		s := Selector{Start: netip.MustParseAddr(tt.start), End: netip.MustParseAddr(tt.end), EndPort: 0xffff}
		var got []string
		for _, p := range s.Prefixes() {
			got = append(got, p.String())
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s-%s: got %v, want %v", tt.start, tt.end, got, tt.want)
		}
	}
}

func TestNarrow(t *testing.T) {
	sel := func(p string) Selector { return SelectorFromPrefix(netip.MustParsePrefix(p)) }
	got := narrow([]Selector{sel("10.1.0.0/16")}, []Selector{sel("10.0.0.0/8")})
	if len(got) != 1 || got[0] != sel("10.1.0.0/16") {
		t.Errorf("narrow 10/8 to 10.1/16: got %v", got)
	}
	if got := narrow([]Selector{sel("10.1.0.0/16")}, []Selector{sel("10.1.2.3/32"), sel("10.1.2.0/24")}); len(got) != 1 || got[0] != sel("10.1.2.0/24") {
		t.Errorf("narrow host+net offer: got %v, want just 10.1.2.0/24", got)
	}
	if got := narrow([]Selector{sel("10.1.0.0/16")}, []Selector{sel("192.168.0.0/16")}); len(got) != 0 {
		t.Errorf("disjoint selectors narrowed to %v, want nothing", got)
	}
	if got := narrow([]Selector{sel("10.1.0.0/16")}, []Selector{sel("fd00::/8")}); len(got) != 0 {
		t.Errorf("IPv4 and IPv6 narrowed to %v, want nothing", got)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(sampleMessage().Encode())
	f.Add((&Message{Header: Header{Exchange: IKE_AUTH}, Payloads: []Payload{&Encrypted{NextPayload: PayloadIDi, Data: make([]byte, 40)}}}).Encode())
	f.Add(make([]byte, 28))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			return
		}
		enc := m.Encode()
		m2, err := DecodeMessage(enc)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if enc2 := m2.Encode(); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n%x\n%x", enc, enc2)
		}
	})
}
