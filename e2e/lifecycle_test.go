package e2e

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flashgate/flashgate/images/imagestest"
	"github.com/flashgate/flashgate/internal/testnet"
)

// TestApplianceLifecycle walks one appliance through the VM checks of
// issues 3, 8 and 9 on one chain of boots of one card, since every boot
// under software emulation costs tens of seconds on a shared machine:
//
//   - console (9): first-boot password, login on the serial port, a tunnel
//     added with set, committed, shown by show tunnels;
//   - firewall (8): from a namespace on the WAN switch, only IKE from the
//     tunnel's peer is answered; TCP 22/80/443 and ICMP echo are dropped;
//     the LAN host reaches the web UI;
//   - commit confirmed 1 without confirm (9), whose minute runs while the
//     supervisor is checked: a killed service restarted and counted (3);
//   - the unconfirmed commit rolled back by itself (9);
//   - stopping the watchdog's petting resets the VM (3);
//   - reboot back to a login prompt, configuration intact (3);
//   - poweroff: qemu exits 0 (3).
//
// A failed step ends the walk (the later ones depend on the console being
// where the step left it); the serial log is printed on failure.
func TestApplianceLifecycle(t *testing.T) {
	image := cardImage(t)
	testnet.RequireRoot(t)
	testnet.RequireTool(t, "ping", "iputils-ping")
	lab := NewLab(t)
	probe := newWANProbe(t, lab)
	wan := netip.PrefixFrom(wanA, 24)

	start := time.Now()
	a := NewAppliance(t, lab, "A", image, "brlana", lab.HostA)
	// The whole serial log stays beside the image, pass or fail.
	logFile := filepath.Join(filepath.Dir(image), t.Name()+".log")
	t.Cleanup(func() { os.WriteFile(logFile, []byte(a.Log()), 0o644) })
	s := imagestest.NewSerial(t, a.VM)
	s.Expect(4*time.Minute, "flashgate init: pid 1, version e2e")
	s.Expect(time.Minute, "flashgate init: board qemu")
	s.Login(adminPassword, true)
	t.Logf("qemu start to a logged-in CLI on first boot: %.1f s", time.Since(start).Seconds())
	api := NewAPI(lab.HostA, firstBootLAN.String())
	if err := api.WaitLogin("admin", adminPassword, 90*time.Second); err != nil {
		t.Fatal(err)
	}

	var committed time.Time
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"console-set-commit-show", func(t *testing.T) { checkConsoleTunnel(t, s) }},
		{"firewall-wan-defaults", func(t *testing.T) {
			setWANAddress(t, api, wan)
			checkWANDefaults(t, lab, probe, api, wan.Addr())
		}},
		{"commit-confirmed-start", func(t *testing.T) { committed = startUnconfirmedCommit(t, s) }},
		{"service-restart-counted", func(t *testing.T) { checkServiceRestart(t, s, api) }},
		{"commit-confirmed-rolls-back", func(t *testing.T) { checkRolledBack(t, s, committed) }},
		{"watchdog-reset", func(t *testing.T) { checkWatchdogReset(t, s) }},
		{"reboot-to-login", func(t *testing.T) { checkRebootToLogin(t, s) }},
		{"poweroff-exits-0", func(t *testing.T) { checkPoweroff(t, s) }},
	}
	for _, st := range steps {
		stepStart := time.Now()
		ok := t.Run(st.name, func(t *testing.T) {
			// Failures must end the subtest, not its parent: the console
			// helpers report to the step's t.
			s.TB = t
			st.run(t)
		})
		s.TB = t
		t.Logf("%s: %.1f s", st.name, time.Since(stepStart).Seconds())
		if !ok {
			t.Fatalf("step %s failed; the steps after it depend on it and were not run", st.name)
		}
	}
}
