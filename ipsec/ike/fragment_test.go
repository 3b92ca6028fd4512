package ike

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/pki"
	"github.com/flashgate/flashgate/ipsec/ike/iketest"
)

// fragmentCount counts the datagrams on the wire carrying an SKF payload.
func fragmentCount(n *testNet) (count, largest int) {
	for _, d := range n.Wire() {
		pkt := bytes.TrimPrefix(d.Pkt, nonESPMarker)
		h, err := DecodeHeader(pkt)
		if err == nil && h.NextPayload == PayloadSKF {
			count++
			largest = max(largest, len(d.Pkt))
		}
	}
	return count, largest
}

// TestFragmentedCertificateExchange: an RSA chain does not fit 576 bytes
// (the 4096-bit one is TestStrongSwanCertificates' business: its keys take
// seconds to make); IKE_AUTH goes in fragments both ways, the loss of one fragment is
// made good by the retransmission, and every datagram fits the room.
func TestFragmentedCertificateExchange(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newTestPKI(t, pki.RSA2048, now)
	a, b := certPair(t, p, pki.RSA2048, true)
	a.FragmentSize, b.FragmentSize = MinFragmentSize, MinFragmentSize
	n, ea, eb := twoPeers(t, a, b)
	lost := false
	n.SetDrop(func(d iketest.Datagram) bool {
		pkt := bytes.TrimPrefix(d.Pkt, nonESPMarker)
		h, err := DecodeHeader(pkt)
		if err != nil || h.NextPayload != PayloadSKF || !h.IsResponse() || lost {
			return false
		}
		if binary.BigEndian.Uint16(pkt[HeaderLen+4:]) == 3 { // the third fragment of B's answer
			lost = true
			return true
		}
		return false
	})
	if _, err := ea.ep.Initiate(a); err != nil {
		t.Fatal(err)
	}
	n.run()
	n.step(3*time.Second, 100*time.Millisecond)
	checkPairs(t, ea, eb, 1)
	count, largest := fragmentCount(n)
	// 576 minus IPv4 and UDP headers.
	if count < 10 || largest > MinFragmentSize-28 {
		t.Errorf("%d fragments, the largest %d bytes (room %d)", count, largest, MinFragmentSize-28)
	}
	if !lost || ea.ep.Stats.Snapshot().Reassembled == 0 || eb.ep.Stats.Snapshot().Reassembled == 0 {
		t.Errorf("lost %v; reassembled A %d, B %d", lost, ea.ep.Stats.Snapshot().Reassembled, eb.ep.Stats.Snapshot().Reassembled)
	}
	if ea.ep.reasmBytes.Load() != 0 || eb.ep.reasmBytes.Load() != 0 {
		t.Errorf("reassembly budget not given back: %d, %d", ea.ep.reasmBytes.Load(), eb.ep.reasmBytes.Load())
	}
}

// TestFragmentsOnlyWhenBothSupport: a small message is never fragmented,
// and a PSK exchange stays whole at the default size.
func TestFragmentsOnlyWhenNeeded(t *testing.T) {
	a, b := pairConfigs(fiveSuites[0].ike, fiveSuites[0].esp)
	n, _, _ := establish(t, a, b)
	if c, _ := fragmentCount(n); c != 0 {
		t.Errorf("%d fragments for a PSK exchange", c)
	}
}

// halfOpenPair runs IKE_SA_INIT between A and B and drops A's IKE_AUTH:
// B is left half-open with keys, and A's SA holds the keys to make
// authenticated fragments for it.
func halfOpenPair(t testing.TB) (*testNet, *IKESA, *peer) {
	a, b := pairConfigs(fiveSuites[0].ike, fiveSuites[0].esp)
	n, ea, eb := twoPeers(t, a, b)
	n.SetDrop(func(d iketest.Datagram) bool {
		h, err := DecodeHeader(bytes.TrimPrefix(d.Pkt, nonESPMarker))
		return err == nil && h.Exchange == IKE_AUTH
	})
	sa, err := ea.ep.Initiate(a)
	if err != nil {
		t.Fatal(err)
	}
	n.run()
	n.SetDrop(func(iketest.Datagram) bool { return true }) // answers go nowhere
	if eb.ep.HalfOpen() != 1 || !sa.fragments {
		t.Fatalf("half-open %d, fragments negotiated %v", eb.ep.HalfOpen(), sa.fragments)
	}
	return n, sa, eb
}

