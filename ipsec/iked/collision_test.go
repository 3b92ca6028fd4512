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

// What charon logs when it resolves a simultaneous rekey (RFC 7296 2.8.1
// and 2.8.2): all of them, and those of each kind.
var (
	charonCollisions      = regexp.MustCompile(`detected (CHILD_REKEY|IKE_REKEY) collision`)
	charonChildCollisions = regexp.MustCompile(`detected CHILD_REKEY collision`)
	charonIKECollisions   = regexp.MustCompile(`detected IKE_REKEY collision`)
)

var alreadyRekeying = regexp.MustCompile(`already being rekeyed|rekey in flight|no established IKE SA`)

// What vici answers when our rekey is replacing the IKE_SA at the instant
// its rekey command looks for it: none to rekey, so no collision either.
var charonNoneToRekey = regexp.MustCompile(`no matching SAs to rekey found`)

// TestSimultaneousRekey: we and strongSwan rekey the same CHILD_SA at the
// same instant, several times, then the same IKE_SA, while a TCP stream
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
		sas, err := charon.SAs()
		for _, sa := range sas {
			installed += sa.Installed("s2s-net")
		}
		return len(sas), installed, err
	}
	settled := func() bool {
		st := tunnelStatus(d, "s2s")
		if st.State != ipsec.StateUp || len(st.Children) != 1 || st.IKE == nil {
			return false
		}
		ikeSAs, installed, err := charonState()
		return err == nil && ikeSAs == 1 && installed == 1
	}
	// CHILD_SA rekeys, then IKE_SA rekeys. At least 12 rounds of each,
	// more (up to 36) until one collided.
	const minRounds, maxRounds = 12, 36
	rounds := 0
	for _, ikeSA := range []bool{false, true} {
		kind := charonChildCollisions
		if ikeSA {
			kind = charonIKECollisions
		}
		for round := 0; round < maxRounds && (round < minRounds || charonLogCount(t, charon, kind) == 0); round++ {
			rounds++
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
			// Where the two requests cross depends on the machine:
			// sweep ours from 1 ms before strongSwan's call to 4.5 ms
			// after it.
			delay := time.Duration(round%12)*500*time.Microsecond - time.Millisecond
			go func() {
				defer wg.Done()
				<-start
				time.Sleep(max(delay, 0))
				ours = d.Rekey("s2s", ikeSA)
			}()
			go func() {
				defer wg.Done()
				<-start
				time.Sleep(max(-delay, 0))
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
			// And strongSwan's may find its IKE_SA replaced by ours.
			if theirs != nil && charonNoneToRekey.MatchString(theirs.Error()) {
				theirs = nil
			}
			if ours != nil || theirs != nil {
				t.Fatalf("round %d (IKE %v): our rekey: %v; strongSwan's: %v", round, ikeSA, ours, theirs)
			}
			if !waitFor(5*time.Second, settled) {
				st := tunnelStatus(d, "s2s")
				ikeSAs, installed, err := charonState()
				for _, sa := range d.ep.SAs() {
					t.Logf("our IKE SA: %+v", sa.Status())
				}
				for _, e := range st.Events {
					t.Logf("event %s %s", e.Time.Format("15:04:05.000"), e.Message)
				}
				t.Logf("reason: %s", st.Reason)
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
	t.Logf("%d collisions in %d simultaneous rekeys (charon's log); %d bytes streamed", collisions, rounds, stream.received.Load())
	for _, kind := range []struct {
		name string
		re   *regexp.Regexp
	}{{"CHILD_SA", charonChildCollisions}, {"IKE_SA", charonIKECollisions}} {
		if charonLogCount(t, charon, kind.re) == 0 {
			t.Errorf("no %s rekey collided in %d tries: the test did not test those collisions (timing on this machine?)", kind.name, rounds)
		}
	}
	if streamErr != nil {
		t.Fatalf("the TCP stream across the simultaneous rekeys: %v", streamErr)
	}
	if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
		t.Fatalf("after the simultaneous rekeys: %v", err)
	}
}
