package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/images"
)

// webUIPort is the host port forwarded to the appliance's https port.
const webUIPort = 8443

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	var f imageFlags
	f.register(fs, "qemu")
	image := fs.String("image", "", "boot this image instead of building one")
	if err := parse(fs, args); err != nil {
		return err
	}
	board, err := boards.Lookup(f.board)
	if err != nil {
		return err
	}
	if board.QEMU == nil {
		return fmt.Errorf("board %s is real hardware: run boots emulated boards only (qemu, qemu-x86_64); use image and flash for %s", board.Name, board.Name)
	}
	if err := images.CheckQEMUTools(board.QEMU.Binary); err != nil {
		return err
	}
	if *image == "" {
		// The build is cached where it can be (kernel, u-root) and
		// reproducible, so building every time costs seconds and never
		// boots stale firmware.
		rep, err := buildImage(ctx, f, stderr)
		if err != nil {
			return err
		}
		rep.Write(stderr)
		*image = rep.Image
	} else if _, err := os.Stat(*image); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	card := filepath.Join(f.out, "run", board.Name+".img")
	reset, err := images.PrepareRunCard(ctx, *image, card)
	if err != nil {
		return err
	}
	if reset {
		fmt.Fprintf(stderr, "the partition layout changed: %s was replaced and its configuration reset\n", card)
	}
	qargs, err := images.QEMUConfig{Board: board, Image: card, Serial: "mon:stdio", WebUIPort: webUIPort}.Args()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "booting %s (configuration persists in %s)\nweb UI: https://127.0.0.1:%d   quit: Ctrl-A X\n", board.Name, card, webUIPort)
	cmd := exec.CommandContext(ctx, qargs[0], qargs[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("qemu: %w", err)
	}
	return nil
}