// sealFragment makes fragment num of total of an IKE_AUTH request with
// message ID 1, carrying plain, sealed with sa's keys.
func sealFragment(sa *IKESA, num, total uint16, first PayloadType, plain []byte) []byte {
	extra := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, num), total)
	pkt, err := sa.keys.out.sealPlain(sa.header(IKE_AUTH, 1, false), PayloadSKF, first, extra, plain, sa.ep.rand)
	if err != nil {
		panic(err)
	}
	return pkt
}

// TestReassemblyBounded: fragments that never complete are dropped after
// ReassemblyTimeout and give their memory back; a message over
// MaxMessageLen is refused; duplicates are ignored.
func TestReassemblyBounded(t *testing.T) {
	n, sa, eb := halfOpenPair(t)
	from, to := sa.local, sa.remote
	chunk := bytes.Repeat([]byte{0}, 1000)
	eb.ep.HandleMessage(sealFragment(sa, 1, 3, PayloadIDi, chunk), to, from)
	eb.ep.HandleMessage(sealFragment(sa, 1, 3, PayloadIDi, chunk), to, from)
	if got := eb.ep.reasmBytes.Load(); got != 1000 {
		t.Fatalf("held %d bytes after a fragment and its duplicate, want 1000", got)
	}
	n.step(ReassemblyTimeout+time.Second, time.Second)
	if got := eb.ep.reasmBytes.Load(); got != 0 {
		t.Fatalf("held %d bytes after the timeout", got)
	}
	big := bytes.Repeat([]byte{0}, 30000)
	for i := uint16(1); i <= 3; i++ {
		eb.ep.HandleMessage(sealFragment(sa, i, 4, PayloadIDi, big), to, from)
	}
	if got := eb.ep.reasmBytes.Load(); got != 0 || eb.ep.Stats.Snapshot().FragmentsDropped == 0 {
		t.Fatalf("a message over %d bytes: held %d, dropped %d", MaxMessageLen, got, eb.ep.Stats.Snapshot().FragmentsDropped)
	}
	// Forged fragments are not even kept.
	f := sealFragment(sa, 1, 2, PayloadIDi, chunk)
	f[len(f)-1] ^= 1
	bad := eb.ep.Stats.Snapshot().BadICV
	eb.ep.HandleMessage(f, to, from)
	if eb.ep.Stats.Snapshot().BadICV != bad+1 || eb.ep.reasmBytes.Load() != 0 {
		t.Fatal("a forged fragment was kept")
	}
}

// FuzzFragments feeds a half-open responder authenticated fragments in
// any order, numbering and content (the fuzzer chooses the plaintext and
// the number/total; the harness seals them, as a peer that finished
// IKE_SA_INIT can): nothing may panic, and the memory held stays within
// the bounds.
func FuzzFragments(f *testing.F) {
	ps := []Payload{mustID("gwA").payload(false), &Auth{Method: AuthSharedKeyMIC, Data: make([]byte, 32)}}
	plain := appendPayloads(nil, ps)
	f.Add(plain, uint8(2))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, uint8(5))
	f.Add(bytes.Repeat([]byte{0xff}, 300), uint8(130))
	n, sa, eb := halfOpenPair(f)
	_ = n
	var mu sync.Mutex
	f.Fuzz(func(t *testing.T, data []byte, split uint8) {
		mu.Lock()
		defer mu.Unlock()
		if eb.ep.HalfOpen() == 0 {
			t.Skip("the half-open SA ended")
		}
		parts := int(split)%8 + 1
		total := uint16(split) // may disagree with parts, exceed MaxFragments, be 0
		size := (len(data) + parts - 1) / max(parts, 1)
		for i := 0; i < parts; i++ {
			lo, hi := min(i*size, len(data)), min((i+1)*size, len(data))
			num := uint16(i + 1)
			if split&0x80 != 0 {
				num = uint16(parts - i) // backwards
			}
			first := NoNextPayload
			if num == 1 {
				first = PayloadIDi
			}
			eb.ep.HandleMessage(sealFragment(sa, num, total, first, data[lo:hi]), sa.local, sa.remote)
			if got := eb.ep.reasmBytes.Load(); got < 0 || got > MaxMessageLen {
				t.Fatalf("reassembly holds %d bytes", got)
			}
		}
	})
}
