package testnet

import (
	"net/netip"
	"testing"
	"time"
)

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
	conn := func(local, remote netip.Addr, lid, rid string, lts, rts netip.Prefix) CharonConn {
		return CharonConn{Name: "s2s", LocalAddr: local, RemoteAddr: remote, LocalID: lid, RemoteID: rid,
			PSK: "harness-test-psk-0123456789", Proposals: "aes128gcm16-prfsha256-ecp256", ESPProposals: "aes128gcm16",
			LocalTS: []netip.Prefix{lts}, RemoteTS: []netip.Prefix{rts}}
	}
	a := StartCharon(t, s.GwA, conn(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB))
	b := StartCharon(t, s.GwB, conn(s.GwBWAN, s.GwAWAN, "gwB", "gwA", s.LANB, s.LANA))
	if err := a.Initiate("s2s-net"); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitChild("s2s-net", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := Ping(s.HostA, s.HostBIP, 3); err != nil {
		t.Fatalf("hostA could not reach hostB through the strongSwan tunnel: %v", err)
	}
}
