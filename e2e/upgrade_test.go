package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/images"
	"github.com/flashgate/flashgate/upgrade/imagefile"
	"github.com/flashgate/flashgate/upgrade/remote"
)

// upgradeLab is one appliance in qemu on a signed card made from the e2e
// image's firmware, with upgrade files derived from the same firmware: a
// later version (the same kernel and initramfs with another version
// stamped in) and broken ones.
type upgradeLab struct {
	dir   string
	key   ed25519.PrivateKey
	base  imagefile.Slot // the e2e image's slot a
	card  string
	vm    *images.VM // the current boot
	port  int
	box   *remote.Box
	logs  []byte
	board boards.Board
	// net, if set, is the lab network the box's ports are plugged into
	// (see upgradeNet); without it the box is on qemu's user network
	// with only the web UI forwarded (the power-cut benchmark).
	net *upgradeNet
	tb  testing.TB
}

const upgradePassword = "upgrade-e2e-pw-1"

// upgradeVMLimit bounds the life of the one qemu a scenario boots: TestUpgrade
// takes its box through five upgrades (guest reboots stay in one qemu).
const upgradeVMLimit = 25 * time.Minute

// newUpgradeLab boots the upgrade card with its WAN and LAN ports on a lab
// network, next to a strongSwan site to make a tunnel with.
func newUpgradeLab(t testing.TB) *upgradeLab {
	t.Helper()
	l := prepareUpgradeCard(t)
	l.net, l.tb = newUpgradeNet(t), t
	if err := l.boot(true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.stop()
		if t.Failed() {
			log := l.vm.Log()
			if len(log) > 20000 {
				log = log[len(log)-20000:]
			}
			t.Logf("serial console (end):\n%s", log)
		}
	})
	return l
}

// prepareUpgradeCard makes the signed card from the e2e image's firmware.
func prepareUpgradeCard(t testing.TB) *upgradeLab {
	t.Helper()
	img := cardImage(t)
	l := &upgradeLab{dir: t.TempDir()}
	var err error
	if l.board, err = boards.Lookup("qemu"); err != nil {
		t.Fatal(err)
	}
	if l.base, err = images.ExtractSlot(img, "a", l.dir); err != nil {
		t.Fatal(err)
	}
	l.key, _ = imagefile.GenerateKey()
	l.card = filepath.Join(l.dir, "card.img")
	work := filepath.Join(l.dir, "work")
	os.MkdirAll(work, 0o755)
	if _, _, err := images.MakeCard(context.Background(), images.CardSpec{
		Board: l.board, Version: l.base.Version, Epoch: time.Unix(l.base.Built, 0),
		Kernel: l.base.Kernel, Initrd: l.base.Initrd, Key: l.key,
		Image: l.card, UpgradeFile: filepath.Join(l.dir, "v1.fgup"), Work: work}); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *upgradeLab) stop() {
	if l.vm != nil {
		l.logs = append(l.logs, l.vm.Log()...)
		l.vm.Stop()
	}
}

