package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/firmware/upgrade"
	"github.com/flashgate/flashgate/images/imagestest"
	"github.com/flashgate/flashgate/services/configd/configdapi"
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
	// v2's file says nothing of the database formats it reads, as every
	// file from before database format 3: configd hands the database off
	// before the slot is armed.
	term.expect("v2 reads configuration database format 2 only")
	term.expect("Write it to slot b")
	term.send("yes\r")
	term.expect("switch 100%")
	term.expect("Rebooting into the test boot of v2")
	term.wait()
	if _, err := cd.client.Set(context.Background(), "", "system.hostname", "too-late"); !errors.Is(err, config.ErrHandedOff) {
		t.Fatalf("an edit after the upgrade's hand-off: %v, want ErrHandedOff", err)
	}
	// The box reboots; here, configd takes the database back as its
	// next start would.
	if err := cd.store.TakeBack(); err != nil {
		t.Fatal(err)
	}

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
	// Slot a's firmware was built from this tree (its manifest says which
	// database formats it reads); v2's file says nothing, as every file
	// from before database format 3.
	term.expect("v1 reads this configuration database as it is: it runs with the running configuration (revision 1)")
	term.expect("Test-boot slot a (v1)?")
	term.send("yes\r")
	term.expect("Rebooting into slot a (v1) with revision 1.")
	term.wait()
	c, _ = bootslot.OpenCard(card, 1<<20)
	boot, _ = bootslot.ReadBoot(c.Vol)
	if boot.Once != "a" || boot.Committed != "b" || boot.Last.State != bootslot.StateTrial || boot.Last.To != "a" {
		t.Fatalf("after boot other slot: %+v %+v", boot, boot.Last)
	}
	if _, err := cd.client.Set(context.Background(), "", "system.hostname", "still-here"); err != nil {
		t.Fatalf("configd refuses edits after a switch that needed no conversion: %v", err)
	}
	if _, err := cd.client.Commit(context.Background(), configdapi.CommitRequest{Who: "admin", Message: "renamed"}); err != nil {
		t.Fatal(err)
	}

	// a committed; from a, boot other slot test-boots v2, which reads
	// only format 2: configd rewrites the database first.
	boot.Once, boot.Committed, boot.Last = "", "a", nil
	bootslot.WriteBoot(c.Vol, boot)
	c.Close()
	running = upgrade.Running{Slot: "a", Version: "v1", Board: "qemu"}
	term = startCLI(t, opts, runCLI)
	term.expect(prompt)
	term.send("boot other slot\r")
	term.expect("v2 reads configuration database format 2 only")
	term.expect("with the running configuration (revision 2) and its history")
	term.expect("Test-boot slot b (v2)?")
	term.send("yes\r")
	term.expect("Rewriting the configuration database in format 2")
	term.expect("Rebooting into slot b (v2) with revision 2.")
	term.wait()
	c, _ = bootslot.OpenCard(card, 1<<20)
	boot, _ = bootslot.ReadBoot(c.Vol)
	c.Close()
	if boot.Once != "b" || boot.Committed != "a" || boot.Last.To != "b" {
		t.Fatalf("after boot other slot to v2: %+v %+v", boot, boot.Last)
	}
	if _, err := cd.client.Set(context.Background(), "", "system.hostname", "too-late"); !errors.Is(err, config.ErrHandedOff) {
		t.Fatalf("an edit after the hand-off: %v, want ErrHandedOff", err)
	}
	// The file is format 2 now, with revision 2 running: opening a copy
	// with this firmware's code migrates it.
	cp := filepath.Join(t.TempDir(), "config.db")
	b, err := os.ReadFile(cd.store.Path())
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(cp, b, 0o600)
	var logs []string
	st, err := config.Open(cp, config.Options{Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if c, rev := st.Running(); rev != 2 || c.System.Hostname != "still-here" || !strings.Contains(strings.Join(logs, "\n"), "database format 2 to 3") {
		t.Fatalf("the handed-off database: revision %d, host %q, log %q", rev, c.System.Hostname, logs)
	}
	mu.Lock()
	defer mu.Unlock()
	if reboots != 3 {
		t.Errorf("%d reboots asked for, want 3", reboots)
	}
}

// boot other slot changes nothing when the slot cannot be armed or the
// database cannot be handed off: configd keeps committing, no slot is
// armed.
func TestBootOtherSlotRefusals(t *testing.T) {
	dir := t.TempDir()
	fake := imagestest.NewCard(t, dir)
	openBootCard = func() (*bootslot.Card, error) { return bootslot.OpenCard(fake.Path, 1<<20) }
	runningFirmware = func() upgrade.Running { return upgrade.Running{Slot: "a", Version: "v1", Board: "qemu"} }
	t.Cleanup(func() { openBootCard = bootslot.OpenBox })
	reboots := 0
	cd := startConfigd(t)
	opts := Options{User: "admin", Hostname: "fg", Board: "qemu", ConfigdSocket: cd.socket,
		Power: func(context.Context, string) error { reboots++; return nil }}
	ctx := context.Background()
	commits := func(what string) {
		t.Helper()
		if _, err := cd.client.Set(ctx, "", "system.hostname", what); err != nil {
			t.Fatalf("%s: configd refuses edits: %v", what, err)
		}
		if _, err := cd.client.Commit(ctx, configdapi.CommitRequest{Who: "admin", Message: what}); err != nil {
			t.Fatalf("%s: configd refuses commits: %v", what, err)
		}
	}
	armed := func() string {
		c, err := bootslot.OpenCard(fake.Path, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		boot, _ := bootslot.ReadBoot(c.Vol)
		return boot.Once
	}

	// Slot b is empty.
	term := startCLI(t, opts, runCLI)
	term.expect(prompt)
	term.send("boot other slot\r")
	term.expect("slot b holds no firmware")
	term.expect(prompt)
	term.send("exit\r")
	term.wait()
	commits("after-empty-slot")

	// Slot b holds v2, from before database format 3; a commit waits for
	// confirmation.
	c, err := bootslot.OpenCard(fake.Path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(fake.UpgradeFile(t, "v2", "qemu", 1700000100, fake.Key))
	if err != nil {
		t.Fatal(err)
	}
	_, err = upgrade.Install(c, f, runningFirmware(), upgrade.Options{Size: -1})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	boot, _ := bootslot.ReadBoot(c.Vol)
	boot.Once, boot.Last = "", nil // as if that upgrade had been refused by hand
	bootslot.WriteBoot(c.Vol, boot)
	c.Close()
	if _, err := cd.client.Set(ctx, "", "system.hostname", "trial"); err != nil {
		t.Fatal(err)
	}
	if _, err := cd.client.Commit(ctx, configdapi.CommitRequest{Who: "admin", Message: "trial", ConfirmTimeout: "10m"}); err != nil {
		t.Fatal(err)
	}
	term = startCLI(t, opts, runCLI)
	term.expect("[confirm 3 in ") // the prompt while a commit waits
	term.send("boot other slot\r")
	term.expect("v2 reads configuration database format 2 only")
	term.expect("Test-boot slot b (v2)?")
	term.send("yes\r")
	term.expect("revision 3 waits for confirmation")
	term.expect("]> ")
	term.send("exit\r")
	term.wait()
	if once := armed(); once != "" {
		t.Fatalf("slot %s armed after a refused hand-off", once)
	}
	if err := cd.client.Confirm(ctx); err != nil {
		t.Fatal(err)
	}
	commits("after-pending")
	if reboots != 0 {
		t.Fatalf("%d reboots asked for", reboots)
	}
}
