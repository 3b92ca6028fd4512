// Command init is the appliance's PID 1: it mounts the file systems, loads
// the board's modules, mounts the config partition, pets the watchdog, and
// supervises the services, which run from the multi-call binary
// /bbin/flashgate (see firmware/pid1 and firmware/supervisor).
//
// It is a binary of its own rather than a subcommand of /bbin/flashgate so
// that the one process that must never fail is small: it links neither
// net/http nor the configuration store, maps about 3 MB instead of 13, and
// shares no code path with the services' parsers. The image builder puts it
// at /bin/init, and u-root's -initcmd links /init to it.
package main

import (
	"os"

	"github.com/flashgate/flashgate/firmware/pid1"
)

func main() {
	os.Exit(pid1.Main(os.Args[1:]))
}
