package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/iked"
	"github.com/flashgate/flashgate/ipsec/iked/ikedns"
	"github.com/strongswan/govici/vici"
)

const setupProposal = "aes128gcm16-prfsha256-ecp256"

// upWatcher turns iked's StateChanged hook into a channel per tunnel.
type upWatcher struct {
	mu sync.Mutex
	up map[string]chan struct{}
}

func (w *upWatcher) expect(name string) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := make(chan struct{})
	w.up[name] = c
	return c
}

func (w *upWatcher) changed(name string, s ipsec.TunnelState) {
	if s != ipsec.StateUp {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.up[name]; ok {
		close(c)
		delete(w.up, name)
	}
}

// startIkedWatched starts an initiating iked on gwA with no tunnels yet;
// tunnels come with Apply.
func startIkedWatched(b *testing.B, ns *testnet.NS) (*iked.Daemon, *upWatcher) {
	w := &upWatcher{up: map[string]chan struct{}{}}
	d := ikedns.Start(b, ns, iked.Options{StateChanged: w.changed, TickInterval: 10 * time.Millisecond}, nil)
	return d, w
}

// BenchmarkIKESetup: IKE_SA + first CHILD_SA with PSK and ecp256, one after
// another, measured from the initiator's request to its CHILD_SA being
// installed. flashgate: iked to iked (userspace ESP install included);
// strongswan: charon to charon over vici's initiate (kernel-libipsec
// install included).
func BenchmarkIKESetup(b *testing.B) {
	b.Run("flashgate", func(b *testing.B) {
		s := testnet.NewSiteToSite(b)
		p := tunnelPair{ike: setupProposal, esp: "aes128gcm16"}
		startIked(b, s.GwB, p.tunnel(s.GwBWAN, s.GwAWAN, "gwB", "gwA", s.LANB, s.LANA, config.StartRespond))
		a, w := startIkedWatched(b, s.GwA)
		var total time.Duration
		for i := 0; i < b.N; i++ {
			t := p.tunnel(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, config.StartInitiate)
			t.Name = fmt.Sprintf("t%d", i)
			up := w.expect(t.Name)
			start := time.Now()
			// Apply removes the previous tunnel (deleting its SA) and
			// initiates the new one at once.
			if err := a.Apply(&config.Config{Tunnels: []config.Tunnel{t}}); err != nil {
				b.Fatal(err)
			}
			select {
			case <-up:
			case <-time.After(10 * time.Second):
				b.Fatalf("setup %d: not up after 10 s: %+v", i, a.Status())
			}
			total += time.Since(start)
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/setup")
		b.ReportMetric(0, "ns/op")
	})
	b.Run("strongswan", func(b *testing.B) {
		s, a := charonPair(b)
		sess, err := a.Session()
		if err != nil {
			b.Fatal(err)
		}
		defer sess.Close()
		var total time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			if err := charonInitiate(sess); err != nil {
				b.Fatalf("setup %d: %v", i, err)
			}
			total += time.Since(start)
			charonTerminate(sess)
		}
		_ = s
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/setup")
		b.ReportMetric(0, "ns/op")
	})
}

// BenchmarkIKESetupRate: many setups at once (8 parallel initiators for
// strongSwan, as in interop.md; flashgate initiates every configured tunnel
// at once), reported as SAs per second.
func BenchmarkIKESetupRate(b *testing.B) {
	const n = 200
	b.Run("flashgate", func(b *testing.B) {
		s := testnet.NewSiteToSite(b)
		p := tunnelPair{ike: setupProposal, esp: "aes128gcm16"}
		startIked(b, s.GwB, p.tunnel(s.GwBWAN, s.GwAWAN, "gwB", "gwA", s.LANB, s.LANA, config.StartRespond))
		a, w := startIkedWatched(b, s.GwA)
		var rate float64
		for i := 0; i < b.N; i++ {
			var tunnels []config.Tunnel
			var ups []chan struct{}
			for j := 0; j < n; j++ {
				t := p.tunnel(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, config.StartInitiate)
				t.Name = fmt.Sprintf("r%d-%d", i, j)
				tunnels = append(tunnels, t)
				ups = append(ups, w.expect(t.Name))
			}
			start := time.Now()
			if err := a.Apply(&config.Config{Tunnels: tunnels}); err != nil {
				b.Fatal(err)
			}
			deadline := time.After(60 * time.Second)
			for j, up := range ups {
				select {
				case <-up:
				case <-deadline:
					b.Fatalf("round %d: only %d of %d tunnels up after 60 s", i, j, n)
				}
			}
			rate += n / time.Since(start).Seconds()
			a.Apply(&config.Config{}) // delete them all before the next round
			time.Sleep(500 * time.Millisecond)
		}
		b.ReportMetric(rate/float64(b.N), "SAs/s")
		b.ReportMetric(0, "ns/op")
	})
	b.Run("strongswan", func(b *testing.B) {
		_, a := charonPair(b)
		var rate float64
		for i := 0; i < b.N; i++ {
			var done atomic.Int64
			var errMu sync.Mutex
			var firstErr error
			fail := func(err error) {
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errMu.Unlock()
			}
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sess, err := dialCharon(a)
					if err != nil {
						fail(err)
						return
					}
					defer sess.Close()
					for done.Add(1) <= n {
						if err := charonInitiate(sess); err != nil {
							fail(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if firstErr != nil {
				b.Fatal(firstErr)
			}
			rate += n / time.Since(start).Seconds()
			sess, err := a.Session()
			if err == nil {
				charonTerminate(sess)
				sess.Close()
			}
			time.Sleep(500 * time.Millisecond)
		}
		b.ReportMetric(rate/float64(b.N), "SAs/s")
		b.ReportMetric(0, "ns/op")
	})
}

// charonPair starts strongSwan on both gateways; gwA initiates.
func charonPair(b *testing.B) (*testnet.SiteToSite, *testnet.Charon) {
	s := testnet.NewSiteToSite(b)
	conn := testnet.CharonConn{Name: "s2s", LocalAddr: s.GwAWAN, RemoteAddr: s.GwBWAN, LocalID: "gwA", RemoteID: "gwB",
		PSK: benchPSK, Proposals: setupProposal, ESPProposals: "aes128gcm16", LocalTS: s.LANANets(), RemoteTS: s.LANBNets()}
	a := testnet.StartCharon(b, s.GwA, conn)
	peer := conn
	peer.LocalAddr, peer.RemoteAddr, peer.LocalID, peer.RemoteID = s.GwBWAN, s.GwAWAN, "gwB", "gwA"
	peer.LocalTS, peer.RemoteTS = s.LANBNets(), s.LANANets()
	testnet.StartCharon(b, s.GwB, peer)
	return s, a
}

// dialCharon opens a vici session, retrying while charon's listen backlog
// is full (8 initiators connect at once).
func dialCharon(c *testnet.Charon) (*vici.Session, error) {
	var err error
	for try := 0; try < 50; try++ {
		var s *vici.Session
		if s, err = c.Session(); err == nil {
			return s, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, err
}

// charonInitiate asks charon for a new IKE_SA with its CHILD_SA and waits
// for the result (vici's initiate blocks until then).
func charonInitiate(sess *vici.Session) error {
	m := vici.NewMessage()
	m.Set("child", "s2s-net")
	m.Set("timeout", "10000")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := sess.Call(ctx, "initiate", m)
	if err != nil {
		return fmt.Errorf("vici initiate: %w", err)
	}
	if r.Get("success") != "yes" {
		return fmt.Errorf("vici initiate: %v", r.Get("errmsg"))
	}
	return nil
}

// charonTerminate deletes every IKE_SA of the connection.
func charonTerminate(sess *vici.Session) {
	m := vici.NewMessage()
	m.Set("ike", "s2s")
	m.Set("timeout", "-1") // do not wait for the DELETE to be answered
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	sess.Call(ctx, "terminate", m)
}
