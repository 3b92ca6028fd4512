package ike

import (
	"testing"
	"unsafe"
)

// An IKE SA stays in Go's 480-byte size class on 64-bit builds: a hub
// holds one per branch. It was 696 bytes (the 704-byte class) with its
// times as time.Time and its chosen proposal in itself.
func TestIKESASize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit builds")
	}
	if n := unsafe.Sizeof(IKESA{}); n > 480 {
		t.Errorf("an IKE SA is %d bytes, more than the 480-byte size class", n)
	}
}

// A CHILD_SA's record stays in the 112-byte size class (280 bytes, the
// 288-byte class, with its times as time.Time and its proposal in itself),
// and an established IKE SA's keys in the 64-byte class (112 with SK_pi
// and SK_pr, which only IKE_AUTH needs).
func TestChildAndKeysSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit builds")
	}
	if n := unsafe.Sizeof(child{}); n > 112 {
		t.Errorf("a child is %d bytes, more than the 112-byte size class", n)
	}
	if n := unsafe.Sizeof(ikeKeys{}); n > 64 {
		t.Errorf("ikeKeys is %d bytes, more than the 64-byte size class", n)
	}
}

// A direction of an IKE SA's message protection holds its key and salt in
// itself and stays in the 96-byte size class (144 with them in slices of
// their own, which were two more allocations each; 112 with the random
// source for CBC IVs, which the SA now passes when it seals).
func TestSKDirectionSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit builds")
	}
	if n := unsafe.Sizeof(skDirection{}); n > 96 {
		t.Errorf("an skDirection is %d bytes, more than the 96-byte size class", n)
	}
}
