package webui

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/firmware/upgrade"
	"github.com/flashgate/flashgate/upgrade/imagefile"
)

// TestBrowserUpgrade drives the System page's firmware upload in headless
// Chromium: a file signed by another key is described and refused before
// anything is written, a good one shows its version, board and signer,
// uploads with the progress bar and leaves slot b written and armed.
func TestBrowserUpgrade(t *testing.T) {
	card, key, file := upgradeCard(t)
	cfg, _, _, _ := startConfigdAPIs(t, firmwareOn(card))
	setAdmin(t, cfg, testAdmin, testPassword)
	cert, err := LoadOrCreateCertificate("flashgate", time.Now(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Config: cfg, Board: BoardInfo{Name: "qemu", Version: "v1"}, Root: "/",
		Fingerprint: cert.Fingerprint, Logf: t.Logf,
		Upgrade: UpgradeSource{Firmware: cfg, Status: filepath.Join(t.TempDir(), "none.json")}})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	addr := freeLoopbackAddr(t)
	served := make(chan error, 1)
	go func() { served <- Serve(sctx, srv, cert, addr, "", t.Logf) }()
	t.Cleanup(func() { stop(); <-served })

	s := &browserSession{t: t, ctx: startBrowser(t), base: "https://" + addr}
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Minute)
	defer cancel()
	s.ctx = ctx
	browserLogin(s)
	other, _ := imagefile.GenerateKey()
	bad := file("v2x", 1700000050, other)
	good := file("v2", 1700000100, key)
	before, _ := os.ReadFile(card)

	s.do("system page", chromedp.Navigate(s.base+"/system"), chromedp.WaitVisible(chromedp.ID("up-file")))
	s.do("choose a file from another key", chromedp.SetUploadFiles(chromedp.ID("up-file"), []string{bad}),
		chromedp.Poll[chromedp.Void](`document.querySelector("[data-upgrade-plan]").textContent.startsWith("Refused")`))
	if txt := s.text("[data-upgrade-plan]"); !strings.Contains(txt, "this box trusts") || !strings.Contains(txt, "flashgate v2x for qemu") {
		t.Errorf("plan for a file from another key: %q", txt)
	}
	if after, _ := os.ReadFile(card); string(after) != string(before) {
		t.Fatal("choosing a refused file wrote to the card")
	}
	s.do("choose the signed file", chromedp.SetUploadFiles(chromedp.ID("up-file"), []string{good}),
		chromedp.Poll[chromedp.Void](`document.querySelector("[data-upgrade-plan]").textContent.startsWith("flashgate v2 ")`))
	if txt := s.text("[data-upgrade-plan]"); !strings.Contains(txt, "signed by "+imagefile.Fingerprint(key.Public().(ed25519.PublicKey))) || !strings.Contains(txt, "into slot b") ||
		// v2's file says nothing of the database formats it reads, as
		// every file from before format 3.
		!strings.Contains(txt, "v2 reads configuration database format 2 only") {
		t.Errorf("plan for the signed file: %q", txt)
	}
	s.do("install", chromedp.SendKeys(chromedp.ID("up-cur"), testPassword), chromedp.Click(chromedp.CSS("[data-upgrade-go]")),
		chromedp.Poll[chromedp.Void](`document.querySelector("[data-upgrade-plan]").textContent.includes("written and verified")`,
			chromedp.WithPollingTimeout(60*time.Second)))
	if v, _ := chromedp.Run(s.ctx, chromedp.Evaluate[int](`document.querySelector("[data-upgrade-progress]").value`)); v != 100 {
		t.Errorf("progress bar at %d%% after the upload", v)
	}
	s.screenshot("system-upgrade")
	c, _ := bootslot.OpenCard(card, 1<<20)
	defer c.Close()
	boot, _ := bootslot.ReadBoot(c.Vol)
	if boot.Once != "b" || upgrade.VerifySlot(c, "b") != nil {
		t.Fatalf("after the browser's upload: %+v, slot b: %v", boot, upgrade.VerifySlot(c, "b"))
	}
}
