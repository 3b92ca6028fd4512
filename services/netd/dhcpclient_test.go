package netd

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/flashgate/flashgate/services/netd/netdapi"

	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"

	"github.com/flashgate/flashgate/internal/testnet"
)

// TestDHCPClientRenewAndLoss runs the client against netd's server with a
// 4 s lease: it must renew at T1 (2 s) and, once the server is gone,
// report the lease lost when it ends.
func TestDHCPClientRenewAndLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test: not in -short mode")
	}
	testnet.RequireRoot(t)
	p := testnet.Prefix()
	srvNS, cliNS := testnet.NewNS(t, p+"-ds"), testnet.NewNS(t, p+"-dc")
	testnet.Link(t, srvNS, "eth0", "10.77.0.1/24", cliNS, "eth0", "")

	srv, err := NewDHCPServer("eth0", netip.MustParsePrefix("10.77.0.1/24"))
	if err != nil {
		t.Fatal(err)
	}
	srv.LeaseTime = 4 * time.Second
	srvCtx, stopServer := context.WithCancel(context.Background())
	defer stopServer()
	served := make(chan error, 1)
	go func() { served <- do(srvNS, func() error { return srv.Serve(srvCtx) }) }()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan *netdapi.Lease, 8)
	c := &DHCPClient{Link: "eth0", OnLease: func(l *netdapi.Lease) { events <- l },
		Open: func(link string) (cl *nclient4.Client, err error) {
			err = do(cliNS, func() (err error) {
				cl, err = nclient4.New(link, nclient4.WithTimeout(time.Second), nclient4.WithRetry(2))
				return err
			})
			return cl, err
		}}
	go c.Run(ctx)

	next := func(within time.Duration) *netdapi.Lease {
		t.Helper()
		select {
		case l := <-events:
			return l
		case <-time.After(within):
			t.Fatalf("no lease event within %s", within)
			return nil
		}
	}
	first := next(10 * time.Second)
	if first == nil || first.Address != netip.MustParsePrefix("10.77.0.128/24") || first.Duration != 4*time.Second || first.Renew != 2*time.Second {
		t.Fatalf("first lease %+v, want 10.77.0.128/24 for 4s renewing at 2s", first)
	}
	// As the daemon would: the server answers a renewal to the leased
	// address, so the client must hold it.
	if err := cliNS.Run("ip", "addr", "add", "10.77.0.128/24", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	renewed := next(5 * time.Second)
	if renewed == nil || renewed.Address != first.Address || !renewed.Obtained.After(first.Obtained) {
		t.Fatalf("renewal %+v, want the same address obtained later than %s", renewed, first.Obtained)
	}
	if got := renewed.Obtained.Sub(first.Obtained); got < 1500*time.Millisecond || got > 3500*time.Millisecond {
		t.Errorf("renewed %s after the first lease, want about T1 = 2s", got)
	}

	stopServer()
	<-served
	lost := next(15 * time.Second)
	if lost != nil {
		t.Fatalf("after the server stopped: want the lease reported lost, got %+v", lost)
	}
	if late := time.Since(renewed.Expires()); late < 0 {
		t.Errorf("lease reported lost %s before it ended", -late)
	}
}
