package xfrm

import (
	"encoding/hex"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/flashgate/flashgate/ipsec"
	"golang.org/x/sys/unix"
)

// waitAcquire returns the next acquire of p, failing the test after 3 s.
func waitAcquire(t *testing.T, p *Plane, what string) Acquire {
	t.Helper()
	select {
	case a := <-p.Acquires():
		return a
	case <-time.After(3 * time.Second):
		t.Fatalf("no acquire within 3 s after %s", what)
	}
	return Acquire{}
}

// TestKernelTrap: a trap is an outbound policy with a template and no SA,
// and a route in RouteTable; the first packet for the remote subnet makes
// the kernel send an acquire naming the trap's reqid, selector and peer.
// Untrap removes policy and route. This works without ESP in the kernel
// (policies and acquires are XFRM's own), so it runs on any host; with
// ESP (in the appliance VM) it goes on: a pair negotiated with another
// reqid takes the trap's traffic, and once it is deleted the trap is back
// and the next packet asks again, at once: the pair's outbound SA replaced
// the kernel's larval SA of the first acquire.
func TestKernelTrap(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	a, b := twoGateways(t)
	planes := map[*gateway]*Plane{}
	for _, g := range []*gateway{a, b} {
		p, err := New(Options{Netns: g.ns})
		if err != nil {
			t.Fatalf("New plane in namespace of %v: %v", g.outer, err)
		}
		t.Cleanup(func() { p.Close() })
		planes[g] = p
	}
	pa := planes[a]
	const trapID = 0x40000001
	outSel := policy{Sel: selector{Src: netA, Dst: netB}, Dir: policyOut}
	policyThere := func() bool {
		_, err := pa.conn.request(0x15 /* XFRM_MSG_GETPOLICY */, false, encodePolicyID(&outSel))
		if err != nil && !errors.Is(err, unix.ENOENT) {
			t.Fatalf("get policy: %v", err)
		}
		return err == nil
	}

	if err := pa.Trap(trapID, outerA, outerB, []netip.Prefix{netA}, []netip.Prefix{netB}); err != nil {
		t.Fatalf("trap: %v", err)
	}
	if err := pa.Trap(trapID, outerA, outerB, []netip.Prefix{netA}, []netip.Prefix{netB}); err == nil {
		t.Error("a second trap with the same reqid was accepted")
	}
	if !policyThere() {
		t.Fatalf("no outbound policy %v -> %v after Trap", netA, netB)
	}
	if got := routesIn(t, pa); !slices.Contains(got, netB) {
		t.Errorf("table %d holds %v, want the trapped subnet %v", RouteTable, got, netB)
	}
	dst := netip.AddrPortFrom(innerB, 7777)
	exchange(t, a, dst, 1)
	acq := waitAcquire(t, pa, "a packet hit the trap")
	want := Acquire{ReqID: trapID, Src: outerA, Dst: outerB, Local: netA, Remote: netB, Seq: acq.Seq}
	if acq != want || acq.Seq == 0 {
		t.Errorf("acquire %+v, want %+v with a sequence number", acq, want)
	}

	if err := Probe(); err == nil {
		// A kernel with ESP: the pair takes over, then gives back.
		tr := ipsec.Transform{Encryption: "rfc4106(gcm(aes))", EncKeyBits: 128, ICVBits: 128}
		kAB, kBA := randomKey(t, 20), randomKey(t, 20)
		inA, outA := pairFor(a, true, tr, 0xa0b00011, 0xb0a00011, kAB, kBA, nil, nil, false)
		outA.SoftBytes = 0
		inB, outB := pairFor(b, false, tr, 0xa0b00011, 0xb0a00011, kAB, kBA, nil, nil, false)
		if err := pa.AddPair(inA, outA); err != nil {
			t.Fatalf("A: %v", err)
		}
		if err := planes[b].AddPair(inB, outB); err != nil {
			t.Fatalf("B: %v", err)
		}
		echo(t, b)
		if got, err := exchange(t, a, dst, 5); got < 3 {
			t.Fatalf("through the pair over the trap: %d of 5 echoes (last error %v)", got, err)
		}
		if err := pa.DeletePair(inA.SPI); err != nil {
			t.Fatal(err)
		}
		if !policyThere() {
			t.Fatal("the trap's policy went with the pair")
		}
		exchange(t, a, dst, 1)
		if again := waitAcquire(t, pa, "the pair went and a packet hit the trap again"); again.ReqID != trapID {
			t.Errorf("acquire %+v, want reqid %d", again, trapID)
		}
	} else {
		t.Logf("no ESP here (%v): the pair over the trap is tested in the VM (TestKernelXFRMInVM)", err)
	}

	if err := pa.Untrap(trapID); err != nil {
		t.Fatal(err)
	}
	if policyThere() {
		t.Error("the trap's policy is still there after Untrap")
	}
	if got := routesIn(t, pa); slices.Contains(got, netB) {
		t.Errorf("table %d still routes %v after Untrap", RouteTable, netB)
	}
	if err := pa.Untrap(trapID); err == nil {
		t.Error("Untrap of a removed trap succeeded")
	}
}

