package ike

import (
	"encoding/binary"
	"errors"
	"testing"
)

// A message whose length covers bytes after its last payload is malformed:
// a responder keeps IKE_SA_INIT whole, so accepting padding would let a
// peer pin up to 64 KiB per half-open SA.
func TestDecodeRejectsBytesAfterLastPayload(t *testing.T) {
	m := &Message{Header: Header{SPIi: 1, Version: Version, Exchange: IKE_SA_INIT, Flags: FlagInitiator},
		Payloads: []Payload{&Nonce{Data: make([]byte, 32)}}}
	b := m.Encode()
	if _, err := DecodeMessage(b); err != nil {
		t.Fatalf("the message itself: %v", err)
	}
	padded := append(b, make([]byte, 1000)...)
	binary.BigEndian.PutUint32(padded[24:], uint32(len(padded)))
	if _, err := DecodeMessage(padded); !errors.Is(err, ErrMalformed) {
		t.Fatalf("1000 bytes after the last payload: err = %v, want ErrMalformed", err)
	}
}
