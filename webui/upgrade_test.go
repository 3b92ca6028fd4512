package webui

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/firmware/upgrade"
	"github.com/flashgate/flashgate/images/imagestest"
	"github.com/flashgate/flashgate/services/configd"
	"github.com/flashgate/flashgate/upgrade/imagefile"
	"github.com/flashgate/flashgate/upgrade/remote"
)

// upgradeCard lays out a card image with the image builder around stand-in
// firmware v1 and returns it, the signing key, and a function writing
// upgrade files.
func upgradeCard(t *testing.T) (card string, key ed25519.PrivateKey, file func(version string, built int64, k ed25519.PrivateKey) string) {
	t.Helper()
	c := imagestest.NewCard(t, "")
	return c.Path, c.Key, func(version string, built int64, k ed25519.PrivateKey) string {
		return c.UpgradeFile(t, version, "qemu", built, k)
	}
}

// firmwareOn has configd write firmware to the card image (as it writes
// the box's boot partition).
func firmwareOn(card string) configd.ServerOption {
	return configd.WithFirmware(configd.FirmwareSource{
		Open:    func() (*bootslot.Card, error) { return bootslot.OpenCard(card, 1<<20) },
		Running: upgrade.Running{Slot: "a", Version: "v1", Board: "qemu"},
		Status:  filepath.Join(filepath.Dir(card), "no-status.json"),
	})
}

// withUpgrades points the web UI's upgrade routes at its configd.
func withUpgrades(card string) harnessOption {
	return func(o *Options) {
		o.Upgrade = UpgradeSource{Firmware: o.Config, Status: filepath.Join(filepath.Dir(card), "no-status.json")}
	}
}

// TestUpgradeAPI drives the API with the host tool's client (package
// remote) over TLS with the certificate pinned: a file signed by another
// key is refused before anything is written, a good one is streamed into
// slot b and armed, and the API then shows it.
func TestUpgradeAPI(t *testing.T) {
	card, key, file := upgradeCard(t)
	h := newHarnessConfigd(t, true, []configd.ServerOption{firmwareOn(card)}, withUpgrades(card))
	sum := sha256.Sum256(h.ts.Certificate().Raw)
	box := &remote.Box{URL: h.ts.URL, Fingerprint: hex.EncodeToString(sum[:]), User: testAdmin, Password: testPassword}
	ctx := context.Background()

	// Pinning: another fingerprint is refused at the TLS handshake.
	wrong := *box
	wrong.Fingerprint = strings.Repeat("ab", 32)
	if err := wrong.Login(ctx); err == nil || !strings.Contains(err.Error(), "not the pinned") {
		t.Fatalf("login with a wrong pin: %v", err)
	}
	if err := box.Login(ctx); err != nil {
		t.Fatal(err)
	}
	other, _ := imagefile.GenerateKey()
	before, _ := os.ReadFile(card)
	bad := file("v2x", 1700000050, other)
	if p, err := box.Inspect(ctx, bad, false); err == nil || !strings.Contains(p.Error, "this box trusts") || p.Version != "v2x" || p.Signer != imagefile.Fingerprint(other.Public().(ed25519.PublicKey)) {
		t.Errorf("inspect of a file from another key: %+v %v", p, err)
	}
	if _, err := box.Upload(ctx, bad, false, false, nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("upload of a file from another key: %v", err)
	}
	if after, _ := os.ReadFile(card); !bytes.Equal(before, after) {
		t.Fatal("a refused upload changed the card")
	}

	// The upload needs the current password: a wrong one is refused
	// before configd sees a byte, and counts against the login limiter.
	good := file("v2", 1700000100, key)
	wrongPassword := *box
	wrongPassword.Password = "not the password"
	if _, err := wrongPassword.Upload(ctx, good, false, false, nil); err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "Wrong password") {
		t.Errorf("upload with a wrong password: %v", err)
	}
	if after, _ := os.ReadFile(card); !bytes.Equal(before, after) {
		t.Fatal("an upload with a wrong password changed the card")
	}
	p, err := box.Inspect(ctx, good, false)
	if err != nil || p.Version != "v2" || p.Board != "qemu" || p.Target != "b" || p.Signer != imagefile.Fingerprint(key.Public().(ed25519.PublicKey)) {
		t.Fatalf("inspect: %+v %v", p, err)
	}
	var sent int64
	p, err = box.Upload(ctx, good, false, false, func(s, total int64) { sent = s })
	if err != nil || p.Target != "b" {
		t.Fatalf("upload: %+v %v", p, err)
	}
	if fi, _ := os.Stat(good); sent != fi.Size() {
		t.Errorf("sent %d of %d bytes", sent, fi.Size())
	}
	st, err := box.Status(ctx)
	if err != nil || st.DefaultSlot != "a" {
		t.Fatalf("status: %+v %v", st, err)
	}
	c, _ := bootslot.OpenCard(card, 1<<20)
	boot, _ := bootslot.ReadBoot(c.Vol)
	slotB := upgrade.ReadSlot(c, "b")
	c.Close()
	if boot.Once != "b" || slotB.Manifest == nil || slotB.Manifest.Version != "v2" {
		t.Fatalf("after the upload: boot %+v, slot b %+v", boot, slotB)
	}

	// The API's guards: no session, no CSRF token.
	b := h.browser()
	if r, _ := b.api("POST", "/api/v1/upgrade", "x"); r.Code != http.StatusUnauthorized {
		t.Errorf("upload without a session: %d", r.Code)
	}
	b.login()
	page := b.get("/system")
	mustContain(t, "System page", page.Body, `id="firmware"`, "<td>b</td>", "<td>v2</td>", "data-upgrade-go", "running", imagefile.Fingerprint(key.Public().(ed25519.PublicKey)))
	if strings.Contains(page.Body, "accepts unsigned") || strings.Contains(b.get("/").Body, "accepts unsigned") {
		t.Error("a card with a key says it accepts unsigned firmware")
	}
	b.csrf = ""
	if r, _ := b.api("POST", "/api/v1/upgrade/inspect", "x"); r.Code != http.StatusForbidden {
		t.Errorf("inspect without the CSRF token: %d", r.Code)
	}
}
