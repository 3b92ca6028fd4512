// Command flashgate is the appliance's one multi-call binary. On the card it
// is /bbin/flashgate inside the u-root busybox binary and /init links to it.
//
// Running as PID 1 (or invoked as "init") it brings the box up; otherwise the
// first argument names a subcommand. Each subcommand is a package's
// Main(args) int, so adding a service is one line in the table below.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/flashgate/flashgate/firmware/pid1"
)

// subcommands maps a subcommand name to its entry point. args excludes the
// subcommand name itself.
var subcommands = map[string]func(args []string) int{
	"init": pid1.Main,
}

func main() {
	if os.Getpid() == 1 || filepath.Base(os.Args[0]) == "init" {
		os.Exit(pid1.Main(os.Args[1:]))
	}
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	run, ok := subcommands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "flashgate: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	os.Exit(run(os.Args[2:]))
}

func usage() {
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: flashgate <command> [args]\ncommands: %v\n", names)
}
