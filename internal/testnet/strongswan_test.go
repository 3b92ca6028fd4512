package testnet

import (
	"net/netip"
	"testing"
	"time"
)

// startCharonPair starts charon on both gateways of s and brings the tunnel
// s2s-net up between them.
func startCharonPair(t *testing.T, s *SiteToSite) (a, b *Charon) {
	t.Helper()
	conn := func(local, remote netip.Addr, lid, rid string, lts, rts netip.Prefix) CharonConn {
		return CharonConn{Name: "s2s", LocalAddr: local, RemoteAddr: remote, LocalID: lid, RemoteID: rid,
			PSK: "harness-test-psk-0123456789", Proposals: "aes128gcm16-prfsha256-ecp256", ESPProposals: "aes128gcm16",
			LocalTS: []netip.Prefix{lts}, RemoteTS: []netip.Prefix{rts}}
	}
	a = StartCharon(t, s.GwA, conn(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB))
	b = StartCharon(t, s.GwB, conn(s.GwBWAN, s.GwAWAN, "gwB", "gwA", s.LANB, s.LANA))
	if err := a.Initiate("s2s-net"); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitChild("s2s-net", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// TestStrongSwanPair checks the harness itself: two charons on the gateways
// bring up a tunnel, and hostA reaches hostB only through it.
func TestStrongSwanPair(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test; skipped in -short mode")
	}
	s := NewSiteToSite(t)
	if err := Ping(s.HostA, s.HostBIP, 1); err == nil {
		t.Fatal("hostA reached hostB before any tunnel was up: the gateways must not route the far LAN")
	}
	startCharonPair(t, s)
	if err := Ping(s.HostA, s.HostBIP, 3); err != nil {
		t.Fatalf("hostA could not reach hostB through the strongSwan tunnel: %v", err)
	}
}

// TestCharonSAsLosesNone lists charon's SAs many times with one tunnel up
// and wants that one IKE_SA, with its CHILD_SA installed, in every listing.
// Tests count charon's SAs to tell whether an SA was deleted or replaced,
// so a listing that drops one reads as a bug in the peer under test. A
// listing built on govici's CallStreaming came back empty in 3 to 32 of
// these 300 calls on the initiator's charon in each of 5 runs, fewer on the
// responder's: listing both makes a lossy SAs fail here all but surely.
func TestCharonSAsLosesNone(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test; skipped in -short mode")
	}
	a, b := startCharonPair(t, NewSiteToSite(t))
	const listings = 300
	deadline := time.Now().Add(30 * time.Second)
	for _, c := range []*Charon{a, b} {
		counts := map[int]int{} // IKE_SAs in a listing -> listings
		for i := 0; i < listings && time.Now().Before(deadline); i++ {
			sas, err := c.SAs()
			if err != nil {
				t.Fatalf("%s: listing %d: %v", c.NS.Name, i, err)
			}
			counts[len(sas)]++
			if len(sas) == 1 && (sas[0].State != "ESTABLISHED" || sas[0].Installed("s2s-net") != 1) {
				t.Fatalf("%s: listing %d: charon's SA is %+v, want ESTABLISHED with s2s-net INSTALLED once", c.NS.Name, i, sas[0])
			}
		}
		if counts[1] != listings {
			t.Errorf("%s: charon holds one IKE_SA, but %d listings counted (IKE_SAs: listings) %v, want %d with 1",
				c.NS.Name, sumValues(counts), counts, listings)
		}
	}
}

func sumValues(m map[int]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
