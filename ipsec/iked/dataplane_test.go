package iked

import (
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
)

func TestForcedDataPlane(t *testing.T) {
	tun := func(plane string, enabled bool) config.Tunnel {
		t := config.NewTunnel("t" + plane)
		t.DataPlane, t.Enabled = plane, enabled
		return t
	}
	for _, c := range []struct {
		name    string
		tunnels []config.Tunnel
		want    string
	}{
		{"no tunnels", nil, ""},
		{"all auto", []config.Tunnel{tun("auto", true), tun("auto", true)}, ""},
		{"all userspace", []config.Tunnel{tun("userspace", true), tun("userspace", true)}, "userspace"},
		{"one auto", []config.Tunnel{tun("xfrm", true), tun("auto", true)}, ""},
		{"disagree", []config.Tunnel{tun("xfrm", true), tun("userspace", true)}, ""},
		{"disabled ones do not count", []config.Tunnel{tun("xfrm", true), tun("userspace", false)}, "xfrm"},
	} {
		if got := forcedDataPlane(&config.Config{Tunnels: c.tunnels}); got != c.want {
			t.Errorf("%s: forcedDataPlane = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestTunnelAsksForOtherDataPlane: iked runs one data plane; a tunnel that
// asks for the other is not started and says how to fix it.
func TestTunnelAsksForOtherDataPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	ns := testnet.NewNS(t, testnet.Prefix()+"-dp")
	d := startIked(t, ns)
	tun := config.NewTunnel("hq")
	tun.LocalAddress, tun.RemoteAddress = config.MustAddr("192.0.2.1"), config.MustAddr("192.0.2.77")
	tun.PSK = config.NewSecret(testPSK)
	tun.DataPlane = config.DataPlaneXFRM
	if err := d.Apply(&config.Config{Tunnels: []config.Tunnel{tun}}); err == nil {
		t.Errorf("Apply accepted a tunnel that asks for xfrm in a userspace daemon")
	}
	st := waitState(t, d, "hq", ipsec.StateFailed, time.Second)
	if !strings.Contains(st.Reason, "-dataplane xfrm") {
		t.Errorf("reason %q does not say how to get the xfrm data plane", st.Reason)
	}
	if err := d.Up("hq"); err == nil {
		t.Errorf("Up started a tunnel that cannot work")
	}
	if len(d.ep.SAs()) != 0 {
		t.Errorf("an IKE SA was started for it")
	}
}
