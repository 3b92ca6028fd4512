package iked

import (
	"crypto/rand"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/ike"
)

// TestMemRefusedPeerShows: a peer we refuse at IKE_AUTH (IKEv1: main
// mode message 5), for the wrong pre-shared key or the wrong identity,
// shows on the respond tunnel it tried: an event and the failed state with
// the AUTHENTICATION_FAILED reason, not "waiting for the peer to connect"
// (issue 19: the refusal ended an SA that never was the tunnel's, and the
// daemon dropped it; for IKEv1 it still did after the IKEv2 fix, as its
// failures name the main mode message instead of an exchange).
func TestMemRefusedPeerShows(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version config.IKEVersion
		change  func(*config.Tunnel)
		want    string
	}{
		{"wrong PSK", config.IKEv2, func(c *config.Tunnel) { c.PSK = config.NewSecret("not the secret A has") }, "pre-shared key mismatch"},
		{"wrong ID", config.IKEv2, func(c *config.Tunnel) { c.LocalID = "gwX" }, "identity mismatch: the peer calls itself gwX, we expect gwB"},
		{"IKEv1 wrong PSK", config.IKEv1, func(c *config.Tunnel) { c.PSK = config.NewSecret("not the secret A has") },
			"pre-shared key mismatch: the peer's identity message does not decrypt with the key derived from our secret"},
		{"IKEv1 wrong ID", config.IKEv1, func(c *config.Tunnel) { c.LocalID = "gwX" }, "identity mismatch: the peer calls itself gwX, we expect gwB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			version := func(c config.Tunnel) config.Tunnel {
				if tc.version == config.IKEv1 {
					c.IKEVersion = config.IKEv1
					c.IKEProposals, c.ESPProposals = []string{"aes128-sha1-modp2048"}, []string{"aes128-sha1"}
				}
				return c
			}
			n := newMemNet(t)
			wrong := version(memTunnel(memB, memA, memLANB, memLANA, config.StartInitiate))
			tc.change(&wrong)
			a := n.gateway(memA, version(memTunnel(memA, memB, memLANA, memLANB, config.StartRespond)))
			n.gateway(memB, wrong)
			n.run()
			st := a.want(t, "s2s", ipsec.StateFailed, "AUTHENTICATION_FAILED for peer 10.99.0.2:500: "+tc.want)
			if !a.hasEvent("s2s", "AUTHENTICATION_FAILED") {
				t.Errorf("no event names the refusal:\n%s", eventLines(st))
			}
			if got := a.Stats().IKE.AuthFailures; got != 1 {
				t.Errorf("AuthFailures %d, want 1", got)
			}
		})
	}
}

// TestMemPeerOffersUnsupported: a peer that offers only algorithms
// flashgate does not run (or does not allow this tunnel) is refused with
// NO_PROPOSAL_CHOSEN, and the respond tunnel's status names what it
// offered in words, 3des-sha1-modp1536, not raw transform IDs such as
// encr3_0-sha1-dh5 (issue 19).
func TestMemPeerOffersUnsupported(t *testing.T) {
	n := newMemNet(t)
	a := n.gateway(memA, memTunnel(memA, memB, memLANA, memLANB, config.StartRespond))
	n.run()
	// What an old peer sends: 3DES without a key length, the PRF named,
	// MODP1536; and DES with MD5 and MODP768, which nothing here runs.
	offer := []ike.WireProposal{
		{Number: 1, Protocol: ike.ProtoIKE, Transforms: []ike.WireTransform{
			{Type: ike.TransformENCR, ID: 3}, {Type: ike.TransformPRF, ID: ike.PRF_HMAC_SHA1},
			{Type: ike.TransformINTEG, ID: ike.AUTH_HMAC_SHA1_96}, {Type: ike.TransformDH, ID: 5}}},
		{Number: 2, Protocol: ike.ProtoIKE, Transforms: []ike.WireTransform{
			{Type: ike.TransformENCR, ID: 2}, {Type: ike.TransformPRF, ID: 1},
			{Type: ike.TransformINTEG, ID: 1}, {Type: ike.TransformDH, ID: 1}}},
	}
	nonce, ke := make([]byte, 32), make([]byte, 192)
	rand.Read(nonce)
	rand.Read(ke)
	m := &ike.Message{
		Header:   ike.Header{SPIi: 0x0123456789abcdef, Version: ike.Version, Exchange: ike.IKE_SA_INIT, Flags: ike.FlagInitiator},
		Payloads: []ike.Payload{&ike.SA{Proposals: offer}, &ike.KE{Group: 5, Data: ke}, &ike.Nonce{Data: nonce}},
	}
	if err := n.net.Send(m.Encode(), netip.AddrPortFrom(memB, 500), netip.AddrPortFrom(memA, 500)); err != nil {
		t.Fatal(err)
	}
	n.run()
	n.step(time.Second, 100*time.Millisecond)
	st := a.want(t, "s2s", ipsec.StateFailed, "NO_PROPOSAL_CHOSEN in IKE_SA_INIT from 10.99.0.2:500: peer offered 3des-sha1-modp1536,des-md5-modp768, we accept "+memIKE)
	for _, e := range st.Events {
		if strings.Contains(e.Message, "encr") || strings.Contains(e.Message, "dh5") {
			t.Errorf("an event names algorithms by number: %s", e.Message)
		}
	}
}
