package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/flashgate/flashgate/upgrade/remote"
)

// runUpgrade sends an upgrade file to a box over its JSON API and follows
// the test boot to its end.
func runUpgrade(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("upgrade", stderr)
	box := fs.String("box", "", "the box's web UI, https://ADDR")
	image := fs.String("image", "", "the upgrade file (out/flashgate-<board>-<version>.fgup)")
	fp := fs.String("fingerprint", os.Getenv("FLASHGATE_FINGERPRINT"), "SHA-256 of the box's certificate (System page, console banner); $FLASHGATE_FINGERPRINT")
	user := fs.String("user", "admin", "admin account")
	pwFile := fs.String("password-file", "", "file holding the password (default: $FLASHGATE_PASSWORD)")
	downgrade := fs.Bool("confirm-downgrade", false, "install a build older than the running one")
	noReboot := fs.Bool("no-reboot", false, "write the slot and arm the test boot, but do not reboot now")
	wait := fs.Duration("wait", 10*time.Minute, "how long to follow the test boot (0: do not wait)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *box == "" || *image == "" {
		fmt.Fprintln(stderr, "flashgate upgrade: -box and -image are required")
		fs.Usage()
		return errUsage
	}
	password := os.Getenv("FLASHGATE_PASSWORD")
	if *pwFile != "" {
		b, err := os.ReadFile(*pwFile)
		if err != nil {
			return err
		}
		password = string(trimNewline(b))
	}
	if password == "" {
		return errors.New("no password: give -password-file or $FLASHGATE_PASSWORD")
	}
	start := time.Now()
	b := &remote.Box{URL: *box, Fingerprint: *fp, User: *user, Password: password}
	if err := b.Login(ctx); err != nil {
		return err
	}
	plan, err := b.Inspect(ctx, *image, *downgrade)
	fmt.Fprintf(stdout, "file: flashgate %s for %s, signer %s, %d bytes\n", plan.Version, plan.Board, plan.Signer, plan.Size)
	if err != nil {
		return fmt.Errorf("refused before anything was written: %w", err)
	}
	if plan.Config != "" {
		fmt.Fprintf(stdout, "%s\n", plan.Config)
	}
	fmt.Fprintf(stdout, "writing slot %s\n", plan.Target)
	lastPct := int64(-1)
	plan, err = b.Upload(ctx, *image, *downgrade, !*noReboot, func(sent, total int64) {
		if pct := sent * 100 / total; pct/10 != lastPct/10 {
			lastPct = pct
			fmt.Fprintf(stderr, "  sent %d%%\n", pct)
		}
	})
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	fmt.Fprintf(stdout, "slot %s written and verified; test boot armed\n", plan.Target)
	if *noReboot || *wait == 0 {
		fmt.Fprintln(stdout, "reboot the box to test-boot it (it falls back by itself if the new firmware is unhealthy)")
		return nil
	}
	fmt.Fprintln(stdout, "the box reboots into the test boot")
	err = b.WaitResult(ctx, plan.Version, *wait, func(s string) { fmt.Fprintf(stderr, "  %s\n", s) })
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "upgraded to %s: committed after its health checks (%.0f s from the start of the upload)\n", plan.Version, time.Since(start).Seconds())
	return nil
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