// TestNewSAAcquireSeq: an SA answering an acquire carries its sequence
// number in xfrm_usersa_info.seq (offset 204 in both ABIs, before the
// reqid), which is how the kernel finds the larval SA to replace.
func TestNewSAAcquireSeq(t *testing.T) {
	in, _ := childPair()
	st, err := buildState(in)
	if err != nil {
		t.Fatal(err)
	}
	st.Seq = 0x01020304
	for _, l := range []layout{{4}, {8}} {
		b := l.encodeNewSA(st)
		if got := ne.Uint32(b[204:]); got != st.Seq {
			t.Errorf("align %d: seq field %#x, want %#x", l.align, got, st.Seq)
		}
		if got := ne.Uint32(b[208:]); got != st.ReqID {
			t.Errorf("align %d: reqid field %d, want %d", l.align, got, st.ReqID)
		}
	}
}

// kernelAcquireAMD64 is an XFRM_MSG_ACQUIRE payload as Linux 6.18 on
// x86-64 sent it for a UDP packet 172.16.1.1 -> 172.16.2.1 that hit
// Trap(0x40000007, 10.99.0.1, 10.99.0.2, 172.16.1.0/24, 172.16.2.0/24).
// It is also in the fuzz corpus (testdata/fuzz/FuzzDecodeEvents).
const kernelAcquireAMD64 = "" +
	"0a63000200000000000000000000000000000000320000000a630001000000000000000000000000ac10020100000000" +
	"0000000000000000ac1001010000000000000000000000001e61ffffc398ffff02002020110000000200000000000000" +
	"ac100200000000000000000000000000ac10010000000000000000000000000000000000000000000200181800000000" +
	"0000000000000000ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff0000000000000000" +
	"00000000000000000000000000000000000000000000000000000000000000000000000000000000d6400d6b00000000" +
	"0000000000000000d03f0000010000000100000000000000ffffffffffffffffffffffff04000000440005000a630002" +
	"0000000000000000000000000000000032000000020000000a6300010000000000000000000000000700004001000000" +
	"ffffffffffffffffffffffff0a0010000000000000000000"

// TestDecodeKernelAcquire decodes what the kernel really sent, not only
// what our encoder thinks it sends.
func TestDecodeKernelAcquire(t *testing.T) {
	b, err := hex.DecodeString(kernelAcquireAMD64)
	if err != nil {
		t.Fatal(err)
	}
	got, err := layout{8}.decodeAcquire(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Acquire{ReqID: 0x40000007, Src: outerA, Dst: outerB, Local: netA, Remote: netB, Seq: 4}
	if got != want {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
	l := layout{8}
	for n := range l.userAcquireLen() {
		if _, err := l.decodeAcquire(b[:n]); err == nil {
			t.Errorf("a %d-byte prefix decoded without error", n)
		}
	}
}
