package ike

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testnet"
)

// IKEv1 against libreswan's pluto, a second independent implementation
// (internal/testnet runs it from the unpacked Debian package).
//
// pluto has no userspace ESP, and this kernel has no ESP: pluto fails to
// install the IPsec SA it negotiated ("netlink response for Add SA ...:
// Protocol not supported") and stops the quick mode there. So this test
// checks main mode to the end in both roles, and quick mode up to pluto's
// kernel call: pluto has verified our quick mode HASH, chosen our
// proposal and derived the SA for one of our SPIs. The whole exchange
// with traffic needs a kernel with ESP (see the report of issue 19).

// plutoSuite is how pluto logs an established ISAKMP SA of our suites.
var plutoSuite = map[string]string{
	"aes128-sha1-modp2048":   "IKE SA established {auth=PRESHARED_KEY cipher=AES_CBC_128 integ=HMAC_SHA1 group=MODP2048}",
	"aes256-sha256-modp2048": "IKE SA established {auth=PRESHARED_KEY cipher=AES_CBC_256 integ=HMAC_SHA2_256 group=MODP2048}",
	"3des-sha1-modp1536":     "IKE SA established {auth=PRESHARED_KEY cipher=3DES_CBC_192 integ=HMAC_SHA1 group=MODP1536}",
	"aes128-sha1-modp1536":   "IKE SA established {auth=PRESHARED_KEY cipher=AES_CBC_128 integ=HMAC_SHA1 group=MODP1536}",
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func TestLibreswanIKEv1(t *testing.T) {
	if testing.Short() {
		t.Skip("namespaces and pluto")
	}
	if _, err := os.Stat(testnet.PlutoBinary()); err != nil {
		t.Fatalf("libreswan is not unpacked at %s: run scripts/setup.sh", testnet.PlutoBinary())
	}
	nsA := testnet.NewNS(t, testnet.Prefix()+"lswA")
	nsB := testnet.NewNS(t, testnet.Prefix()+"lswB")
	testnet.Link(t, nsA, "vA", addrA+"/24", nsB, "vB", addrB+"/24")
	l := &interopLab{t: t, nsA: nsA.Name, nsB: nsB.Name, downs: map[uint32]error{}, conns: map[uint16]*net.UDPConn{}}
	l.listen(500, 4500)
	const psk = "libreswan v1 secret 0123456789"
	conn := func(ike, esp string, pfs bool) testnet.PlutoConn {
		return testnet.PlutoConn{Name: "s2s", LocalAddr: netip.MustParseAddr(addrB), RemoteAddr: netip.MustParseAddr(addrA),
			LocalID: "gwB", RemoteID: "gwA", PSK: psk, IKE: ike, ESP: esp, PFS: pfs,
			LocalTS: pfx("10.10.2.0/24"), RemoteTS: pfx("10.10.1.0/24")}
	}
	pluto := testnet.StartPluto(t, nsB, conn("aes128-sha1;modp2048", "aes128-sha1", false))
	base := PeerConfig{Name: "s2s", Version: 1, Local: netip.MustParseAddrPort(addrA + ":500"), Remote: netip.MustParseAddrPort(addrB + ":500"),
		LocalID: mustID("gwA"), RemoteID: mustID("gwB"), PSK: []byte(psk),
		LocalTS: pfx("10.10.1.0/24"), RemoteTS: pfx("10.10.2.0/24"), RetransmitTimeout: 300 * time.Millisecond, RetransmitTries: 4}
	cur := base
	l.startEngine(&cur)

	for _, c := range []struct {
		plutoIKE, plutoESP string
		pfs                bool
		ike, esp           string
	}{
		{"aes128-sha1;modp2048", "aes128-sha1", false, "aes128-sha1-modp2048", "aes128-sha1"},
		{"aes256-sha2_256;modp2048", "aes256-sha2_256", true, "aes256-sha256-modp2048", "aes256-sha256-modp2048"},
		// Debian builds libreswan without MODP 1024 (group 2): the legacy
		// suites go with group 5 here.
		{"3des-sha1;modp1536", "3des-sha1", false, "3des-sha1-modp1536", "3des-sha1"},
		{"aes128-sha1;modp1536", "aes128-sha1", true, "aes128-sha1-modp1536", "aes128-sha1-modp1536"},
	} {
		for _, weInitiate := range []bool{true, false} {
			role := "pluto-initiates"
			if weInitiate {
				role = "we-initiate"
			}
			t.Run(c.ike+"/"+c.esp+"/"+role, func(t *testing.T) {
				l.t = t
				// pluto first: its connection of the last case wants to
				// stay up, and our Delete would have it start a main mode
				// of the last case's suite again (a stale SA this case
				// then found, and failed on, when it won the race).
				if err := pluto.Load(conn(c.plutoIKE, c.plutoESP, c.pfs)); err != nil {
					t.Fatal(err)
				}
				for _, sa := range l.ep.SAs() {
					sa.Delete()
				}
				cc := base
				cc.IKEProposals, cc.ESPProposals = MustParseProposals(ProtoIKE, c.ike), MustParseProposals(ProtoESP, c.esp)
				cur = cc
				l.reset()
				if weInitiate {
					if _, err := l.ep.Initiate(&cur); err != nil {
						t.Fatal(err)
					}
				} else {
					go pluto.Initiate("s2s")
				}
				// The SA of this case: this suite, in this role. Any other
				// is a leftover main mode of the case before.
				var seen []string
				if !waitFor(10*time.Second, func() bool {
					seen = seen[:0]
					for _, sa := range l.ourSAs() {
						st := sa.Status()
						if st.Proposal == c.ike && st.Initiator == weInitiate {
							return true
						}
						seen = append(seen, fmt.Sprintf("%s (we initiated: %t)", st.Proposal, st.Initiator))
					}
					return false
				}) {
					t.Fatalf("no main mode of %s with pluto, we initiating: %t; SAs up: %v; failures %v", c.ike, weInitiate, seen, l.failures)
				}
				// pluto's view: the ISAKMP SA with the suite, then its
				// attempt to install an SA towards us with one of our SPIs.
				var ours []string
				var log string
				if !waitFor(10*time.Second, func() bool {
					b, _ := os.ReadFile(pluto.Log)
					log = string(b)
					ours = ours[:0]
					l.ep.mu.Lock()
					for spi := range l.ep.inSPIs {
						ours = append(ours, fmt.Sprintf("esp.%x@%s", spi, addrA)) // pluto prints no leading zeros
					}
					l.ep.mu.Unlock()
					for _, o := range ours {
						if strings.Contains(log, o) {
							return true
						}
					}
					return false
				}) {
					t.Fatalf("pluto did not get to installing an SA with one of our SPIs %v:\n%s", ours, tailString(log, 3000))
				}
				if want := plutoSuite[c.ike]; !strings.Contains(log, want) {
					t.Errorf("pluto's log lacks %q:\n%s", want, tailString(log, 3000))
				}
				if strings.Contains(log, "INVALID_HASH") || strings.Contains(log, "malformed") {
					t.Errorf("pluto complained:\n%s", tailString(log, 3000))
				}
			})
		}
	}

	// Our phase 1 rekey: a second main mode with pluto while the first
	// ISAKMP SA (floated to port 4500: pluto forces encapsulation) lives.
	t.Run("phase-1-rekey", func(t *testing.T) {
		l.t = t
		for _, sa := range l.ep.SAs() {
			sa.Delete()
		}
		if err := pluto.Load(conn("aes128-sha1;modp2048", "aes128-sha1", false)); err != nil {
			t.Fatal(err)
		}
		cc := base
		cc.IKEProposals, cc.ESPProposals = MustParseProposals(ProtoIKE, "aes128-sha1-modp2048"), MustParseProposals(ProtoESP, "aes128-sha1")
		cur = cc
		l.reset()
		if _, err := l.ep.Initiate(&cur); err != nil {
			t.Fatal(err)
		}
		if !waitFor(10*time.Second, func() bool { return len(l.ourSAs()) == 1 }) {
			t.Fatalf("main mode with pluto did not complete; failures %v", l.failures)
		}
		sa := l.ourSAs()[0]
		// Our message 1 of the rekey goes out twice, as when our
		// retransmission crosses pluto's answer in a loaded VM: pluto
		// answers the copy with message 2 again, which reaches us after
		// our message 3 went.
		l.mu.Lock()
		l.sendTwice = func(pkt []byte) bool {
			h, err := decodeV1Header(pkt)
			return err == nil && h.Exchange == v1MainMode && h.CkyR == 0
		}
		l.mu.Unlock()
		defer func() { l.mu.Lock(); l.sendTwice = nil; l.mu.Unlock() }()
		if err := sa.RekeyIKE(); err != nil {
			t.Fatal(err)
		}
		if !waitFor(20*time.Second, func() bool {
			s := l.ourSAs()
			return len(s) == 1 && s[0] != sa && sa.State() == StateRekeyed
		}) {
			b, _ := os.ReadFile(pluto.Log)
			t.Fatalf("our phase 1 rekey failed: %d SAs, the old one %v, failures %v, stats %+v\n%s", len(l.ep.SAs()), sa.State(), l.failures, l.ep.Stats.Snapshot(), tailString(string(b), 4000))
		}
		if b, _ := os.ReadFile(pluto.Log); !strings.Contains(string(b), "retransmitting in response to duplicate packet") {
			t.Errorf("pluto did not answer our second message 1, so this case no longer sends us a repeated message 2:\n%s", tailString(string(b), 2000))
		}
	})
}
