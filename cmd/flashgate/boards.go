package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/flashgate/flashgate/boards"
)

func runBoards(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("boards", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "board\tarch\tkernel\tconsole\tcard\tdescription")
	for _, b := range boards.All() {
		if b.Unsupported != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\tUNSUPPORTED: %s\n", b.Name, b.Unsupported)
			continue
		}
		arch := b.GOARCH
		if b.GO386 != "" {
			arch += "/" + b.GO386
		}
		desc := b.Description
		if len(b.Aliases) > 0 {
			desc += " (also: " + strings.Join(b.Aliases, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s %d\t%d MB\t%s\n", b.Name, arch, b.KernelClass,
			b.Console.Device, b.Console.Baud, b.MinCardMB, desc)
	}
	return tw.Flush()
}
