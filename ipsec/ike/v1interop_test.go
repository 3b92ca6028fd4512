package ike

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// IKEv1 against strongSwan's charon (`version = 1`), in the namespaces of
// interop_test.go. One charon serves the whole table; each case reloads
// its connection.

type v1CharonConn struct {
	ike, esp string
	psk      string
	children [][2]string // local_ts (charon's), remote_ts
	dpd      time.Duration
}

func (l *interopLab) loadCharonV1(c v1CharonConn) {
	if c.children == nil {
		c.children = [][2]string{{"10.10.2.0/24", "10.10.1.0/24"}}
	}
	var ch strings.Builder
	for i, p := range c.children {
		name := "net"
		if i > 0 {
			name = fmt.Sprintf("net%d", i+1)
		}
		fmt.Fprintf(&ch, "      %s { local_ts = %s\n        remote_ts = %s\n        esp_proposals = %s\n        mode = tunnel\n        start_action = none\n        dpd_action = clear }\n",
			name, p[0], p[1], c.esp)
	}
	dpd := "0"
	if c.dpd > 0 {
		dpd = fmt.Sprintf("%ds", int(c.dpd.Seconds()))
	}
	conf := fmt.Sprintf(`connections {
  s2s {
    version = 1
    local_addrs = %s
    remote_addrs = %s
    proposals = %s
    encap = yes
    dpd_delay = %s
    reauth_time = 0
    local { auth = psk
      id = gwB }
    remote { auth = psk
      id = gwA }
    children {
%s    }
  }
}
secrets {
  ike-s2s { id-a = gwA
    id-b = gwB
    id-c = %s
    id-d = %s
    secret = "%s" }
}
`, addrB, addrA, c.ike, dpd, ch.String(), addrA, addrB, c.psk)
	f := filepath.Join(l.dir, "swanctl.conf")
	if err := os.WriteFile(f, []byte(conf), 0o600); err != nil {
		l.t.Fatal(err)
	}
	if out, err := l.swanctl("--load-all", "--clear", "--file", f); err != nil {
		l.t.Fatalf("swanctl --load-all: %v\n%s", err, out)
	}
}

// v1CharonNames: how swanctl --list-sas prints our IKEv1 suites.
var v1CharonNames = map[string]string{
	"aes128-sha1-modp2048":   "AES_CBC-128/HMAC_SHA1_96/PRF_HMAC_SHA1/MODP_2048",
	"aes256-sha256-modp2048": "AES_CBC-256/HMAC_SHA2_256_128/PRF_HMAC_SHA2_256/MODP_2048",
	"3des-sha1-modp1024":     "3DES_CBC/HMAC_SHA1_96/PRF_HMAC_SHA1/MODP_1024",
	"aes128-sha1-modp1024":   "AES_CBC-128/HMAC_SHA1_96/PRF_HMAC_SHA1/MODP_1024",
	"aes128-sha1":            "AES_CBC-128/HMAC_SHA1_96",
	"aes256-sha256":          "AES_CBC-256/HMAC_SHA2_256_128",
	"3des-sha1":              "3DES_CBC/HMAC_SHA1_96",
}

