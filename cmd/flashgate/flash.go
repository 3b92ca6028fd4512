package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/flashgate/flashgate/images"
)

// stdin is where flash reads the confirmation; a variable for tests.
var stdin io.Reader = os.Stdin

func runFlash(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("flash", stderr)
	image := fs.String("image", "", "card image to write (out/flashgate-<board>-<version>.img)")
	dev := fs.String("dev", "", "the card's whole-disk device, e.g. /dev/sdb")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	force := fs.Bool("force", false, fmt.Sprintf("write to a device larger than %d GiB", images.DefaultFlashLimit>>30))
	roots := images.SystemRoots
	fs.StringVar(&roots.Sys, "sys-root", roots.Sys, "sysfs root (for tests)")
	fs.StringVar(&roots.Proc, "proc-root", roots.Proc, "procfs root (for tests)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *image == "" || *dev == "" {
		fmt.Fprintln(stderr, "flashgate flash: -image and -dev are required")
		fs.Usage()
		return errUsage
	}
	fi, err := os.Stat(*image)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	card, err := images.InspectCard(roots, *dev)
	if err != nil {
		return err
	}
	if err := card.Check(roots, images.DefaultFlashLimit, *force); err != nil {
		return err
	}
	if err := card.CheckFits(fi.Size()); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "card  %s\nimage %s (%d bytes)\n", card, *image, fi.Size())
	if !*yes {
		fmt.Fprintf(stdout, "Everything on %s will be lost. Type yes to write: ", card.Dev)
		line, _ := bufio.NewReader(stdin).ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			return fmt.Errorf("not confirmed; %s was not touched", card.Dev)
		}
	}
	if err := card.Write(ctx, *image, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s written and verified; it can be removed\n", card.Dev)
	return nil
}
