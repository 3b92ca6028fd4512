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

// TestLibreswanRefusals: the refusals of TestIKEv1StrongSwan against
// libreswan's pluto, a second implementation with its own notifies and
// silences: a wrong PSK and an IKE proposal mismatch in both roles, and a
// tunnel of one IKE version getting the other. Each must put the same
// words in our tunnel's status as against strongSwan. All are decided in
// main mode or IKE_SA_INIT, before any kernel SA, so they run in
// namespaces on a kernel without ESP.
func TestLibreswanRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	if _, err := os.Stat(testnet.PlutoBinary()); err != nil {
		t.Fatalf("libreswan is not unpacked at %s: run scripts/setup.sh", testnet.PlutoBinary())
	}
	s := testnet.NewSiteToSite(t)
	plutoConn := func() testnet.PlutoConn {
		return testnet.PlutoConn{Name: "s2s", LocalAddr: s.GwBWAN, RemoteAddr: s.GwAWAN,
			LocalID: "gwB", RemoteID: "gwA", PSK: testPSK, IKE: "aes128-sha1;modp2048", ESP: "aes128-sha1",
			LocalTS: []netip.Prefix{s.LANB}, RemoteTS: []netip.Prefix{s.LANA}}
	}
	pluto := testnet.StartPluto(t, s.GwB, plutoConn())
	for _, c := range []struct {
		name        string
		edit        func(ours *config.Tunnel, peer *testnet.PlutoConn)
		plutoStarts bool
		want        []string
		wait        time.Duration
	}{
		// pluto sends no notify for a message 5 it cannot decrypt (its
		// timer repeats its message 4): we conclude from message 5 going
		// unanswered through all our retransmissions, which the DPD
		// timeout spreads over (150 s by default; 20 s here: 5 tries in
		// 15.5 s).
		{"wrong psk", func(o *config.Tunnel, p *testnet.PlutoConn) {
			p.PSK = "a-different-psk-0123456789"
			o.DPDInterval, o.DPDTimeout = config.Seconds(10), config.Seconds(20)
		}, false, []string{"AUTHENTICATION_FAILED", "pre-shared key"}, 60 * time.Second},
		{"proposal mismatch", func(o *config.Tunnel, p *testnet.PlutoConn) { p.IKE = "aes256-sha2_256;modp3072" }, false,
			[]string{"NO_PROPOSAL_CHOSEN", "main mode", "aes128-sha1-modp2048"}, 0},
		{"wrong psk, pluto initiates", func(o *config.Tunnel, p *testnet.PlutoConn) {
			p.PSK = "a-different-psk-0123456789"
			o.StartAction = config.StartRespond
		}, true, []string{"AUTHENTICATION_FAILED", "pre-shared key mismatch"}, 0},
		{"proposal mismatch, pluto initiates", func(o *config.Tunnel, p *testnet.PlutoConn) {
			p.IKE = "aes256-sha2_256;modp3072"
			o.StartAction = config.StartRespond
		}, true, []string{"NO_PROPOSAL_CHOSEN", "peer offered aes256-sha256-modp3072, we accept aes128-sha1-modp2048"}, 0},
		{"IKEv2 tunnel gets IKEv1", func(o *config.Tunnel, p *testnet.PlutoConn) {
			o.IKEVersion = config.IKEv2
			o.StartAction = config.StartRespond
		}, true, []string{"the peer speaks IKEv1 main mode; set ike_version 1"}, 0},
		{"IKEv1 tunnel gets IKEv2", func(o *config.Tunnel, p *testnet.PlutoConn) {
			p.IKEv2 = true
			o.StartAction = config.StartRespond
		}, true, []string{"the peer speaks IKEv2; set ike_version 2"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ours := v1Tunnel(s, "aes128-sha1-modp2048", "aes128-sha1", config.StartInitiate)
			peer := plutoConn()
			c.edit(&ours, &peer)
			// Load deletes the last case's connection and its states.
			if err := pluto.Load(peer); err != nil {
				t.Fatal(err)
			}
			d := startIked(t, s.GwA, ours)
			defer d.Close()
			if c.plutoStarts {
				go pluto.Initiate("s2s")
			}
			wait := c.wait
			if wait == 0 {
				wait = 30 * time.Second
			}
			if text, ok := statusSays(d, "s2s", c.want, wait); !ok {
				t.Fatalf("status and events do not say %q:\n%s\npluto:\n%s", c.want, text, lastLogLines(pluto.ReadLog(), 30))
			}
		})
	}
}
