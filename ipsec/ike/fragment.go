package ike

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"
)

// IKE fragmentation (RFC 7383). Both ends announce
// IKEV2_FRAGMENTATION_SUPPORTED in IKE_SA_INIT; after that a protected
// message that would not fit the path (PeerConfig.FragmentSize, an IP
// datagram of 1280 bytes by default, strongSwan's fragment_size) is sent as
// SKF payloads, each fragment a message of its own, sealed on its own.
// Each fragment received is authenticated before it is kept; the parts of
// one message are held until the last arrives, at most ReassemblyTimeout,
// within MaxFragments and MaxMessageLen per message and ReassemblyBudget
// over the whole endpoint, so that peers who finished IKE_SA_INIT (anyone)
// cannot pin much memory with fragments they never complete.

const (
	// DefaultFragmentSize is the IP datagram size a fragment fills.
	DefaultFragmentSize = 1280
	// MinFragmentSize is the smallest allowed (IPv4's minimum MTU).
	MinFragmentSize = 576
	// MaxFragments bounds the fragments of one message.
	MaxFragments = 128
	// ReassemblyTimeout drops a message whose fragments stop coming.
	ReassemblyTimeout = 10 * time.Second
	// ReassemblyBudget bounds the plaintext held for reassembly by one
	// endpoint.
	ReassemblyBudget = 4 << 20
)

// EncryptedFragment is the SKF payload: one fragment of a protected
// message, still sealed. NextPayload is the first inner payload's type in
// fragment 1 and zero in the others.
type EncryptedFragment struct {
	NextPayload   PayloadType
	Number, Total uint16
	Data          []byte // IV, ciphertext, ICV
}

func (*EncryptedFragment) Type() PayloadType { return PayloadSKF }
func (p *EncryptedFragment) appendBody(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, p.Number)
	b = binary.BigEndian.AppendUint16(b, p.Total)
	return append(b, p.Data...)
}

func decodeFragment(body []byte) (*EncryptedFragment, error) {
	if len(body) < 4 {
		return nil, ErrTruncated
	}
	n, t := binary.BigEndian.Uint16(body), binary.BigEndian.Uint16(body[2:])
	if n == 0 || t == 0 || n > t || t > MaxFragments {
		return nil, fmt.Errorf("fragment %d of %d: %w", n, t, ErrMalformed)
	}
	return &EncryptedFragment{Number: n, Total: t, Data: body[4:]}, nil
}

// fragmentRoom is the largest IKE message that fits one datagram of the
// configured size on this SA's path.
func (sa *IKESA) fragmentRoom() int {
	size := sa.cfg.FragmentSize
	if size == 0 {
		size = DefaultFragmentSize
	}
	room := size - 20 - 8 // IPv4 and UDP headers
	if sa.remote.Addr().Unmap().Is6() {
		room -= 20
	}
	if sa.local.Port() == sa.ep.cfg.NATTPort {
		room -= len(nonESPMarker)
	}
	return room
}

// sealMsg seals ps into one message, or into fragments when it does not
// fit and the peer takes fragments.
func (sa *IKESA) sealMsg(h Header, ps []Payload) ([][]byte, error) {
	pkt, err := sa.keys.out.seal(h, ps, sa.ep.rand)
	if err != nil {
		return nil, err
	}
	room := sa.fragmentRoom()
	if !sa.fragments || len(pkt) <= room {
		return [][]byte{pkt}, nil
	}
	plain := appendPayloads(make([]byte, 0, len(pkt)), ps)
	fixed := HeaderLen + genericHeaderLen + 4
	chunk := room - fixed
	for chunk > 0 && fixed+chunk+sa.keys.out.overhead(chunk) > room {
		chunk--
	}
	if chunk < 64 {
		return nil, fmt.Errorf("fragment size %d leaves no room for data", sa.cfg.FragmentSize)
	}
	n := (len(plain) + chunk - 1) / chunk
	if n > MaxFragments {
		return nil, fmt.Errorf("message of %d bytes needs %d fragments, more than %d", len(plain), n, MaxFragments)
	}
	out := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		hi := min((i+1)*chunk, len(plain))
		part := plain[i*chunk : hi : hi] // sealPlain appends the padding: not onto the next part
		first := NoNextPayload
		if i == 0 {
			first = ps[0].Type()
		}
		extra := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, uint16(i+1)), uint16(n))
		f, err := sa.keys.out.sealPlain(h, PayloadSKF, first, extra, part, sa.ep.rand)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	sa.ep.Stats.FragmentsSent.Add(uint64(n))
	return out, nil
}

// reassembly collects the fragments of one message.
type reassembly struct {
	msgID   uint32
	total   uint16
	first   PayloadType
	parts   [][]byte
	have    int
	size    int
	started time.Time
}

// release gives r's bytes back to the endpoint's budget.
func (r *reassembly) release(budget *atomic.Int64) {
	if r != nil {
		budget.Add(-int64(r.size))
	}
}

// reassemble authenticates and keeps one fragment of message m. When it
// was the last one missing, it returns the message's payloads and true.
func (sa *IKESA) reassemble(pkt []byte, m *Message, f *EncryptedFragment) ([]Payload, bool, error) {
	plain, err := sa.keys.in.openPlain(pkt, m.Header, f.Data)
	if err != nil {
		return nil, false, err
	}
	sa.ep.Stats.FragmentsReceived.Add(1)
	slot := &sa.reasmReq
	if m.IsResponse() {
		slot = &sa.reasmResp
	}
	now := sa.ep.now()
	r := *slot
	if r == nil || r.msgID != m.MessageID || r.total != f.Total || now.Sub(r.started) > ReassemblyTimeout {
		r.release(&sa.ep.reasmBytes)
		r = &reassembly{msgID: m.MessageID, total: f.Total, parts: make([][]byte, f.Total), started: now}
		*slot = r
	}
	i := int(f.Number) - 1
	if r.parts[i] != nil {
		return nil, false, nil // a retransmitted fragment
	}
	if r.size+len(plain) > MaxMessageLen || sa.ep.reasmBytes.Add(int64(len(plain))) > ReassemblyBudget {
		if r.size+len(plain) <= MaxMessageLen {
			sa.ep.reasmBytes.Add(-int64(len(plain)))
		}
		r.release(&sa.ep.reasmBytes)
		*slot = nil
		sa.ep.Stats.FragmentsDropped.Add(1)
		return nil, false, fmt.Errorf("reassembly of message %d over its bounds: %w", m.MessageID, ErrMalformed)
	}
	r.parts[i] = plain
	r.have++
	r.size += len(plain)
	if f.Number == 1 {
		r.first = f.NextPayload
	}
	if r.have < int(r.total) {
		return nil, false, nil
	}
	*slot = nil
	r.release(&sa.ep.reasmBytes)
	whole := make([]byte, 0, r.size)
	for _, p := range r.parts {
		whole = append(whole, p...)
	}
	ps, err := DecodePayloads(r.first, whole)
	if err != nil {
		return nil, false, err
	}
	sa.ep.Stats.Reassembled.Add(1)
	return ps, true, nil
}

// expireReassembly drops fragments that waited too long (from Tick) or
// every held fragment (when the SA ends).
func (sa *IKESA) expireReassembly(now time.Time, all bool) {
	for _, slot := range []**reassembly{&sa.reasmReq, &sa.reasmResp} {
		if r := *slot; r != nil && (all || now.Sub(r.started) > ReassemblyTimeout) {
			r.release(&sa.ep.reasmBytes)
			*slot = nil
			if !all {
				sa.ep.Stats.FragmentsDropped.Add(uint64(r.have))
			}
		}
	}
}
