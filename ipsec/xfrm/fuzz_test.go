package xfrm

import "testing"

// FuzzDecodeEvents feeds arbitrary kernel payloads to the expire, acquire
// and extended-ack decoders of both ABIs: they must fail cleanly, never panic, and
// an accepted acquire always names a reqid.
func FuzzDecodeEvents(f *testing.F) {
	in, _ := childPair()
	st, _ := buildState(in)
	for _, l := range []layout{{4}, {8}} {
		sa := l.encodeNewSA(st)
		f.Add(sa)
		acq := make([]byte, l.userAcquireLen())
		acq = attr(acq, attrTmpl, make([]byte, 64))
		f.Add(acq)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, l := range []layout{{4}, {8}} {
			_, _ = l.decodeExpire(b)
			_, _ = l.decodeUsersaInfo(b)
			if a, err := l.decodeAcquire(b); err == nil && a.ReqID == 0 {
				t.Fatalf("acquire without reqid accepted: %+v", a)
			}
		}
		for _, flags := range []uint16{0x200, 0x300} {
			_ = extAckMessage(flags, b) // error replies come from the kernel too
		}
	})
}
