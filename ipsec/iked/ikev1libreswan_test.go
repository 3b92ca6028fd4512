package iked

import (
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
)

// TestLibreswanEncapsulationMismatch: libreswan's pluto set to
// encapsulation=no ignores NAT detection and offers bare ESP in quick
// mode, while our userspace data plane carries ESP only in UDP (it
// announces a NAT for it). We refuse with NO_PROPOSAL_CHOSEN, which pluto
// ignores and retransmits: our status is all the admin has, and the two
// lists of algorithms in it are the same, so it must name the
// encapsulation. pluto stops at its kernel call (this machine has no ESP)
// only after our answer, so the refusal is seen whole in namespaces.
func TestLibreswanEncapsulationMismatch(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	if _, err := os.Stat(testnet.PlutoBinary()); err != nil {
		t.Fatalf("libreswan is not unpacked at %s: run scripts/setup.sh", testnet.PlutoBinary())
	}
	s := testnet.NewSiteToSite(t)
	pluto := testnet.StartPluto(t, s.GwB, testnet.PlutoConn{Name: "s2s", LocalAddr: s.GwBWAN, RemoteAddr: s.GwAWAN,
		LocalID: "gwB", RemoteID: "gwA", PSK: testPSK, IKE: "aes128-sha1;modp2048", ESP: "aes128-sha1", NoEncapsulation: true,
		LocalTS: []netip.Prefix{s.LANB}, RemoteTS: []netip.Prefix{s.LANA}})
	d := startIked(t, s.GwA, v1Tunnel(s, "aes128-sha1-modp2048", "aes128-sha1", config.StartRespond))
	defer d.Close()
	go pluto.Initiate("s2s")
	want := []string{"NO_PROPOSAL_CHOSEN in quick mode", "without UDP encapsulation", "encapsulation=no"}
	var text string
	if !waitFor(60*time.Second, func() bool {
		st := tunnelStatus(d, "s2s")
		text = st.Reason
		for _, w := range want {
			if !strings.Contains(text, w) {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("our status does not say %q: %q\npluto:\n%s", want, text, lastLogLines(pluto.ReadLog(), 20))
	}
	t.Logf("status: %s", text)
}
