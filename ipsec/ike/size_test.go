package ike

import (
	"testing"
	"unsafe"
)

// An IKE SA stays in Go's 704-byte size class on 64-bit builds: a hub
// holds one per branch, and the 768-byte class next to it is also where
// every AES-GCM cipher is (two per CHILD_SA, and garbage for each IKE
// message), whose spans the SAs would keep from being freed.
func TestIKESASize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit builds")
	}
	if n := unsafe.Sizeof(IKESA{}); n > 704 {
		t.Errorf("an IKE SA is %d bytes, more than the 704-byte size class", n)
	}
}

// A direction of an IKE SA's message protection holds its key and salt in
// itself and stays in the 112-byte size class (144 with them in slices of
// their own, which were two more allocations each).
func TestSKDirectionSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit builds")
	}
	if n := unsafe.Sizeof(skDirection{}); n > 112 {
		t.Errorf("an skDirection is %d bytes, more than the 112-byte size class", n)
	}
}
