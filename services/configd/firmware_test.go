package configd_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashgate/flashgate/images/imagestest"
	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/firmware/upgrade"
	"github.com/flashgate/flashgate/services/configd"
	"github.com/flashgate/flashgate/upgrade/imagefile"
)

// configd writes firmware upgrades for the web UI, and checks each file
// itself on the bytes it reads: a request straight to its socket with a
// file signed by another key, or shorter than its manifest, writes
// nothing; a good one is streamed into slot b and armed.
func TestFirmwareIsCheckedAndWrittenByConfigd(t *testing.T) {
	dir := shortDir(t)
	fake := imagestest.NewCard(t, dir)
	card, key := fake.Path, fake.Key
	file := func(version string, built int64, k ed25519.PrivateKey) []byte {
		b, err := os.ReadFile(fake.UpgradeFile(t, version, "qemu", built, k))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	store, err := config.Open(filepath.Join(dir, "config.db"), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sock := filepath.Join(dir, "web.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: configd.NewServer(store, "ram", "", t.Logf, configd.Restricted(),
		configd.WithFirmware(configd.FirmwareSource{
			Open:    func() (*bootslot.Card, error) { return bootslot.OpenCard(card, 1<<20) },
			Running: upgrade.Running{Slot: "a", Version: "v1", Board: "qemu"},
			Status:  filepath.Join(dir, "no-status.json"),
		}))}
	go srv.Serve(ln)
	defer srv.Close()
	ctx := context.Background()
	hash, err := config.HashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	_, etag := store.Candidate()
	if _, err := store.EditCandidate(etag, func(c *config.Config) error {
		c.System.Admins = []config.Admin{{Name: "admin", PasswordHash: config.NewSecret(hash)}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commit("t", "an admin"); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(card)

	// Without the admin's password nothing is read or written.
	var apiErr *configdapi.APIError
	noPassword := configdapi.New(sock)
	if _, err := noPassword.InstallFirmware(ctx, bytes.NewReader([]byte("anything")), 8, false); !errors.As(err, &apiErr) || apiErr.Code != configdapi.CodeWrongPassword {
		t.Errorf("install without the password: %v, want refused with %s", err, configdapi.CodeWrongPassword)
	}
	c := configdapi.New(sock).WithPassword("admin", "correct horse battery")

	other, _ := imagefile.GenerateKey()
	forged := file("v2x", 1700000050, other)
	good := file("v2", 1700000100, key)
	for _, tc := range []struct {
		name   string
		body   []byte
		size   int64
		status int
	}{
		{"signed by another key", forged, int64(len(forged)), http.StatusForbidden},
		{"shorter than its manifest", good[:len(good)/2], int64(len(good) / 2), http.StatusUnprocessableEntity},
	} {
		p, err := c.InstallFirmware(ctx, bytes.NewReader(tc.body), tc.size, false)
		var apiErr *configdapi.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != tc.status || apiErr.Code != configdapi.CodeFirmwareRefused || p.Error == "" {
			t.Errorf("install of a file %s: %+v, %v; want refused with %d", tc.name, p, err, tc.status)
		}
		if after, _ := os.ReadFile(card); !bytes.Equal(before, after) {
			t.Fatalf("install of a file %s changed the card", tc.name)
		}
	}
	if p, err := c.CheckFirmware(ctx, forged[:4096], int64(len(forged)), false); err == nil || p.Version != "v2x" || p.Signer != imagefile.Fingerprint(other.Public().(ed25519.PublicKey)) {
		t.Errorf("check of a file from another key: %+v, %v; want refused, naming it", p, err)
	}

	// What v2 will run with is said before anything is written.
	if p, err := c.CheckFirmware(ctx, good[:4096], int64(len(good)), false); err != nil || !strings.Contains(p.Config, "v2 reads configuration database format 2 only") {
		t.Errorf("check of format 2 firmware: %+v, %v; want it to say the database is rewritten", p, err)
	}
	p, err := c.InstallFirmware(ctx, bytes.NewReader(good), int64(len(good)), false)
	if err != nil || p.Target != "b" || p.Version != "v2" {
		t.Fatalf("install of a good file: %+v, %v", p, err)
	}
	v, err := c.Firmware(ctx)
	if err != nil || v.DefaultSlot != "a" || len(v.Slots) != 2 || v.Slots[1].Manifest == nil || v.Slots[1].Manifest.Version != "v2" || v.Upload != nil {
		t.Fatalf("view after the install: %+v, %v", v, err)
	}
	cd, _ := bootslot.OpenCard(card, 1<<20)
	defer cd.Close()
	if boot, _ := bootslot.ReadBoot(cd.Vol); boot.Once != "b" || upgrade.VerifySlot(cd, "b") != nil {
		t.Errorf("after the install: boot %+v, slot b %v", boot, upgrade.VerifySlot(cd, "b"))
	}
	// v2's file says nothing of the database formats it reads, as every
	// file from before format 3: the database was handed off to it before
	// the slot was armed, and nothing more is committed.
	if _, err := store.EditCandidate("", func(c *config.Config) error { c.System.Hostname = "late"; return nil }); !errors.Is(err, config.ErrHandedOff) {
		t.Fatalf("an edit after installing format 2 firmware: %v, want ErrHandedOff", err)
	}
}
