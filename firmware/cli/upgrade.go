package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/bootparam"
	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/firmware/upgrade"
	"github.com/flashgate/flashgate/services/configd/configdapi"
	"github.com/flashgate/flashgate/upgrade/imagefile"
)

// openBootCard opens the box's boot partition; tests point it elsewhere.
var openBootCard = bootslot.OpenBox

// runningFirmware says which slot and version run.
var runningFirmware = func() upgrade.Running {
	p, _ := bootparam.Read()
	return upgrade.Running{Slot: p.Slot, Version: p.Version, Board: p.Board}
}

// runUpgrade: `upgrade` shows the slots; `upgrade URL [confirm-downgrade]`
// fetches an upgrade file from an HTTP(S) server on the LAN, shows what it
// is, and after a yes writes it into the other slot and reboots into a
// test boot. The signature, not the transport, is what the box trusts, so
// an HTTPS server's certificate is not checked.
func runUpgrade(ctx context.Context, s *session, args []string) error {
	run := runningFirmware()
	if len(args) == 0 {
		return showSlots(s, run)
	}
	url := args[0]
	downgrade := false
	for _, a := range args[1:] {
		if a != "confirm-downgrade" {
			return usageError("upgrade")
		}
		downgrade = true
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return fmt.Errorf("%q: give an http:// or https:// URL of the .fgup file", url)
	}
	fetchCtx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(fetchCtx, "GET", url, nil)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ResponseHeaderTimeout: 30 * time.Second}}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch %s: the server answered %s", url, resp.Status)
	}
	h, err := imagefile.ReadHeader(resp.Body)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	card, err := openBootCard()
	if err != nil {
		return err
	}
	defer card.Close()
	opts := upgrade.Options{Size: resp.ContentLength, AllowDowngrade: downgrade}
	s.printf("file: flashgate %s for %s, signed by %s, %d bytes\n", h.Manifest.Version, h.Manifest.Board, h.SignerName(), h.Size())
	plan, err := upgrade.Check(card, h, run, opts)
	if err != nil {
		return fmt.Errorf("refused, nothing written: %w", err)
	}
	if plan.Downgrade {
		s.printf("This is a downgrade from %s.\n", plan.Running.Manifest.Version)
	}
	if _, err := s.sayConfigFor(ctx, h.Manifest.Version, h.Manifest, run); err != nil {
		return fmt.Errorf("refused, nothing written: %w", err)
	}
	ok, err := s.confirmWord(fmt.Sprintf("Write it to slot %s and reboot into a test boot of it?", plan.Target), "yes")
	if err != nil || !ok {
		return err
	}
	last := int64(-1)
	opts.Progress = func(p upgrade.Progress) {
		pct := p.Done * 100 / max(p.Total, 1)
		if pct/10 != last/10 || p.Stage == "read back" || p.Stage == "switch" {
			s.printf("  %s %d%%\n", p.Stage, pct)
			last = pct
		}
	}
	converted := false
	opts.BeforeArm = func(m imagefile.Manifest) error {
		hoCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		r, err := s.configd.HandOff(hoCtx, configdapi.HandOffRequest{DBFormats: m.ConfigDBFormats(), Schema: m.ConfigSchema()})
		converted = r.Converted
		return err
	}
	if _, err := upgrade.Install(card, io.MultiReader(bytes.NewReader(h.Raw), resp.Body), run, opts); err != nil {
		err = fmt.Errorf("upgrade: %w (the box still boots %s)", err, run.Version)
		if converted {
			return s.restartConfigd(ctx, err)
		}
		return err
	}
	card.Close()
	err = s.rebootInto(ctx, fmt.Sprintf("slot %s written and verified. Rebooting into the test boot of %s; if it is not healthy the box comes back to %s by itself.", plan.Target, h.Manifest.Version, run.Version))
	if err != nil && converted {
		err = fmt.Errorf("%w; slot %s is armed and the database is in format 2 for it: reboot the box, and do not restart configd before", err, plan.Target)
	}
	return err
}

// runBoot: `boot other slot` test-boots the other slot's firmware, after
// saying what configuration it will run with and, when it reads only an
// older database format, having configd rewrite the database in that
// format (configd.HandOff): older firmware sets a database it does not
// read aside and runs the defaults.
func runBoot(ctx context.Context, s *session, args []string) error {
	if w := strings.Join(args, " "); w != "other slot" && w != "other-slot" {
		return usageError("boot")
	}
	run := runningFirmware()
	card, err := openBootCard()
	if err != nil {
		return err
	}
	defer card.Close()
	// Before anything changes: a slot that cannot be armed must not cost
	// configd its database.
	other, err := upgrade.CheckOtherSlot(card, run)
	if err != nil {
		return err
	}
	convert, err := s.sayConfigFor(ctx, fmt.Sprintf("the firmware in slot %s (%s)", other.Name, other.Manifest.Version), *other.Manifest, run)
	if err != nil {
		return err
	}
	formats, schema := other.Manifest.ConfigDBFormats(), other.Manifest.ConfigSchema()
	ok, err := s.confirmWord(fmt.Sprintf("Test-boot slot %s (%s)? It becomes the default only if its health checks pass.", other.Name, other.Manifest.Version), "yes")
	if err != nil || !ok {
		return err
	}
	if convert {
		s.printf("Rewriting the configuration database in format 2...\n")
	}
	// Rewriting every revision of a large configuration takes a while
	// on a slow board.
	hoCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	resp, err := s.configd.HandOff(hoCtx, configdapi.HandOffRequest{DBFormats: formats, Schema: schema})
	cancel()
	if err != nil {
		return fmt.Errorf("nothing changed, slot %s is not armed: %w", other.Name, err)
	}
	if _, err := upgrade.ArmOtherSlot(card, run); err != nil {
		if resp.Converted {
			return s.restartConfigd(ctx, err)
		}
		return err
	}
	card.Close()
	err = s.rebootInto(ctx, fmt.Sprintf("Rebooting into slot %s (%s) with revision %d.", other.Name, other.Manifest.Version, resp.Running.Revision))
	if err != nil && resp.Converted {
		// A configd started again now would turn the database back into
		// format 3, which the armed firmware does not read.
		err = fmt.Errorf("%w; slot %s is armed and the database is in format 2 for it: reboot the box, and do not restart configd before", err, other.Name)
	}
	return err
}

