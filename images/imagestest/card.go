// Package imagestest holds the fixtures of the tests that use the image
// builder's output: a stand-in firmware card for tests of the upgrade path
// (configd's firmware routes, the web UI's upgrade page, the console's
// upgrade command), a qemu card image laid out by the image builder with
// signed upgrade files to write to it; and Serial, the one driver of a
// booted appliance's serial console (firmware/vmtest and e2e).
package imagestest

import (
	"context"
	"crypto/ed25519"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/images"
	"github.com/flashgate/flashgate/upgrade/imagefile"
)

// Card is a card image with firmware v1 (board qemu, built at
// 1700000000) in slot a, signed with Key.
type Card struct {
	Path string             // the card image
	Key  ed25519.PrivateKey // the key the card trusts
	dir  string
}

// NewCard lays out the card in dir (t.TempDir() when empty; pass a short
// one when sockets live there too). It needs mkfs.fat and syslinux (the
// image builder's tools).
func NewCard(t testing.TB, dir string) *Card {
	t.Helper()
	os.Setenv("PATH", os.Getenv("PATH")+":/usr/sbin:/sbin")
	if dir == "" {
		dir = t.TempDir()
	}
	key, err := imagefile.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	c := &Card{Path: filepath.Join(dir, "card.img"), Key: key, dir: dir}
	v1 := c.slot(t, "v1", "qemu", 1700000000)
	if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := images.MakeCard(context.Background(), images.CardSpec{
		Board:   boards.Board{Name: "qemu", MinCardMB: 32, Console: boards.Console{Device: "ttyS0", Baud: 115200}},
		Version: "v1", Epoch: time.Unix(v1.Built, 0), Kernel: v1.Kernel, Initrd: v1.Initrd, Key: key,
		Image: c.Path, UpgradeFile: filepath.Join(dir, "v1.fgup"), Work: filepath.Join(dir, "work")}); err != nil {
		t.Fatalf("lay out the card: %v", err)
	}
	return c
}

// slot makes a firmware's kernel and initrd: a little over 1 MiB each of
// bytes that depend on built only.
func (c *Card) slot(t testing.TB, version, board string, built int64) imagefile.Slot {
	t.Helper()
	s := imagefile.Slot{Version: version, Board: board, Built: built,
		Kernel: filepath.Join(c.dir, version+".k"), Initrd: filepath.Join(c.dir, version+".i")}
	r := rand.New(rand.NewSource(built))
	for _, p := range []string{s.Kernel, s.Initrd} {
		b := make([]byte, 1<<20+r.Intn(1000))
		r.Read(b)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// UpgradeFile writes the upgrade file of version for board, built at
// built and signed with key, next to the card, and returns its path.
func (c *Card) UpgradeFile(t testing.TB, version, board string, built int64, key ed25519.PrivateKey) string {
	t.Helper()
	return c.UpgradeFileAt(t, filepath.Join(c.dir, version+".fgup"), version, board, built, key)
}

// UpgradeFileAt is UpgradeFile at path.
func (c *Card) UpgradeFileAt(t testing.TB, path, version, board string, built int64, key ed25519.PrivateKey) string {
	t.Helper()
	if _, err := images.WriteUpgradeFile(path, c.slot(t, version, board, built), key); err != nil {
		t.Fatalf("upgrade file %s: %v", version, err)
	}
	return path
}