// boot starts qemu on the card and logs in over the API; on a new card it
// first sets the admin password at the console.
func (l *upgradeLab) boot(firstBoot bool) error {
	if l.net != nil {
		// The web UI is reached through the loopback forward to the
		// box's LAN address, dialled from the host on its LAN.
		l.port = l.net.port
		if err := l.net.start(l); err != nil {
			return err
		}
	} else {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		l.port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if l.vm, err = images.StartVM(images.QEMUConfig{Board: l.board, Image: l.card, WebUIPort: l.port}, upgradeVMLimit); err != nil {
			return err
		}
	}
	var err error
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if firstBoot {
		at := 0
		for _, s := range []struct{ prompt, answer string }{
			{"New admin password: ", upgradePassword + "\r"}, {"Repeat password: ", upgradePassword + "\r"},
		} {
			if at, _, err = l.vm.WaitFor(ctx, at, s.prompt); err != nil {
				return fmt.Errorf("first-boot password: %w", err)
			}
			l.vm.Type(s.answer)
		}
	}
	url := "https://127.0.0.1:" + itoa(l.port)
	// The test trusts the certificate it first sees, as an admin does who
	// copies the fingerprint from the console; from then on it is pinned.
	if l.box == nil {
		var fp string
		for deadline := time.Now().Add(3 * time.Minute); fp == "" && time.Now().Before(deadline); time.Sleep(time.Second) {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", "127.0.0.1:"+itoa(l.port), &tls.Config{InsecureSkipVerify: true})
			if err != nil {
				continue
			}
			sum := sha256.Sum256(c.ConnectionState().PeerCertificates[0].Raw)
			fp = hex.EncodeToString(sum[:])
			c.Close()
		}
		if fp == "" {
			return fmt.Errorf("the web UI never answered")
		}
		l.box = &remote.Box{Fingerprint: fp, User: "admin", Password: upgradePassword}
	}
	// A new connection each boot: the port and the session are new.
	l.box = &remote.Box{URL: url, Fingerprint: l.box.Fingerprint, User: "admin", Password: upgradePassword}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(2 * time.Second) {
		err := l.box.Login(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("log in: %w", err)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// variant writes an upgrade file of the base firmware with version stamped
// into its initramfs and extra files appended (broken ones replace /init
// or the services' binary).
func (l *upgradeLab) variant(t testing.TB, version string, built int64, key ed25519.PrivateKey, board string, extra map[string][]byte) string {
	t.Helper()
	s := l.base
	s.Version, s.Built, s.Board = version, built, board
	s.Initrd = filepath.Join(l.dir, "initrd-"+version)
	b, err := os.ReadFile(l.base.Initrd)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(s.Initrd, b, 0o644)
	files := map[string][]byte{images.VersionFile: []byte(version + "\n")}
	modes := map[string]os.FileMode{}
	for k, v := range extra {
		files[k], modes[k] = v, 0o755
	}
	if err := images.AppendToInitramfs(s.Initrd, files, modes); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(l.dir, version+".fgup")
	if _, err := images.WriteUpgradeFile(p, s, key); err != nil {
		t.Fatal(err)
	}
	return p
}

// bootPartition is p1's bytes, to show a refused upload wrote nothing.
func (l *upgradeLab) bootPartition(t testing.TB) []byte {
	b, err := os.ReadFile(l.card)
	if err != nil {
		t.Fatal(err)
	}
	return b[1<<20 : len(b)-4<<20]
}

func (l *upgradeLab) settings(t testing.TB) string {
	t.Helper()
	var out []string
	paths := []string{"/api/v1/system", "/api/v1/interfaces", "/api/v1/firewall"}
	if l.net != nil {
		paths = append(paths, "/api/v1/tunnels/"+upgradeTunnel)
	}
	for _, p := range paths {
		var v any
		if err := l.box.Get(context.Background(), p, &v); err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		if m, ok := v.(map[string]any); ok {
			switch p {
			case "/api/v1/system":
				v = m["settings"] // not the clock or the firmware version
			case "/api/v1/interfaces":
				// The configured ports, not their links' counters.
				var cfgs []any
				rows, _ := m["configured"].([]any)
				for _, r := range rows {
					if row, ok := r.(map[string]any); ok {
						cfgs = append(cfgs, row["config"])
					}
				}
				v = cfgs
			case "/api/v1/tunnels/" + upgradeTunnel:
				v = m["config"] // not its live state
			}
		}
		b, _ := json.Marshal(v)
		out = append(out, string(b))
	}
	return strings.Join(out, "\n")
}

// TestUpgrade takes one box through the whole life of upgrades in qemu, on
// the e2e lab's network with a tunnel to a strongSwan site (upgradeNet):
// files it must refuse (another key, another board, truncated) leave the
// boot partition untouched; v2 is written, test-booted and committed, and
// runs with the configuration unchanged, the WAN lease back and the tunnel
// back by itself, passing traffic (upgrade.tunnel_after_webui_s: from v2's
// web UI answering to the tunnel passing traffic); an image whose services
// never come up, one whose kernel cannot start its init (a panic) and one
// whose PID 1 starts and exits each bring the box back to v2 by itself,
// with the reason, and the tunnel comes back again.
func TestUpgrade(t *testing.T) {
	l := newUpgradeLab(t)
	ctx := context.Background()
	v1 := l.base.Version

	// A setting of the user's, to find again after every boot.
	var sys map[string]any
	if err := l.box.Get(ctx, "/api/v1/system", &sys); err != nil {
		t.Fatal(err)
	}
	settings, _ := sys["settings"].(map[string]any)
	if settings == nil {
		t.Fatalf("GET /api/v1/system: no settings in %v", sys)
	}
	settings["hostname"] = "branch-7"
	if err := l.box.Put(ctx, "/api/v1/system", settings); err != nil {
		t.Fatal(err)
	}
	if err := l.box.Post(ctx, "/api/v1/commit", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	// A tunnel to a strongSwan site, passing traffic.
	committed := time.Now()
	l.net.configureTunnel(t, l.box)
	if _, err := l.net.waitTunnelPasses(3 * time.Minute); err != nil {
		t.Fatalf("before the upgrade: %v\nthe box says: %s", err, tunnelState(l.box))
	}
	t.Logf("tunnel box-strongSwan passing traffic (hostC -> hostA) %.1f s after its commit", time.Since(committed).Seconds())
	before := l.settings(t)

	other, _ := imagefile.GenerateKey()
	p1 := l.bootPartition(t)
	refusals := []struct {
		name, file, says string
	}{
		{"another key", l.variant(t, v1+"-x", l.base.Built+50, other, "qemu", nil), "this box trusts"},
		{"unsigned", l.variant(t, v1+"-u", l.base.Built+50, nil, "qemu", nil), "accepts only images signed by"},
		{"another board", l.variant(t, v1+"-b", l.base.Built+50, l.key, "alix2d13", nil), "for alix2d13, this box is qemu"},
	}
	good := l.variant(t, v1+"-v2", l.base.Built+100, l.key, "qemu", nil)
	whole, _ := os.ReadFile(good)
	trunc := filepath.Join(l.dir, "truncated.fgup")
	os.WriteFile(trunc, whole[:len(whole)/3], 0o644)
	refusals = append(refusals, struct{ name, file, says string }{"truncated", trunc, "truncated"})
	for _, r := range refusals {
		if _, err := l.box.Upload(ctx, r.file, false, true, nil); err == nil || !strings.Contains(err.Error(), r.says) {
			t.Errorf("%s: %v, want a refusal saying %q", r.name, err, r.says)
		}
	}
	if !bytes.Equal(p1, l.bootPartition(t)) {
		t.Fatal("a refused upload wrote to the boot partition")
	}

	// v1 -> v2, with the tunnel up. Once v2's PID 1 has started, the web
	// UI and the tunnel are watched side by side from the lab's hosts
	// (cheap probes: a TCP connect and an unauthenticated GET, one ping
	// at a time), and nobody touches the tunnel at either end.
	start := time.Now()
	at := len(l.vm.Log())
	if _, err := l.box.Upload(ctx, good, false, true, nil); err != nil {
		t.Fatal(err)
	}
	uploaded := time.Now()
	bootCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	_, _, err := l.vm.WaitFor(bootCtx, at, "flashgate init: pid 1")
	cancel()
	if err != nil {
		t.Fatalf("the box did not start v2's test boot: %v", err)
	}
	pid1 := time.Now()
	var webUI, tunnelBack time.Time
	var webErr, tunnelErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); webUI, webErr = l.net.waitWebUI(4 * time.Minute) }()
	go func() { defer wg.Done(); tunnelBack, tunnelErr = l.net.waitTunnelPasses(4 * time.Minute) }()
	wg.Wait()
	if webErr != nil {
		t.Errorf("v2's test boot: %v", webErr)
	}
	if tunnelErr != nil {
		t.Errorf("v2's test boot: %v\nthe box says: %s", tunnelErr, tunnelState(l.box))
	}
	if webErr == nil && tunnelErr == nil {
		d := tunnelBack.Sub(webUI).Seconds()
		order := "after"
		if d < 0 {
			order = "before" // iked may start before the web UI
		}
		t.Logf("upgrade.tunnel_after_webui_s %.1f (the tunnel, untouched, passed traffic again %.1f s %s v2's web UI first answered; "+
			"v2's PID 1 started %.1f s after the upload was answered; from there the web UI answered at +%.1f s, the tunnel passed traffic at +%.1f s)",
			d, max(d, -d), order, pid1.Sub(uploaded).Seconds(), webUI.Sub(pid1).Seconds(), tunnelBack.Sub(pid1).Seconds())
		if sas, err := l.net.charonIKESAs(); err != nil {
			t.Logf("strongSwan's SAs: %v", err)
		} else {
			t.Logf("strongSwan once the tunnel passed traffic again: %s", sas)
		}
	}
	if err := l.box.WaitResult(ctx, v1+"-v2", 6*time.Minute, func(s string) { t.Log(s) }); err != nil {
		t.Fatalf("upgrade to v2: %v", err)
	}
	t.Logf("upgrade.total_s %.1f (start of the upload to v2 committed)", time.Since(start).Seconds())
	st, err := l.box.Status(ctx)
	if err != nil || st.Running.Slot != "b" || st.DefaultSlot != "b" {
		t.Fatalf("after the upgrade: %+v %v", st, err)
	}
	if after := l.settings(t); after != before {
		t.Errorf("the configuration changed across the upgrade:\nbefore %s\nafter  %s", before, after)
	}
	if err := l.net.tunnelPasses(3); err != nil {
		t.Errorf("v2 committed: hostC -> hostA through the tunnel: %v", err)
	}
	if s := tunnelState(l.box); !strings.HasPrefix(s, "up") {
		t.Errorf("v2 committed: the box says the tunnel is %s", s)
	}
	t.Logf("v2 committed: the WAN's DHCP server has the leases %+v", l.net.dhcp.Leases())

	// Services that never come up: back to v2 by itself.
	broken := l.variant(t, v1+"-v3", l.base.Built+200, l.key, "qemu", map[string][]byte{"bbin/flashgate": []byte("not a program\n")})
	if _, err := l.box.Upload(ctx, broken, false, true, nil); err != nil {
		t.Fatal(err)
	}
	err = l.box.WaitResult(ctx, v1+"-v3", 8*time.Minute, func(s string) { t.Log(s) })
	if err == nil || !strings.Contains(err.Error(), "upgrade to "+v1+"-v3 failed: ") || !strings.Contains(err.Error(), "running "+v1+"-v2") {
		t.Fatalf("broken services: %v", err)
	}
	t.Logf("broken services: %v", err)

	// A kernel that finds no init it can run panics (panic=10 reboots
	// it): /init and every fallback the kernel tries are garbage.
	garbage := []byte("not a program\n")
	panics := l.variant(t, v1+"-v4", l.base.Built+300, l.key, "qemu", map[string][]byte{
		"init": garbage, "bin/init": garbage, "sbin/init": garbage, "etc/init": garbage, "bin/sh": garbage})
	if _, err := l.box.Upload(ctx, panics, false, true, nil); err != nil {
		t.Fatal(err)
	}
	err = l.box.WaitResult(ctx, v1+"-v4", 8*time.Minute, func(s string) { t.Log(s) })
	if err == nil || !strings.Contains(err.Error(), "did not finish its test boot") || !strings.Contains(err.Error(), "running "+v1+"-v2") {
		t.Fatalf("panicking kernel: %v", err)
	}
	t.Logf("panic: %v", err)

	// A PID 1 that starts and exits: /init is a script (the kernel has
	// BINFMT_SCRIPT) whose interpreter is the firmware's multi-call
	// binary, which runs, finds itself PID 1 and exits 1 ("this is PID 1,
	// which is firmware/init's job"). The kernel cannot go on without
	// init ("Attempted to kill init"), panics, and panic=10 reboots it.
	exits := l.variant(t, v1+"-v5", l.base.Built+400, l.key, "qemu", map[string][]byte{
		"init": []byte("#!/bbin/flashgate\n")})
	at = len(l.vm.Log())
	if _, err := l.box.Upload(ctx, exits, false, true, nil); err != nil {
		t.Fatal(err)
	}
	err = l.box.WaitResult(ctx, v1+"-v5", 8*time.Minute, func(s string) { t.Log(s) })
	if err == nil || !strings.Contains(err.Error(), "did not finish its test boot") || !strings.Contains(err.Error(), "running "+v1+"-v2") {
		t.Fatalf("PID 1 exiting: %v", err)
	}
	console := string(l.vm.Log()[at:])
	if i := strings.Index(console, "Attempted to kill init"); i < 0 {
		t.Errorf("PID 1 exiting: the serial console shows no \"Attempted to kill init\": the test boot failed some other way")
	} else {
		lines := strings.Split(console[:i], "\n")
		t.Logf("PID 1 exiting: the console of the test boot, up to the kernel's panic:\n%s",
			strings.Join(lines[max(0, len(lines)-4):], "\n")+console[i:min(len(console), i+len("Attempted to kill init! exitcode=0x00000000"))])
	}
	t.Logf("PID 1 exits: %v", err)
	st, err = l.box.Status(ctx)
	if err != nil || st.Running.Slot != "b" || st.Running.Version != v1+"-v2" {
		t.Fatalf("after the failed upgrades: %+v %v", st, err)
	}
	if after := l.settings(t); after != before {
		t.Errorf("the configuration changed across the failed upgrades:\nbefore %s\nafter  %s", before, after)
	}
	back := time.Now()
	if at, err := l.net.waitTunnelPasses(3 * time.Minute); err != nil {
		t.Errorf("back on v2 after the failed upgrades: %v\nthe box says: %s", err, tunnelState(l.box))
	} else {
		t.Logf("back on v2 after the failed upgrades: the tunnel passes traffic (%.1f s after the box reported the last fallback)", at.Sub(back).Seconds())
	}
}