// sayConfigFor says what configuration the firmware of manifest m will run
// with, and whether the database must be rewritten in format 2 for it; it
// refuses a firmware that could not read the configuration at all.
func (s *session) sayConfigFor(ctx context.Context, which string, m imagefile.Manifest, run upgrade.Running) (convert bool, err error) {
	formats, schema := m.ConfigDBFormats(), m.ConfigSchema()
	readCtx, cancel := apiContext(ctx)
	_, rev, err := s.configd.Running(readCtx)
	cancel()
	if err != nil {
		return false, fmt.Errorf("read the running configuration: %w", err)
	}
	what := fmt.Sprintf("the running configuration (revision %d) and its history", rev)
	switch {
	case schema < config.SchemaVersion:
		return false, fmt.Errorf("%s reads configurations up to schema %d, and this one is schema %d: it could not read it and would start from the defaults, so it is refused (re-flash the card with it and restore a backup made under it)",
			which, schema, config.SchemaVersion)
	case config.ReadsDBFormat(formats):
		s.printf("%s reads this configuration database as it is: it runs with %s.\n", m.Version, what)
		return false, nil
	case slices.Contains(formats, 2):
		s.printf("%s reads configuration database format 2 only (this firmware writes %d). Before the reboot the database\n"+
			"is rewritten in format 2 with %s, and nothing can be\ncommitted here after that. "+
			"%s then runs with that configuration. When the box comes back to %s (the\ntest boot fails, or you switch back) "+
			"the database becomes format %d again, with what %s committed.\n"+
			"A setting that %s does not know (one added by a later version) makes it set the configuration aside\nand start from the defaults.\n",
			m.Version, config.DBFormat, what, m.Version, run.Version, config.DBFormat, m.Version, m.Version)
		return true, nil
	}
	return false, fmt.Errorf("%s reads configuration database formats %v, none that this firmware can write", which, formats)
}

// restartConfigd has configd open the database again after a hand-off
// whose switch did not happen: it turns the format 2 database into format
// 3 again, losing nothing.
func (s *session) restartConfigd(ctx context.Context, err error) error {
	rctx, cancel := apiContext(ctx)
	rerr := s.supervisor.Restart(rctx, "configd")
	cancel()
	if rerr != nil {
		return fmt.Errorf("%w; configd commits nothing until it restarts (restart it: %v)", err, rerr)
	}
	return fmt.Errorf("%w (configd restarted: the database is format %d again)", err, config.DBFormat)
}

func (s *session) rebootInto(ctx context.Context, msg string) error {
	s.printf("%s\n", msg)
	ctx, cancel := apiContext(ctx)
	defer cancel()
	var err error
	if s.opts.Power != nil {
		err = s.opts.Power(ctx, "reboot")
	} else {
		err = s.supervisor.Power(ctx, supervisor.Reboot)
	}
	if err != nil {
		return fmt.Errorf("reboot: %w (the test boot happens at the next reboot)", err)
	}
	s.done = true
	return nil
}

func showSlots(s *session, run upgrade.Running) error {
	card, err := openBootCard()
	if err != nil {
		return err
	}
	defer card.Close()
	boot, err := bootslot.ReadBoot(card.Vol)
	if err != nil {
		s.printf("warning: %v\n", err)
	}
	for _, name := range []string{"a", "b"} {
		sl := upgrade.ReadSlot(card, name)
		what := sl.Problem
		if sl.Manifest != nil {
			what = fmt.Sprintf("%s for %s, signed by %s", sl.Manifest.Version, sl.Manifest.Board, sl.Signer)
		}
		var marks []string
		if name == run.Slot {
			marks = append(marks, "running")
		}
		if name == boot.Committed {
			marks = append(marks, "default")
		}
		s.printf("slot %s: %s", name, what)
		if len(marks) > 0 {
			s.printf(" (%s)", strings.Join(marks, ", "))
		}
		s.printf("\n")
	}
	if m := boot.Last.Message(run.Version); m != "" {
		s.printf("%s\n", m)
	}
	if t, err := upgrade.Trust(card); err == nil && t.AllowUnsigned {
		s.printf("warning: this box accepts unsigned firmware (a developer's card)\n")
	}
	return nil
}
