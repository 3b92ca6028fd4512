package e2e

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/testnet"
)

// TestApplianceIKEv1StrongSwan: the appliance, with kernel IPsec (XFRM),
// runs an IKEv1 tunnel (ike_version 1, set through the API) to a
// strongSwan site speaking IKEv1 (version = 1); strongSwan initiates,
// traffic passes through the appliance's kernel ESP, and survives a
// phase 2 rekey by strongSwan.
func TestApplianceIKEv1StrongSwan(t *testing.T) {
	if testing.Short() {
		t.Skip("boots an appliance in qemu")
	}
	testnet.RequireRoot(t)
	image := buildImage(t)
	lab := NewLab(t)
	a := NewAppliance(t, lab, "A", image, "brlana", lab.HostA)
	a.WaitLogin(t, adminPassword, true)
	api := NewAPI(lab.HostA, firstBootLAN.String())
	if err := api.WaitLogin("admin", adminPassword, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	configure(t, api, site{
		wan: wanA, lan: netip.MustParsePrefix("10.10.1.1/24"),
		tunnels: map[string]map[string]any{
			"to-c": {
				"local_address": wanA.String(), "remote_address": wanC.String(),
				"local_id": "a.example", "remote_id": "c.example", "psk": pskAC,
				"local_subnets": []string{lanA.String()}, "remote_subnets": []string{lanC.String()},
				"ike_proposals": []string{"aes128-sha256-modp2048"}, "esp_proposals": []string{"aes128-sha256"},
				"start_action": "respond", "ike_version": "1",
			},
		},
		routed: routedA, peerRouted: routedB, peerWAN: wanB,
	})
	charon := testnet.StartCharon(t, lab.GwC, testnet.CharonConn{
		Name: "to-a", Version: 1, LocalAddr: wanC, RemoteAddr: wanA, LocalID: "c.example", RemoteID: "a.example",
		PSK: pskAC, Proposals: "aes128-sha256-modp2048", ESPProposals: "aes128-sha256",
		LocalTS: []netip.Prefix{lanC}, RemoteTS: []netip.Prefix{lanA},
	})
	if err := charon.Initiate("to-a-net"); err != nil {
		t.Fatalf("strongSwan (IKEv1) could not bring the tunnel up: %v\n%s", err, diagnose(api))
	}
	st := waitUp(t, a, api, time.Minute, "to-c")["to-c"]
	if st.Status.DataPlane != "xfrm" {
		t.Errorf("the IKEv1 tunnel uses data plane %q, want xfrm", st.Status.DataPlane)
	}
	if err := testnet.Ping(lab.HostA, hostC, 3); err != nil {
		t.Fatalf("hostA -> hostC through the IKEv1 tunnel and the appliance's kernel ESP: %v", err)
	}
	if out, err := charon.Swanctl("--rekey", "--child", "to-a-net"); err != nil {
		t.Fatalf("strongSwan's phase 2 rekey: %v: %s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		rekeyed := false
		for _, e := range tunnels(t, api)["to-c"].Status.Events {
			rekeyed = rekeyed || strings.Contains(e.Message, "CHILD_SA rekeyed")
		}
		if rekeyed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no phase 2 rekey seen on the appliance: %+v", tunnels(t, api)["to-c"])
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := testnet.Ping(lab.HostA, hostC, 3); err != nil {
		t.Fatalf("after strongSwan's phase 2 rekey, hostA -> hostC: %v", err)
	}
}
