package iked

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
)

// TestUpInitiatesRespondTunnelOnce: `flashgate ipsec up` on a tunnel with
// start action respond initiates it once, as swanctl --initiate does for
// any connection. Against strongSwan: left alone the tunnel sends nothing;
// an up that fails (strongSwan accepts none of our proposals) puts it back
// to waiting for the peer and is not retried; an up with a peer that
// accepts brings it up, exactly one IKE_SA_INIT; down deletes it and it
// stays down (no re-initiation), yet still answers the peer.
func TestUpInitiatesRespondTunnelOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	s := testnet.NewSiteToSite(t)
	ours := tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, lifecycleIKE, lifecycleESP, config.StartRespond)
	validTunnels(t, ours)

	// A peer that refuses our proposals: the up fails at IKE_SA_INIT.
	refusing := testnet.StartCharon(t, s.GwB, charonConn(s, "aes256-sha256-modp2048", "aes256-sha256", "none"))
	d := startIked(t, s.GwA, ours)
	time.Sleep(1500 * time.Millisecond)
	if n := charonLogCount(t, refusing, charonGotInit); n != 0 {
		t.Fatalf("a respond tunnel sent %d IKE_SA_INITs before anyone asked it up, want 0", n)
	}
	if st := tunnelStatus(d, "s2s"); st.State != ipsec.StateDown || st.Reason != waitingForPeer {
		t.Fatalf("before up: %s %q, want %s %q", st.State, st.Reason, ipsec.StateDown, waitingForPeer)
	}
	if err := d.Up("s2s"); err != nil {
		t.Fatalf("up: %v", err)
	}
	waitEvent(t, d, "s2s", "up failed", 10*time.Second)
	st := tunnelStatus(d, "s2s")
	t.Logf("after the failed up: %s: %s", st.State, st.Reason)
	if st.State != ipsec.StateDown || !strings.HasPrefix(st.Reason, waitingForPeer+"; up failed: ") {
		t.Errorf("after the failed up: %s %q, want %s %q followed by why the up failed", st.State, st.Reason, ipsec.StateDown, waitingForPeer)
	}
	// Longer than the 1 s and 2 s retry delays of start action initiate.
	time.Sleep(4 * time.Second)
	if n := charonLogCount(t, refusing, charonGotInit); n != 1 {
		t.Errorf("strongSwan received %d IKE_SA_INITs for one failed up, want 1 (no retries)", n)
	}
	if st := tunnelStatus(d, "s2s"); st.State != ipsec.StateDown || st.IKE != nil {
		t.Errorf("4 s after the failed up: %s %q, IKE_SA %+v; want down, waiting, no IKE_SA", st.State, st.Reason, st.IKE)
	}
	refusing.Stop()

	// A peer that accepts: one up, one IKE_SA_INIT, traffic flows.
	charon := testnet.StartCharon(t, s.GwB, charonConn(s, lifecycleIKE, lifecycleESP, "none"))
	for range 3 { // repeated ups while the first is on the wire start nothing more
		if err := d.Up("s2s"); err != nil {
			t.Fatalf("up: %v", err)
		}
	}
	up := waitState(t, d, "s2s", ipsec.StateUp, 10*time.Second)
	if up.IKE == nil {
		t.Fatalf("tunnel up without an IKE_SA: %+v", up)
	}
	if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
		t.Fatalf("through the tunnel the up brought up: %v", err)
	}
	if n := charonLogCount(t, charon, charonGotInit); n != 1 {
		t.Errorf("strongSwan received %d IKE_SA_INITs for the up, want 1", n)
	}

	// Down: the SAs go at both ends and the tunnel waits for the peer.
	if err := d.Down("s2s"); err != nil {
		t.Fatalf("down: %v", err)
	}
	if !waitFor(5*time.Second, func() bool {
		sas, err := charon.SAs()
		return err == nil && len(sas) == 0 && tunnelStatus(d, "s2s").IKE == nil
	}) {
		t.Fatalf("after down: ours %+v; strongSwan still holds SAs", tunnelStatus(d, "s2s"))
	}
	time.Sleep(3 * time.Second)
	st = tunnelStatus(d, "s2s")
	if st.State != ipsec.StateDown || !strings.HasPrefix(st.Reason, waitingForPeer) {
		t.Errorf("3 s after down: %s %q, want %s %q", st.State, st.Reason, ipsec.StateDown, waitingForPeer)
	}
	if n := charonLogCount(t, charon, charonGotInit); n != 1 {
		t.Errorf("strongSwan received %d IKE_SA_INITs after the down, want still 1 (a respond tunnel does not come back by itself)", n)
	}
	// It still answers the peer.
	if err := charon.Initiate("s2s-net"); err != nil {
		t.Fatal(err)
	}
	waitState(t, d, "s2s", ipsec.StateUp, 5*time.Second)
	if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
		t.Fatalf("after strongSwan initiated: %v", err)
	}
}

// TestUpAPI: the API's up answers 202 for a tunnel it initiates, 404 for
// a name that is no tunnel, and 409 for a respond tunnel without a remote
// address, which nothing can initiate.
func TestUpAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	ns := testnet.NewNS(t, testnet.Prefix()+"-up")
	anyPeer := config.NewTunnel("roadwarrior")
	anyPeer.LocalAddress = config.MustAddr("192.0.2.1")
	anyPeer.PSK = config.NewSecret(testPSK)
	anyPeer.StartAction = config.StartRespond
	anyPeer.LocalSubnets = []config.Prefix{config.MustPrefix("10.1.0.0/24")}
	anyPeer.RemoteSubnets = []config.Prefix{config.MustPrefix("10.2.0.0/24")}
	validTunnels(t, anyPeer)
	d := startIked(t, ns, anyPeer)
	h := d.Handler()
	for _, tc := range []struct {
		name string
		want int
	}{
		{"roadwarrior", http.StatusConflict},
		{"nosuch", http.StatusNotFound},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/tunnels/"+tc.name+"/up", nil))
		if rec.Code != tc.want {
			t.Errorf("POST /v1/tunnels/%s/up: %d %s, want %d", tc.name, rec.Code, rec.Body, tc.want)
		}
	}
	if len(d.ep.SAs()) != 0 {
		t.Errorf("an up of a tunnel without a remote address started an IKE SA")
	}
	if st := tunnelStatus(d, "roadwarrior"); st.State != ipsec.StateDown || st.Reason != waitingForPeer {
		t.Errorf("after the refused up: %s %q, want %s %q", st.State, st.Reason, ipsec.StateDown, waitingForPeer)
	}
}
