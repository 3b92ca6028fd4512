package images

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// smallCard lays out a card image with the real tools but tiny stand-ins
// for the kernel and initramfs.
func smallCard(t *testing.T, dir, name, cfg string, minCardMB int) string {
	t.Helper()
	if err := checkTools(toolSfdisk, toolMkfsVfat, toolMcopy, toolMmd, toolSyslinux, toolMBR, toolMke2fs); err != nil {
		t.Fatalf("cannot lay out cards on this host: %v", err)
	}
	work := filepath.Join(dir, name+".work")
	os.MkdirAll(work, 0o755)
	files := map[string]string{"syslinux.cfg": cfg, "vmlinuz": "kernel " + name, "initrd.img": "initramfs " + name}
	for n, content := range files {
		if err := os.WriteFile(filepath.Join(work, n), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l, err := PlanLayout(minCardMB)
	if err != nil {
		t.Fatal(err)
	}
	c := &cardBuild{Image: filepath.Join(dir, name+".img"), Layout: l, IDs: deriveCardIDs("qemu", name),
		Epoch: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), Work: work}
	if err := c.create(context.Background(), []bootFile{
		{filepath.Join(work, "syslinux.cfg"), "/syslinux.cfg"},
		{filepath.Join(work, "vmlinuz"), slotAKernel},
		{filepath.Join(work, "initrd.img"), slotAInitramfs},
	}); err != nil {
		t.Fatalf("lay out %s: %v", name, err)
	}
	return c.Image
}

func readBootFile(t *testing.T, img, p string) string {
	t.Helper()
	out, err := command{Env: []string{"MTOOLS_SKIP_CHECK=1"}}.run(context.Background(), tool(toolMcopy), "-n", "-i", img+"@@1048576", "::"+p, "-")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestPrepareRunCardKeepsConfig(t *testing.T) {
	dir := t.TempDir()
	v1 := smallCard(t, dir, "v1", "DEFAULT v1\n", 32)
	v2 := smallCard(t, dir, "v2", "DEFAULT v2\n", 32)
	card := filepath.Join(dir, "run", "qemu.img")
	ctx := context.Background()

	if reset, err := PrepareRunCard(ctx, v1, card); err != nil || reset {
		t.Fatalf("first PrepareRunCard: reset %v, %v", reset, err)
	}
	if got := readBootFile(t, card, "/a/vmlinuz"); got != "kernel v1" {
		t.Fatalf("new card boots %q, want kernel v1", got)
	}
	// The appliance writes its configuration to partition 2.
	l, _ := PlanLayout(32)
	f, err := os.OpenFile(card, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	config := []byte("configuration written by the appliance")
	f.WriteAt(config, l.ConfigStart+512*1024)
	f.Close()

	// A card made before the initramfs was zstd holds /a/initrd.xz.
	mtools := command{Env: []string{"MTOOLS_SKIP_CHECK=1"}}
	stale := filepath.Join(dir, "initrd.xz")
	os.WriteFile(stale, []byte("xz initramfs v0"), 0o644)
	if _, err := mtools.run(ctx, tool(toolMcopy), "-i", card+"@@1048576", stale, "::/a/initrd.xz"); err != nil {
		t.Fatal(err)
	}

	if reset, err := PrepareRunCard(ctx, v2, card); err != nil || reset {
		t.Fatalf("PrepareRunCard with new firmware: reset %v, %v", reset, err)
	}
	if listing, err := mtools.run(ctx, tool(toolMdir), "-b", "-i", card+"@@1048576", "::/a"); err != nil {
		t.Fatal(err)
	} else if bytes.Contains(listing, []byte("initrd.xz")) {
		t.Errorf("after the update the boot partition still holds the stale /a/initrd.xz:\n%s", listing)
	}
	for p, want := range map[string]string{"/a/vmlinuz": "kernel v2", "/a/initrd.img": "initramfs v2", "/syslinux.cfg": "DEFAULT v2\n"} {
		if got := readBootFile(t, card, p); got != want {
			t.Errorf("after the update %s holds %q, want %q", p, got, want)
		}
	}
	b, _ := os.ReadFile(card)
	if !bytes.Equal(b[l.ConfigStart+512*1024:][:len(config)], config) {
		t.Error("updating the firmware lost the config partition's contents")
	}

	// A different layout cannot keep partition 2 in place: the card is replaced.
	v3 := smallCard(t, dir, "v3", "DEFAULT v3\n", 64)
	if reset, err := PrepareRunCard(ctx, v3, card); err != nil || !reset {
		t.Fatalf("PrepareRunCard with a new layout: reset %v, %v; want reset", reset, err)
	}
	if got := readBootFile(t, card, "/a/vmlinuz"); got != "kernel v3" {
		t.Errorf("replaced card boots %q, want kernel v3", got)
	}
}
