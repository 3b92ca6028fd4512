package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
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
	// Refuse the whole import when a name is taken: nothing configured is
	// overwritten, and nothing is half imported.
	var existing []struct {
		Name string `json:"name"`
	}
	if err := b.Get(ctx, "/api/v1/tunnels", &existing); err != nil {
		return fmt.Errorf("list the box's tunnels: %w", err)
	}
	var clash []string
	for _, t := range res.Tunnels {
		for _, e := range existing {
			if e.Name == t.Name {
				clash = append(clash, t.Name)
			}
		}
	}
	if len(clash) > 0 {
		return fmt.Errorf("the box already has tunnels called %s; rename or delete them first (nothing was imported)", strings.Join(clash, ", "))
	}
	for _, t := range res.Tunnels {
		if err := b.Put(ctx, "/api/v1/tunnels/"+url.PathEscape(t.Name), tunnelBody(t)); err != nil {
			return fmt.Errorf("save tunnel %s: %w", t.Name, err)
		}
		fmt.Fprintf(stdout, "saved tunnel %s in the box's candidate\n", t.Name)
	}
	fmt.Fprintln(stdout, "review the pending changes on the box and commit them to apply")
	return nil
}

// tunnelBody is a tunnel as the box's PUT /api/v1/tunnels/NAME takes it.
func tunnelBody(t config.Tunnel) map[string]any {
	strs := func(l []config.Prefix) []string {
		out := make([]string, len(l))
		for i, p := range l {
			out[i] = p.String()
		}
		return out
	}
	return map[string]any{
		"enabled": t.Enabled, "remote_address": t.RemoteAddress.String(), "local_address": t.LocalAddress.String(),
		"remote_id": t.RemoteID, "local_id": t.LocalID, "psk": t.PSK.Reveal(),
		"local_subnets": strs(t.LocalSubnets), "remote_subnets": strs(t.RemoteSubnets),
		"ike_proposals": t.IKEProposals, "esp_proposals": t.ESPProposals,
		"start_action": t.StartAction, "data_plane": t.DataPlane,
		"ike_lifetime": t.IKELifetime.String(), "child_lifetime": t.ChildLifetime.String(),
		"dpd_interval": t.DPDInterval.String(), "dpd_timeout": t.DPDTimeout.String(),
		"ike_version": fmt.Sprint(int(t.IKEVersion.Or2())), "legacy_algorithms": t.LegacyAlgorithms,
	}
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
