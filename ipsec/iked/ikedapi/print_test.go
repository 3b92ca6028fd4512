package ikedapi

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flashgate/flashgate/ipsec"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// TestPrintStatus: `flashgate ipsec status` for a tunnel that is up (we
// initiated, NAT-T, one CHILD_SA), one that failed and says why, one that
// waits for its peer, a route tunnel whose peer died (its routes are
// withdrawn), one that waits for traffic, and an IKEv1 tunnel with weak
// (legacy) proposals.
func TestPrintStatus(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ts := []ipsec.TunnelStatus{
		{
			Name: "branch", State: ipsec.StateUp, Since: now.Add(-754 * time.Second), DataPlane: "xfrm", Driver: "cbc-aes-geode",
			LocalAddr: "192.0.2.1", RemoteAddr: "198.51.100.7:4500",
			IKE: &ipsec.IKESAStatus{InitiatorSPI: "8a4c1f0e22d3b901", ResponderSPI: "5e77a2c90b1d44f3", Initiator: true,
				Proposal: "aes128-sha256-modp2048", NATT: true, Established: now.Add(-754 * time.Second), RekeyIn: 3*time.Hour + 26*time.Minute},
			Children: []ipsec.ChildSAStatus{{
				InboundSPI: "c3a0119f", OutboundSPI: "c9e2d410", Proposal: "aes128-sha256",
				LocalTS: []string{"10.1.0.0/24"}, RemoteTS: []string{"10.2.0.0/24", "10.3.0.0/24"},
				BytesIn: 1843200, PacketsIn: 1433, BytesOut: 96104, PacketsOut: 1201, Drops: 2,
				Established: now.Add(-154 * time.Second), RekeyIn: 59*time.Minute + 2*time.Second,
			}},
		},
		{
			Name: "datacenter", State: ipsec.StateFailed, Since: now.Add(-40 * time.Second), DataPlane: "xfrm",
			LocalAddr: "192.0.2.1", RemoteAddr: "203.0.113.9:500",
			Reason: "peer 203.0.113.9:500 answered NO_PROPOSAL_CHOSEN to IKE_SA_INIT: we offered aes128gcm16-prfsha256-ecp256",
		},
		{
			Name: "flashboot", State: ipsec.StateUp, Since: now.Add(-60 * time.Second), DataPlane: "xfrm", Driver: "cbc-aes-hifn0",
			LocalAddr: "192.168.3.197", RemoteAddr: "192.168.3.198:500",
			Weak: []string{"ike aes128-sha1-modp1024: sha1, modp1024", "esp aes128-sha1: sha1"},
		},
		{
			Name: "roadwarrior", State: ipsec.StateDown, Since: now.Add(-2 * time.Hour), DataPlane: "xfrm",
			LocalAddr: "192.0.2.1", Reason: "waiting for the peer to connect (start action: respond)",
		},
		{
			Name: "aws1", State: ipsec.StateDown, Since: now.Add(-3 * time.Second), DataPlane: "xfrm", Interface: "ipsec0",
			LocalAddr: "192.0.2.1", RemoteAddr: "198.51.100.20:4500",
			Reason: "the peer is dead (dead peer detection): no answer from peer 198.51.100.20:4500 to INFORMATIONAL after 5 tries in 30s",
		},
		{
			Name: "standby", State: ipsec.StateDown, Since: now.Add(-5 * time.Minute), DataPlane: "xfrm",
			LocalAddr: "192.0.2.1", RemoteAddr: "198.51.100.9:500",
			Reason: ipsec.WaitingForTraffic + "; the peer deleted the IKE_SA",
		},
	}
	var b bytes.Buffer
	PrintStatus(&b, ts, now)
	golden(t, "status.golden", b.Bytes())

	b.Reset()
	PrintStatus(&b, nil, now)
	if got, want := b.String(), "no tunnels configured\n"; got != want {
		t.Errorf("no tunnels: got %q, want %q", got, want)
	}
}

func TestShortDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{1400 * time.Millisecond, "1s"},
		{59 * time.Second, "59s"},
		{time.Minute, "1m"},
		{61 * time.Second, "1m1s"},
		{time.Hour, "1h"},
		{time.Hour + time.Second, "1h0m1s"},
		{3*time.Hour + 26*time.Minute, "3h26m"},
		{25 * time.Hour, "25h"},
	} {
		if got := shortDuration(c.d); got != c.want {
			t.Errorf("shortDuration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}
