package iked

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/strongswan/govici/vici"
)

// charonSA is one IKE_SA at the strongSwan end, with every CHILD_SA it
// holds (rekeyed ones linger a few seconds as DELETED, under the same name).
type charonSA struct {
	Name, State string
	Children    []charonChild
}

type charonChild struct{ Name, State string }

// installed counts the SA's CHILD_SAs in state INSTALLED.
func (s charonSA) installed() int {
	n := 0
	for _, c := range s.Children {
		if c.State == "INSTALLED" {
			n++
		}
	}
	return n
}

// listCharonSAs lists charon's IKE_SAs over vici without losing any.
//
// govici's CallStreaming (and testnet's Charon.SAs, built on it) can drop
// them: its reader queues the list-sa events and the closing command
// response on two channels, and the caller selects on both, so when both
// are ready it may take the response first and end the stream with events
// unread. With one SA that reads as "no SA" in about 2% of calls on an idle
// machine, more under load: a CI run took it for our daemon having deleted
// its fresh IKE_SA. Here the events go to a subscriber channel instead: the
// reader fills it before it queues the response, so once Call returns every
// event is in it.
func listCharonSAs(c *testnet.Charon) ([]charonSA, error) {
	s, err := c.Session()
	if err != nil {
		return nil, fmt.Errorf("vici session: %w", err)
	}
	defer s.Close()
	if err := s.Subscribe("list-sa"); err != nil {
		return nil, fmt.Errorf("vici subscribe list-sa: %w", err)
	}
	// The reader drops events that do not fit: far more room than a
	// test's few SAs need.
	events := make(chan vici.Event, 1024)
	s.NotifyEvents(events)
	defer s.StopEvents(events)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Call(ctx, "list-sas", nil); err != nil {
		return nil, fmt.Errorf("vici list-sas: %w", err)
	}
	n := len(events)
	if n == cap(events) {
		return nil, fmt.Errorf("vici list-sas: %d or more SAs, more than the listing has room for", n)
	}
	var sas []charonSA
	for range n {
		sas = append(sas, parseListSA((<-events).Message)...)
	}
	return sas, nil
}

// parseListSA reads one list-sa event: its keys are IKE_SA names.
func parseListSA(m *vici.Message) []charonSA {
	var sas []charonSA
	for _, name := range m.Keys() {
		ike, ok := m.Get(name).(*vici.Message)
		if !ok {
			continue
		}
		sa := charonSA{Name: name}
		sa.State, _ = ike.Get("state").(string)
		if children, ok := ike.Get("child-sas").(*vici.Message); ok {
			for _, k := range children.Keys() {
				if ch, ok := children.Get(k).(*vici.Message); ok {
					n, _ := ch.Get("name").(string)
					st, _ := ch.Get("state").(string)
					sa.Children = append(sa.Children, charonChild{n, st})
				}
			}
		}
		sas = append(sas, sa)
	}
	return sas
}

// TestListCharonSAs: with one tunnel up, every listing of charon's SAs
// holds exactly that one IKE_SA. The tests count charon's SAs to decide
// whether we deleted or replaced one; a listing that sometimes comes back
// empty made TestMainProcess fail as if our daemon had.
func TestListCharonSAs(t *testing.T) {
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
	// CallStreaming lost the SA in 63 of 3000 listings here; 1000 make
	// a miss all but certain if the listing can still lose events, in
	// about 1 s.
	const listings = 1000
	deadline := time.Now().Add(20 * time.Second)
	counts := map[int]int{}
	for i := 0; i < listings && time.Now().Before(deadline); i++ {
		sas, err := listCharonSAs(charon)
		if err != nil {
			t.Fatal(err)
		}
		counts[len(sas)]++
		if len(sas) == 1 && (sas[0].State != "ESTABLISHED" || sas[0].installed() != 1) {
			t.Fatalf("listing %d: charon's SA is %+v, want ESTABLISHED with one INSTALLED CHILD_SA", i, sas[0])
		}
	}
	if len(counts) != 1 || counts[1] == 0 {
		t.Fatalf("charon holds one IKE_SA, but the listings counted (IKE_SAs: listings) %v", counts)
	}
	t.Logf("%d listings, each with the one IKE_SA", counts[1])
}
