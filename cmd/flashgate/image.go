package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/images"
)

// imageFlags are the flags image and run share.
type imageFlags struct {
	board, out, version, key string
}

func (f *imageFlags) register(fs interface {
	StringVar(p *string, name, value, usage string)
}, defaultBoard string) {
	fs.StringVar(&f.board, "board", defaultBoard, "board to build for (list: flashgate boards)")
	fs.StringVar(&f.out, "out", "out", "output directory (the kernel cache is out/cache)")
	fs.StringVar(&f.version, "version", "", "firmware version (default: git describe)")
	fs.StringVar(&f.key, "key", os.Getenv("FLASHGATE_SIGNING_KEY"), "signing key from `flashgate keygen` ($FLASHGATE_SIGNING_KEY); without one the image is a developer's, unsigned, and its card accepts unsigned upgrades")
}

func runImage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("image", stderr)
	var f imageFlags
	f.register(fs, "")
	if err := parse(fs, args); err != nil {
		return err
	}
	if f.board == "" {
		fmt.Fprintln(stderr, "flashgate image: -board is required")
		fs.Usage()
		return errUsage
	}
	rep, err := buildImage(ctx, f, stderr)
	if err != nil {
		return err
	}
	rep.Write(stdout)
	return nil
}

// buildImage resolves the board and builds its image.
func buildImage(ctx context.Context, f imageFlags, log io.Writer) (*images.Report, error) {
	board, err := boards.Lookup(f.board)
	if err != nil {
		return nil, err
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	root, err := images.FindRepoRoot(wd)
	if err != nil {
		return nil, err
	}
	version := f.version
	if version == "" {
		version = gitVersion(root)
	}
	key, err := loadSigningKey(f.key)
	if err != nil {
		return nil, err
	}
	b := &images.Builder{RepoRoot: root, OutDir: f.out, Log: log, SigningKey: key}
	return b.Build(ctx, board, version)
}

// gitVersion is `git describe --always --dirty`, as the Makefile computes it,
// or "dev" outside a git tree.
func gitVersion(root string) string {
	cmd := exec.Command("git", "-C", root, "describe", "--always", "--dirty")
	out, err := cmd.Output()
	if v := strings.TrimSpace(string(out)); err == nil && v != "" {
		return v
	}
	return "dev"
}
