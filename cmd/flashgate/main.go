// Command flashgate is the host tool: it builds card images for the boards
// (image) and their kernels (kernels), boots the qemu board (run), writes an image to a card (flash) and
// lists the boards (boards) and runs the measurements (bench). The Makefile calls it; every failure is one
// sentence on stderr and a non-zero exit status.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/flashgate/flashgate/bench"
)

// subcommand is one verb of the tool. Run gets the arguments after the verb
// and returns the error to print, if any.
type subcommand struct {
	Summary string
	Run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var subcommands = map[string]subcommand{
	"image":   {"build out/flashgate-<board>-<version>.img", runImage},
	"run":     {"build the qemu board's image and boot it in qemu", runRun},
	"flash":   {"write an image to a card, with checks", runFlash},
	"boards":  {"list the boards", runBoards},
	"kernels": {"build (or find cached) every board's kernel", runKernels},
	"bench":   {"run the measurements of make bench (out/bench/results.json)", runBench},
	"keygen":  {"make the Ed25519 key pair that signs upgrade files", runKeygen},
	"upgrade": {"send an upgrade file to a box and follow its test boot", runUpgrade},
	"import":  {"turn an isakmpd.conf, swanctl.conf or ipsec.conf into tunnels (and save them into a box's candidate)", runImport},
}

// errUsage is returned after a flag set printed its own usage.
var errUsage = errors.New("usage")

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" || args[0] == "--help" {
		usage(stderr)
		return 2
	}
	cmd, ok := subcommands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "flashgate: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.Run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
			return 2
		}
		fmt.Fprintf(stderr, "flashgate %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: flashgate <command> [flags]")
	var names []string
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-7s %s\n", n, subcommands[n].Summary)
	}
}

// newFlags makes a subcommand's flag set; parse errors come back as
// errUsage after the flag package printed them.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("flashgate "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flag.ErrHelp
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}

// runBench is `flashgate bench`: the bench package's runner.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if rc := bench.Main(args); rc != 0 {
		return fmt.Errorf("exit status %d", rc)
	}
	return nil
}
