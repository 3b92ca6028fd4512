package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/config/importer"
)

// runImport is the console's import: a file on the box (import FILE) or
// lines pasted at the prompt (import, ended by a line with only "."),
// read as isakmpd.conf, swanctl.conf or ipsec.conf. It shows the tunnels,
// their weak proposals and every line not carried over, then asks before
// saving the tunnels into the candidate.
func runImport(ctx context.Context, s *session, args []string) error {
	var data []byte
	switch len(args) {
	case 0:
		s.printf("Paste the isakmpd.conf, swanctl.conf or ipsec.conf; end with a line holding only a dot (.).\n")
		var b strings.Builder
		for {
			line, err := s.readLine("")
			if err != nil {
				return err
			}
			if strings.TrimSpace(line) == "." {
				break
			}
			if b.Len()+len(line) > importer.MaxFileSize {
				return fmt.Errorf("more than the %d KiB an import reads", importer.MaxFileSize>>10)
			}
			b.WriteString(line)
			b.WriteByte('\n')
		}
		data = []byte(b.String())
	case 1:
		st, err := os.Stat(args[0])
		if err != nil {
			return err
		}
		if st.Size() > importer.MaxFileSize {
			return fmt.Errorf("%s: more than the %d KiB an import reads", args[0], importer.MaxFileSize>>10)
		}
		if data, err = os.ReadFile(args[0]); err != nil {
			return err
		}
	default:
		return usageError("import")
	}
	res, err := importer.Import(data)
	if err != nil {
		return err
	}
	s.printf("%s: %d tunnel(s)\n", res.Format, len(res.Tunnels))
	c := &config.Config{Tunnels: res.Tunnels}
	for _, l := range c.Lines() {
		s.printf("  %s\n", l)
	}
	for _, t := range res.Tunnels {
		for _, w := range t.WeakProposals() {
			s.printf("  weak: %s %s proposal %s (%s)\n", t.Name, w.Kind, w.Proposal, w.Algorithms())
		}
	}
	if len(res.Unmapped) == 0 {
		s.printf("Every line was carried over.\n")
	} else {
		s.printf("%d line(s) not imported:\n", len(res.Unmapped))
		for _, u := range res.Unmapped {
			s.printf("  %d: %s\n      %s\n", u.Line, u.Text, u.Reason)
		}
	}
	if len(res.Tunnels) == 0 {
		return errors.New("nothing to import")
	}
	actx, cancel := apiContext(ctx)
	cand, err := s.configd.Candidate(actx)
	cancel()
	if err != nil {
		return err
	}
	for name, problems := range importer.CheckTunnels(cand.Config, res.Tunnels) {
		for _, p := range problems {
			s.printf("  a commit would refuse (%s): %s\n", name, p)
		}
	}
	out, err := importer.Apply(cand.Config, res.Tunnels)
	if err != nil {
		return err
	}
	ok, err := s.confirmWord(fmt.Sprintf("Save %d tunnel(s) into the candidate?", len(res.Tunnels)), "yes")
	if err != nil || !ok {
		return err
	}
	actx, cancel = apiContext(ctx)
	defer cancel()
	if _, err := s.configd.ReplaceCandidate(actx, cand.Etag, out); err != nil {
		return fmt.Errorf("save the tunnels: %w", err)
	}
	s.printf("Saved to the candidate; show changes, then commit to apply.\n")
	return nil
}
