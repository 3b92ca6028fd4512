package esp

import (
	"bytes"
	"testing"
)

// FuzzDecap feeds arbitrary bytes to the decap path of every transform:
// the result must be an error or an inner packet that lies inside the
// input and is a well-formed IPv4 or IPv6 packet; never a panic.
func FuzzDecap(f *testing.F) {
	for _, tc := range transforms {
		out, _ := testPair(f, tc, 0x8000)
		for _, n := range []int{28, 61, 1400} {
			f.Add(encapCopy(f, out, ipv4Packet(n, byte(n))))
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0x80, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, pkt []byte) {
		for _, tc := range transforms {
			_, in := testPair(t, tc, 0x8000)
			orig := append([]byte(nil), pkt...)
			inner, err := in.Decap(pkt)
			if err != nil {
				if inner != nil {
					t.Fatalf("%s: error %v with a non-nil packet", tc.name, err)
				}
				continue
			}
			// Only a packet sealed with this key can get here.
			if len(inner) < 20 || len(inner) > len(orig) {
				t.Fatalf("%s: inner packet of %d bytes from %d", tc.name, len(inner), len(orig))
			}
			if v := inner[0] >> 4; v != 4 && v != 6 {
				t.Fatalf("%s: inner packet version %d", tc.name, v)
			}
			// Sealing it again must give back an equal inner packet.
			out, in := testPair(t, tc, 0x8000)
			again, err := in.Decap(encapCopy(t, out, bytes.Clone(inner)))
			if err != nil || !bytes.Equal(again, inner) {
				t.Fatalf("%s: re-sealed inner packet: %v", tc.name, err)
			}
		}
	})
}