func TestStrongSwanIKEv1(t *testing.T) {
	if testing.Short() {
		t.Skip("namespaces and charon")
	}
	l := newInteropLab(t)
	l.listen(500, 4500)
	const psk = "interop v1 secret 0123456789"
	base := PeerConfig{Name: "s2s", Version: 1, Local: netip.MustParseAddrPort(addrA + ":500"), Remote: netip.MustParseAddrPort(addrB + ":500"),
		LocalID: mustID("gwA"), RemoteID: mustID("gwB"), PSK: []byte(psk),
		LocalTS: pfx("10.10.1.0/24"), RemoteTS: pfx("10.10.2.0/24"), RetransmitTimeout: 300 * time.Millisecond, RetransmitTries: 4}
	cur := base
	l.startEngine(&cur)
	set := func(ike, esp string, mut func(*PeerConfig)) {
		c := base
		c.IKEProposals, c.ESPProposals = MustParseProposals(ProtoIKE, ike), MustParseProposals(ProtoESP, esp)
		if mut != nil {
			mut(&c)
		}
		cur = c
	}
	initiate := func(t *testing.T, weInitiate bool, child string) {
		t.Helper()
		if weInitiate {
			if _, err := l.ep.Initiate(&cur); err != nil {
				t.Fatal(err)
			}
		} else if out, err := l.swanctl("--initiate", "--child", child, "--timeout", "10"); err != nil {
			t.Fatalf("charon could not initiate: %v\n%s\nour failures: %v", err, out, l.failures)
		}
	}

	for _, s := range []struct{ ike, esp string }{
		{"aes128-sha1-modp2048", "aes128-sha1"},
		{"aes256-sha256-modp2048", "aes256-sha256-modp2048"}, // with PFS
		{"3des-sha1-modp1024", "3des-sha1"},
		{"aes128-sha1-modp1024", "aes128-sha1-modp1024"}, // the isakmpd peers' suite, PFS group 2
	} {
		t.Run(s.ike+"/"+s.esp, func(t *testing.T) {
			l.t = t
			l.v1Clean()
			l.v1Clean()
			l.loadCharonV1(v1CharonConn{ike: s.ike, esp: s.esp, psk: psk})
			set(s.ike, s.esp, nil)
			for _, weInitiate := range []bool{true, false} {
				l.reset()
				initiate(t, weInitiate, "net")
				if !waitFor(10*time.Second, func() bool { return l.childUps() == 1 }) {
					t.Fatalf("we-initiate=%v: no phase 2 SA on our side; failures %v", weInitiate, l.failures)
				}
				sas := l.charonSAs()
				espName := strings.TrimSuffix(strings.TrimSuffix(s.esp, "-modp2048"), "-modp1024")
				if !strings.Contains(sas, "ESTABLISHED") || !strings.Contains(sas, "INSTALLED") || !strings.Contains(sas, "IKEv1") ||
					!strings.Contains(sas, v1CharonNames[s.ike]) || !strings.Contains(sas, v1CharonNames[espName]) {
					t.Fatalf("we-initiate=%v: charon's view:\n%s", weInitiate, sas)
				}
				u := l.up(0)
				if !strings.Contains(sas, fmt.Sprintf("in  %08x", u.Out.SPI)) || !strings.Contains(sas, fmt.Sprintf("out %08x", u.In.SPI)) {
					t.Errorf("we-initiate=%v: our SPIs in %08x out %08x are not charon's out/in:\n%s", weInitiate, u.In.SPI, u.Out.SPI, sas)
				}
				if u.Proposal.String() != s.esp {
					t.Errorf("phase 2 %s, want %s", u.Proposal, s.esp)
				}
				l.checkV1KeysWithCharon(u)
				if u.In.EncapSrcPort != 4500 || u.In.EncapDstPort != 4500 {
					t.Errorf("charon's encap = yes, but our SA is not UDP-encapsulated: %d->%d", u.In.EncapSrcPort, u.In.EncapDstPort)
				}
				l.closeAll()
			}
		})
	}

	t.Run("two subnet pairs", func(t *testing.T) {
		l.t = t
		l.v1Clean()
		// kernel-libipsec routes a remote subnet from an address of the local one.
		run(t, "ip", "-n", l.nsB, "addr", "add", "10.10.4.1/24", "dev", "lo")
		l.loadCharonV1(v1CharonConn{ike: "aes128-sha1-modp2048", esp: "aes128-sha1", psk: psk,
			children: [][2]string{{"10.10.2.0/24", "10.10.1.0/24"}, {"10.10.4.0/24", "10.10.1.0/24"}}})
		set("aes128-sha1-modp2048", "aes128-sha1", func(c *PeerConfig) { c.RemoteTS = pfx("10.10.2.0/24", "10.10.4.0/24") })
		l.reset()
		initiate(t, true, "")
		if !waitFor(10*time.Second, func() bool { return l.childUps() == 2 }) {
			t.Fatalf("%d phase 2 SAs, want 2; failures %v\n%s", l.childUps(), l.failures, l.charonSAs())
		}
		if n := strings.Count(l.charonSAs(), "INSTALLED"); n != 2 {
			t.Fatalf("charon has %d installed, want 2:\n%s", n, l.charonSAs())
		}
		l.closeAll()
	})

	t.Run("rekeys both ways", func(t *testing.T) {
		l.t = t
		l.v1Clean()
		l.loadCharonV1(v1CharonConn{ike: "aes128-sha1-modp2048", esp: "aes128-sha1-modp2048", psk: psk})
		set("aes128-sha1-modp2048", "aes128-sha1-modp2048", nil)
		l.reset()
		initiate(t, true, "")
		if !waitFor(10*time.Second, func() bool { return l.childUps() == 1 }) {
			t.Fatalf("no phase 2 SA: %v", l.failures)
		}
		sa := l.ourSAs()[0]
		if err := sa.RekeyChild(l.up(0).In.SPI); err != nil {
			t.Fatal(err)
		}
		if !waitFor(10*time.Second, func() bool { return l.childUps() == 2 }) {
			t.Fatalf("our phase 2 rekey failed: %v", l.failures)
		}
		l.checkV1KeysWithCharon(l.up(1))
		if l.up(1).Replaces != l.up(0).In.SPI {
			t.Errorf("rekeyed pair replaces %08x, want %08x", l.up(1).Replaces, l.up(0).In.SPI)
		}
		if out, err := l.swanctl("--rekey", "--child", "net"); err != nil {
			t.Fatalf("charon rekey: %v %s", err, out)
		}
		if !waitFor(10*time.Second, func() bool { return l.childUps() == 3 }) {
			t.Fatalf("charon's phase 2 rekey failed: %v", l.failures)
		}
		l.checkV1KeysWithCharon(l.up(2))
		// charon keeps the SA it replaced until it expires (its
		// delete_rekeyed = no for IKEv1), and so do we for a while.
		if sas := l.charonSAs(); !strings.Contains(sas, fmt.Sprintf("in  %08x", l.up(2).Out.SPI)) || !strings.Contains(sas, "INSTALLED") {
			t.Fatalf("after two phase 2 rekeys charon has not our newest pair %08x:\n%s", l.up(2).In.SPI, sas)
		}
		if err := sa.RekeyIKE(); err != nil {
			t.Fatal(err)
		}
		// The old ISAKMP SA stays REKEYED for v1RetireDelay: charon
		// moves the phase 2 SAs to the new one in a job after main mode
		// and would end them with an old one deleted before that.
		if !waitFor(10*time.Second, func() bool {
			s := l.ourSAs()
			return len(s) == 1 && s[0] != sa && len(s[0].Status().Children) > 0 && sa.State() == StateRekeyed
		}) {
			t.Fatalf("our phase 1 rekey failed: %d SAs, the old one %v, failures %v", len(l.ep.SAs()), sa.State(), l.failures)
		}
		// Our main mode message 6 of charon's reauthentication goes out
		// 300 ms late, so that the quick mode below, sent as soon as we
		// are established, can reach charon first: charon then answered
		// PAYLOAD-MALFORMED (it took the quick mode with phase 1's IV),
		// which a loaded machine did now and then by itself. We hold a
		// responder's first quick mode until the peer is surely there.
		l.mu.Lock()
		l.sendLate = func(pkt []byte) time.Duration {
			if len(pkt) >= 4 && pkt[0]|pkt[1]|pkt[2]|pkt[3] == 0 {
				pkt = pkt[4:] // the non-ESP marker on port 4500
			}
			// Meanwhile we start no main mode: an encrypted one of ours
			// is message 6.
			if h, err := decodeV1Header(pkt); err == nil && h.Exchange == v1MainMode && h.Flags&v1FlagEncrypted != 0 {
				return 300 * time.Millisecond
			}
			return 0
		}
		l.mu.Unlock()
		defer func() { l.mu.Lock(); l.sendLate = nil; l.mu.Unlock() }()
		if out, err := l.swanctl("--rekey", "--ike", "s2s", "--reauth"); err != nil {
			t.Fatalf("charon phase 1 rekey: %v %s", err, out)
		}
		// charon 5.9 leaves the ISAKMP SA it reauthenticated in REKEYING
		// and its children with it; we move them to the newest one.
		var now *IKESA
		if !waitFor(5*time.Second, func() bool {
			for _, x := range l.ourSAs() {
				if x.Status().Established.After(sa.Status().Established) && len(x.Status().Children) > 0 && x.Status().Initiator == false {
					now = x
					return true
				}
			}
			return false
		}) || len(l.failures) != 0 {
			t.Fatalf("after charon's phase 1 rekey no new ISAKMP SA holds the phase 2 SAs; failures %v\n%s", l.failures, l.charonSAs())
		}
		// A phase 2 SA from the twice-rekeyed ISAKMP SA checks its SKEYID_d.
		if err := now.RekeyChild(l.up(2).In.SPI); err != nil {
			t.Fatal(err)
		}
		n := l.childUps()
		if !waitFor(10*time.Second, func() bool { return l.childUps() == n+1 }) {
			t.Fatalf("phase 2 rekey on the rekeyed ISAKMP SA failed: %v", l.failures)
		}
		l.checkV1KeysWithCharon(l.up(n))
		l.closeAll()
	})

	t.Run("DPD, charon deletes, dead peer", func(t *testing.T) {
		l.t = t
		l.v1Clean()
		l.loadCharonV1(v1CharonConn{ike: "aes128-sha1-modp2048", esp: "aes128-sha1", psk: psk, dpd: time.Second})
		set("aes128-sha1-modp2048", "aes128-sha1", func(c *PeerConfig) { c.DPDDelay = 300 * time.Millisecond })
		l.reset()
		initiate(t, true, "")
		if !waitFor(10*time.Second, func() bool { return l.childUps() == 1 }) {
			t.Fatalf("no phase 2 SA: %v", l.failures)
		}
		time.Sleep(2500 * time.Millisecond) // DPD rounds both ways
		if len(l.ourSAs()) != 1 || len(l.failures) != 0 || !strings.Contains(l.charonSAs(), "ESTABLISHED") {
			t.Fatalf("DPD between live peers: %d SAs, failures %v\n%s", len(l.ourSAs()), l.failures, l.charonSAs())
		}
		if out, err := l.swanctl("--terminate", "--child", "net", "--timeout", "5"); err != nil {
			t.Fatalf("charon terminate child: %v\n%s", err, out)
		}
		var cf *Failure
		if !waitFor(5*time.Second, func() bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			return errors.As(l.downs[l.ups[0].In.SPI], &cf)
		}) || cf.Reason != ReasonPeerDeleted {
			t.Fatalf("after charon deleted the phase 2 SA: %v", l.downs)
		}
		if err := l.ourSAs()[0].CreateChild(); err != nil {
			t.Fatal(err)
		}
		if !waitFor(5*time.Second, func() bool { return l.childUps() == 2 }) {
			t.Fatalf("a new quick mode failed: %v", l.failures)
		}
		// The peer goes dark.
		run(t, "ip", "-n", l.nsB, "link", "set", "vB", "down")
		defer run(t, "ip", "-n", l.nsB, "link", "set", "vB", "up")
		var f *Failure
		if !waitFor(15*time.Second, func() bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			return len(l.ikeDown) == 1 && errors.As(l.ikeDown[0], &f)
		}) || f.Reason != ReasonPeerTimeout || !strings.Contains(f.Error(), "DPD") {
			t.Fatalf("dead peer: %v", l.ikeDown)
		}
		run(t, "ip", "-n", l.nsB, "link", "set", "vB", "up")
		l.swanctl("--terminate", "--ike", "s2s", "--force", "--timeout", "2")
	})

	for _, tt := range []struct {
		name     string
		charon   v1CharonConn
		reason   Reason
		says     string
		initiate bool
	}{
		{"wrong psk, we initiate", v1CharonConn{ike: "aes128-sha1-modp2048", esp: "aes128-sha1", psk: "not the same secret"},
			ReasonAuthenticationFailed, "pre-shared key", true},
		{"wrong psk, charon initiates", v1CharonConn{ike: "aes128-sha1-modp2048", esp: "aes128-sha1", psk: "not the same secret"},
			ReasonAuthenticationFailed, "pre-shared key mismatch", false},
		{"IKE proposal mismatch, we initiate", v1CharonConn{ike: "aes256-sha256-modp2048", esp: "aes128-sha1", psk: psk},
			ReasonNoProposalChosen, "answered NO_PROPOSAL_CHOSEN to main mode message 1: we offered aes128-sha1-modp2048", true},
		{"IKE proposal mismatch, charon initiates", v1CharonConn{ike: "aes256-sha256-modp2048", esp: "aes128-sha1", psk: psk},
			ReasonNoProposalChosen, "peer offered aes256-sha256-modp2048, we accept aes128-sha1-modp2048", false},
		{"ESP proposal mismatch, we initiate", v1CharonConn{ike: "aes128-sha1-modp2048", esp: "aes256-sha256", psk: psk},
			ReasonNoProposalChosen, "answered NO_PROPOSAL_CHOSEN to quick mode 10.10.1.0/24 to 10.10.2.0/24: we offered aes128-sha1", true},
		{"ESP proposal mismatch, charon initiates", v1CharonConn{ike: "aes128-sha1-modp2048", esp: "aes256-sha256", psk: psk},
			ReasonNoProposalChosen, "peer offered aes256-sha256, we accept aes128-sha1", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l.t = t
			l.v1Clean()
			l.v1Clean()
			l.loadCharonV1(tt.charon)
			set("aes128-sha1-modp2048", "aes128-sha1", nil)
			l.reset()
			if tt.initiate {
				l.ep.Initiate(&cur)
			} else {
				go l.swanctl("--initiate", "--child", "net", "--timeout", "5")
			}
			var f *Failure
			if !waitFor(15*time.Second, func() bool {
				l.mu.Lock()
				defer l.mu.Unlock()
				for _, e := range append(append([]error(nil), l.failures...), l.ikeDown...) {
					if errors.As(e, &f) {
						return true
					}
				}
				return false
			}) {
				t.Fatalf("no failure reported\n%s", l.charonSAs())
			}
			if f.Reason != tt.reason || !strings.Contains(f.Error(), tt.says) {
				t.Errorf("got %q (%v), want %v saying %q", f, f.Reason, tt.reason, tt.says)
			}
			for _, sa := range l.ep.SAs() {
				sa.Delete()
			}
			l.swanctl("--terminate", "--ike", "s2s", "--force", "--timeout", "2")
			waitFor(5*time.Second, func() bool { return len(l.ep.SAs()) == 0 })
		})
	}
}

