package iked

import (
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
)

// What charon logs (ike = 2) for each IKE_SA_INIT it is sent, and for a
// DELETE of an IKE_SA or CHILD_SA it receives.
var (
	charonGotInit   = regexp.MustCompile(`parsed IKE_SA_INIT request`)
	charonGotDelete = regexp.MustCompile(`parsed INFORMATIONAL request \d+ \[ D \]`)
)

// TestStartInitiatesOnce: a daemon that starts with a tunnel to initiate
// (or one to bring up on traffic, which the API's up calls below start)
// negotiates one IKE_SA and keeps it: exactly one IKE_SA_INIT reaches
// strongSwan, no DELETE follows, and the IKE_SA that came up is still the
// one after a few seconds, longer than the 1 s retry delay. Everything that
// starts initiations runs at once while the first is on the wire: the
// configuration applied twice, concurrently (a configuration file at start
// plus configd's "current" on connecting do that on the appliance), `up`
// requests from the API, and the daemon's timers. Before the tunnel marked
// its initiation as under way, an `up` that came between picking the
// tunnel and recording its new IKE_SA started a second IKE_SA.
func TestStartInitiatesOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	for _, start := range []string{config.StartInitiate, config.StartOnTraffic} {
		t.Run(start, func(t *testing.T) {
			s := testnet.NewSiteToSite(t)
			charon := testnet.StartCharon(t, s.GwB, charonConn(s, lifecycleIKE, lifecycleESP, "none"))
			cfg := &config.Config{Tunnels: []config.Tunnel{
				tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, lifecycleIKE, lifecycleESP, start)}}
			validTunnels(t, cfg.Tunnels...)
			again := *cfg
			again.Tunnels = []config.Tunnel{cfg.Tunnels[0]}
			d := startIked(t, s.GwA)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				deadline := time.Now().Add(300 * time.Millisecond)
				for i := 0; i < 100000 && time.Now().Before(deadline); i++ {
					d.Up("s2s") // "no tunnel" until an Apply added it
				}
			}()
			for _, c := range []*config.Config{cfg, &again} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := d.Apply(c); err != nil {
						t.Errorf("Apply: %v", err)
					}
				}()
			}
			wg.Wait()
			first := waitState(t, d, "s2s", ipsec.StateUp, 10*time.Second)
			if first.IKE == nil {
				t.Fatalf("tunnel up without an IKE_SA: %+v", first)
			}

			time.Sleep(3 * time.Second)
			if n := charonLogCount(t, charon, charonGotInit); n != 1 {
				t.Errorf("strongSwan received %d IKE_SA_INIT requests, want 1", n)
			}
			if n := charonLogCount(t, charon, charonGotDelete); n != 0 {
				t.Errorf("strongSwan received %d DELETEs within 3 s of the tunnel coming up, want none", n)
			}
			sas, err := charon.SAs()
			if err != nil {
				t.Fatal(err)
			}
			if len(sas) != 1 || sas[0].State != "ESTABLISHED" || sas[0].Installed("s2s-net") != 1 {
				t.Errorf("strongSwan holds %+v, want one ESTABLISHED IKE_SA with one INSTALLED CHILD_SA", sas)
			}
			now := tunnelStatus(d, "s2s")
			if now.State != ipsec.StateUp || now.IKE == nil || now.IKE.InitiatorSPI != first.IKE.InitiatorSPI {
				t.Errorf("3 s after coming up the tunnel is %s with IKE_SA %+v, want still up on %s_i", now.State, now.IKE, first.IKE.InitiatorSPI)
			}
			ups := 0
			for _, e := range now.Events {
				if strings.HasPrefix(e.Message, "IKE_SA up") {
					ups++
				}
			}
			if ups != 1 || t.Failed() {
				for _, e := range now.Events {
					t.Logf("event %s %s", e.Time.Format("15:04:05.000"), e.Message)
				}
			}
			if ups != 1 {
				t.Errorf("%d IKE_SAs came up, want 1", ups)
			}
		})
	}
}
