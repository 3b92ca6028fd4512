package iked

import (
	"context"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/strongswan/govici/vici"
)

// What charon logs when it resolves a simultaneous rekey (RFC 7296 2.8.1).
var charonCollisions = regexp.MustCompile(`detected (CHILD_REKEY|IKE_REKEY) collision`)

var alreadyRekeying = regexp.MustCompile(`already being rekeyed|rekey in flight|no established IKE SA`)

// TestSimultaneousRekey: we and strongSwan rekey the same CHILD_SA (then
// the same IKE_SA) at the same instant, several times, while a TCP stream
// runs. Each collision must end with one SA per kind at both ends and the
// stream intact. Both rekeys are started over local sockets (our API, the
// vici socket) within microseconds, so most rounds collide on the wire.
func TestSimultaneousRekey(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	s := testnet.NewSiteToSite(t)
	charon := testnet.StartCharon(t, s.GwB, charonConn(s, lifecycleIKE, lifecycleESP, "none"))
	d := startIked(t, s.GwA, tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, lifecycleIKE, lifecycleESP, config.StartInitiate))
	waitState(t, d, "s2s", ipsec.StateUp, 10*time.Second)
	if err := charon.WaitChild("s2s-net", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	sess, err := charon.Session()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	stream, err := startStream(s, 5203, 4<<20)
	if err != nil {
		t.Fatal(err)
	}

	// strongSwan keeps rekeyed inbound CHILD_SAs a few seconds in state
	// DELETED (delete_rekeyed_delay): count the installed ones.
	charonState := func() (ikeSAs, installed int, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for m, err := range sess.CallStreaming(ctx, "list-sas", "list-sa", nil) {
			if err != nil {
				return 0, 0, err
			}
			for _, name := range m.Keys() {
				sa, ok := m.Get(name).(*vici.Message)
				if !ok {
					continue
				}
				ikeSAs++
				children, _ := sa.Get("child-sas").(*vici.Message)
				if children == nil {
					continue
				}
				for _, k := range children.Keys() {
					if c, ok := children.Get(k).(*vici.Message); ok && c.Get("state") == "INSTALLED" {
						installed++
					}
				}
			}
		}
		return ikeSAs, installed, nil
	}
	settled := func() bool {
		st := tunnelStatus(d, "s2s")
		if st.State != ipsec.StateUp || len(st.Children) != 1 || st.IKE == nil {
			return false
		}
		ikeSAs, installed, err := charonState()
		return err == nil && ikeSAs == 1 && installed == 1
	}
	const rounds = 6
	for _, ikeSA := range []bool{false, true} {
		for round := range rounds {
			msg := vici.NewMessage()
			if ikeSA {
				msg.Set("ike", "s2s")
			} else {
				msg.Set("child", "s2s-net")
			}
			var wg sync.WaitGroup
			var ours, theirs error
			start := make(chan struct{})
			wg.Add(2)
			// Ours waits a little longer each round: the vici path is
			// slower, and where the two cross depends on the machine.
			delay := time.Duration(round) * 700 * time.Microsecond
			go func() { defer wg.Done(); <-start; time.Sleep(delay); ours = d.Rekey("s2s", ikeSA) }()
			go func() {
				defer wg.Done()
				<-start
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, theirs = sess.Call(ctx, "rekey", msg)
			}()
			close(start)
			wg.Wait()
			// Ours may find the SA already replaced by strongSwan's
			// rekey: no collision that round, and no error either.
			if ours != nil && alreadyRekeying.MatchString(ours.Error()) {
				ours = nil
			}
			if ours != nil || theirs != nil {
				t.Fatalf("round %d (IKE %v): our rekey: %v; strongSwan's: %v", round, ikeSA, ours, theirs)
			}
			if !waitFor(5*time.Second, settled) {
				st := tunnelStatus(d, "s2s")
				ikeSAs, installed, err := charonState()
				t.Fatalf("round %d (IKE %v) did not settle to one SA each: ours %s %+v %+v; strongSwan %d IKE_SAs, %d CHILD_SAs installed (%v)",
					round, ikeSA, st.State, st.IKE, st.Children, ikeSAs, installed, err)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	// Let the old SAs' deletes finish before the stream ends.
	time.Sleep(time.Second)
	streamErr := stream.Stop(10 * time.Second)
	collisions := charonLogCount(t, charon, charonCollisions)
	if b, err := os.ReadFile(charon.Log); err == nil {
		for _, l := range regexp.MustCompile(`(?m)^.*collision.*$`).FindAll(b, -1) {
			t.Logf("charon: %s", l)
		}
	}
	t.Logf("%d collisions in %d simultaneous rekeys (charon's log); %d bytes streamed", collisions, 2*rounds, stream.received.Load())
	if collisions == 0 {
		t.Errorf("no rekey collided in %d tries: the test did not test collisions (timing on this machine?)", 2*rounds)
	}
	if streamErr != nil {
		t.Fatalf("the TCP stream across the simultaneous rekeys: %v", streamErr)
	}
	if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
		t.Fatalf("after the simultaneous rekeys: %v", err)
	}
}
