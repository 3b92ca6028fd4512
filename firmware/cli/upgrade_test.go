package cli

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/firmware/upgrade"
	"github.com/flashgate/flashgate/images/imagestest"
	"github.com/flashgate/flashgate/upgrade/imagefile"
)

// TestUpgradeFromURL installs an upgrade file from a web server on the
// "LAN" (an httptest server on loopback) at the console, into a card
// image laid out by the image builder, and then test-boots the other slot
// by hand; a file from another board is refused with the reason.
func TestUpgradeFromURL(t *testing.T) {
	dir := t.TempDir()
	fake := imagestest.NewCard(t, dir)
	card, key := fake.Path, fake.Key
	os.MkdirAll(filepath.Join(dir, "www"), 0o755)
	fake.UpgradeFileAt(t, filepath.Join(dir, "www", "v2.fgup"), "v2", "qemu", 1700000100, key)
	fake.UpgradeFileAt(t, filepath.Join(dir, "www", "alix.fgup"), "v2a", "alix2d13", 1700000100, key)
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Join(dir, "www"))))
	defer srv.Close()

	openBootCard = func() (*bootslot.Card, error) { return bootslot.OpenCard(card, 1<<20) }
	running := upgrade.Running{Slot: "a", Version: "v1", Board: "qemu"}
	runningFirmware = func() upgrade.Running { return running }
	t.Cleanup(func() {
		openBootCard = bootslot.OpenBox
	})
	var mu sync.Mutex
	var reboots int
	power := func(ctx context.Context, action string) error {
		mu.Lock()
		defer mu.Unlock()
		if action == "reboot" {
			reboots++
		}
		return nil
	}
	cd := startConfigd(t)
	opts := Options{User: "admin", Hostname: "fg", Board: "qemu", ConfigdSocket: cd.socket, Power: power}

	term := startCLI(t, opts, runCLI)
	term.expect(prompt)
	term.send("upgrade " + srv.URL + "/alix.fgup\r")
	term.expect("for alix2d13, this box is qemu")
	term.expect(prompt)
	term.send("upgrade " + srv.URL + "/v2.fgup\r")
	term.expect("file: flashgate v2 for qemu, signed by " + imagefile.Fingerprint(key.Public().(ed25519.PublicKey)))
	term.expect("Write it to slot b")
	term.send("yes\r")
	term.expect("switch 100%")
	term.expect("Rebooting into the test boot of v2")
	term.wait()

	c, _ := bootslot.OpenCard(card, 1<<20)
	boot, _ := bootslot.ReadBoot(c.Vol)
	if boot.Once != "b" || upgrade.VerifySlot(c, "b") != nil {
		t.Fatalf("after the console's upgrade: %+v, slot b %v", boot, upgrade.VerifySlot(c, "b"))
	}
	// The test boot committed b (as PID 1 would): from b, boot other slot
	// arms a test boot of a.
	boot.Once, boot.Committed = "", "b"
	bootslot.WriteBoot(c.Vol, boot)
	c.Close()
	running = upgrade.Running{Slot: "b", Version: "v2", Board: "qemu"}

	term = startCLI(t, opts, runCLI)
	term.expect(prompt)
	term.send("upgrade\r")
	term.expect("slot b: v2 for qemu")
	term.expect("(running, default)")
	term.expect(prompt)
	term.send("boot other slot\r")
	term.expect("Test-boot slot a (v1)?")
	term.send("yes\r")
	term.expect("Rebooting into slot a.")
	term.wait()
	c, _ = bootslot.OpenCard(card, 1<<20)
	boot, _ = bootslot.ReadBoot(c.Vol)
	c.Close()
	if boot.Once != "a" || boot.Committed != "b" || boot.Last.State != bootslot.StateTrial || boot.Last.To != "a" {
		t.Fatalf("after boot other slot: %+v %+v", boot, boot.Last)
	}
	mu.Lock()
	defer mu.Unlock()
	if reboots != 2 {
		t.Errorf("%d reboots asked for, want 2", reboots)
	}
}
