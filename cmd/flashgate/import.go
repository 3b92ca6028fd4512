package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/config/importer"
	"github.com/flashgate/flashgate/upgrade/remote"
)

// runImport is `flashgate import FILE`: it reads an isakmpd.conf,
// swanctl.conf or ipsec.conf, prints the tunnels it makes and every line it
// could not carry over with the reason, and with -box puts the tunnels
// into that box's candidate over its JSON API (as `flashgate upgrade`
// talks to boxes); the admin reviews and commits them there.
func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("import", stderr)
	format := fs.String("format", "", "isakmpd.conf, swanctl.conf or ipsec.conf (default: recognize it)")
	box := fs.String("box", "", "save the tunnels into this box's candidate: its web UI, https://ADDR (default: only print them)")
	fp := fs.String("fingerprint", os.Getenv("FLASHGATE_FINGERPRINT"), "SHA-256 of the box's certificate; $FLASHGATE_FINGERPRINT")
	user := fs.String("user", "admin", "admin account")
	pwFile := fs.String("password-file", "", "file holding the password (default: $FLASHGATE_PASSWORD)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: flashgate import [flags] FILE")
		fs.PrintDefaults()
	}
	var file string
	if len(args) > 0 && !strings.HasPrefix(args[len(args)-1], "-") {
		file, args = args[len(args)-1], args[:len(args)-1]
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if file == "" {
		fs.Usage()
		return errUsage
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var res *importer.Result
	if *format == "" {
		res, err = importer.Import(data)
	} else {
		var f importer.Format
		if f, err = importer.ParseFormat(*format); err == nil {
			res, err = importer.ImportAs(f, data)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	printImport(stdout, file, res)
	if *box == "" || len(res.Tunnels) == 0 {
		return nil
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
	b := &remote.Box{URL: *box, Fingerprint: *fp, User: *user, Password: password}
	if err := b.Login(ctx); err != nil {
		return err
	}
	if err := b.ImportTunnels(ctx, res.Tunnels); err != nil {
		return err
	}
	for _, t := range res.Tunnels {
		fmt.Fprintf(stdout, "saved tunnel %s in the box's candidate\n", t.Name)
	}
	fmt.Fprintln(stdout, "review the pending changes on the box and commit them to apply")
	return nil
}

// printImport shows the tunnels in the configuration's text form (PSKs
// redacted), weak proposals, and the lines not imported.
func printImport(w io.Writer, file string, res *importer.Result) {
	fmt.Fprintf(w, "%s (%s): %d tunnel(s)\n", file, res.Format, len(res.Tunnels))
	c := &config.Config{Tunnels: res.Tunnels}
	for _, l := range c.Lines() {
		fmt.Fprintf(w, "  %s\n", l)
	}
	for _, t := range res.Tunnels {
		for _, wp := range t.WeakProposals() {
			fmt.Fprintf(w, "  weak: tunnel %s %s proposal %s (%s)\n", t.Name, wp.Kind, wp.Proposal, wp.Algorithms())
		}
	}
	if problems := importer.CheckTunnels(config.Default(), res.Tunnels); len(problems) > 0 {
		fmt.Fprintln(w, "a commit would refuse (on a box with the default configuration):")
		for _, t := range res.Tunnels {
			for _, p := range problems[t.Name] {
				fmt.Fprintf(w, "  %s\n", p)
			}
		}
	}
	if len(res.Unmapped) == 0 {
		fmt.Fprintln(w, "every line was carried over")
		return
	}
	fmt.Fprintf(w, "%d line(s) not imported:\n", len(res.Unmapped))
	for _, u := range res.Unmapped {
		fmt.Fprintf(w, "  %d: %s\n      %s\n", u.Line, u.Text, u.Reason)
	}
}