// checkV1KeysWithCharon compares our phase 2 keys with charon's KEYMAT:
// charon logs them at chd level 4, one pair per phase 2 SA, and the pair
// of this SA must be among them (not necessarily the last: a rekey or
// the next case may already have logged another, and the log reaches the
// file a little after the SA is up).
func (l *interopLab) checkV1KeysWithCharon(u ChildUp) {
	t := l.t
	var encI, encR [][]byte
	found := waitFor(5*time.Second, func() bool {
		log, err := os.ReadFile(filepath.Join(l.dir, "charon.log"))
		if err != nil {
			t.Fatal(err)
		}
		encI, encR = charonKeys(log, "encryption initiator key"), charonKeys(log, "encryption responder key")
		for i := range min(len(encI), len(encR)) {
			ok := func(a, b []byte) bool { return len(a) > 0 && string(a) == string(b) }
			if (ok(u.Out.EncKey, encI[i]) && ok(u.In.EncKey, encR[i])) || (ok(u.In.EncKey, encI[i]) && ok(u.Out.EncKey, encR[i])) {
				return true
			}
		}
		return false
	})
	switch {
	case found:
	case len(encI) == 0:
		t.Logf("charon did not log its IKEv1 keys; the SPIs and the installed state were checked")
	default:
		var lastR []byte
		if len(encR) > 0 {
			lastR = encR[len(encR)-1]
		}
		t.Errorf("phase 2 keys are none of the %d pairs charon logged:\nours   in %x out %x\ncharon's last i %x r %x", len(encI), u.In.EncKey, u.Out.EncKey, encI[len(encI)-1], lastR)
	}
}

// v1Clean removes what an earlier case left, at both ends.
func (l *interopLab) v1Clean() {
	for _, sa := range l.ep.SAs() {
		sa.Delete()
	}
	l.swanctl("--terminate", "--ike", "s2s", "--force", "--timeout", "2")
	waitFor(3*time.Second, func() bool { return len(l.ep.SAs()) == 0 && !strings.Contains(l.charonSAs(), "ESTABLISHED") })
}
