// Command flashgate is the appliance's multi-call binary: every service and
// command but PID 1. On the card it is /bbin/flashgate inside the u-root
// busybox binary. PID 1 is firmware/init, a small binary of its own (so
// that the process that must never fail maps a few MB, not this one's 13).
//
// The first argument names a subcommand. Each subcommand is a package's
// Main(args) int, so adding a service is one line in the table below (and
// one in firmware/pid1's service table).
package main

import (
	"fmt"
	"os"
	"sort"

	"github.com/flashgate/flashgate/firmware/console"
	"github.com/flashgate/flashgate/firmware/pid1"
	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/ipsec/hwcrypto/cryptobench"
	"github.com/flashgate/flashgate/ipsec/iked"
	"github.com/flashgate/flashgate/services/configd"
	"github.com/flashgate/flashgate/services/hostd"
	"github.com/flashgate/flashgate/services/netd"
	"github.com/flashgate/flashgate/webui"
)

// subcommands maps a subcommand name to its entry point; args excludes the
// subcommand name itself.
var subcommands = map[string]struct {
	main func(args []string) int
	help string
}{
	"supervisor":  {pid1.SupervisorMain, "run the services without booting (development, measurements)"},
	"console":     {console.Main, "serial console login (started by the supervisor)"},
	"configd":     {configd.Main, "the configuration store on the card (started by the supervisor)"},
	"hostd":       {hostd.Main, "host name, time zone, console speed, remote syslog from configd (started by the supervisor)"},
	"netd":        {netd.Main, "interfaces, routes and the firewall (started by the supervisor)"},
	"iked":        {iked.Main, "the IKEv2 daemon (started by the supervisor)"},
	"webui":       {webui.Main, "the HTTPS web UI (started by the supervisor)"},
	"ipsec":       {iked.IPsecMain, "status | up NAME | down NAME: the tunnels, like swanctl --list-sas"},
	"cryptobench": {cryptobench.Main, "crypto engines against Go's own ciphers, like openssl speed"},
	"status":      {supervisor.StatusMain, "services and PID 1 as a table"},
	"service":     {supervisor.ServiceMain, "restart|stop NAME"},
	"logs":        {supervisor.LogsMain, "show a service's log, the kernel's or the supervisor's"},
	"reboot":      {supervisor.PowerMain(supervisor.Reboot), "stop everything in order and reboot"},
	"poweroff":    {supervisor.PowerMain(supervisor.PowerOff), "stop everything in order and power off"},
	"watchdog":    {supervisor.WatchdogMain, "stop-petting: test hook, lets the watchdog reset the board"},
	"access":      {accessMain, "UID:GID[:GROUPS]: what that user (443:443:502 is the web UI, 501:501:502 iked, 503:503 netd) can reach of the local APIs and secrets"},
}

func main() {
	if os.Getpid() == 1 {
		fmt.Fprintln(os.Stderr, "flashgate: this is PID 1, which is firmware/init's job (the card's /init); booting needs init=/init")
		os.Exit(1)
	}
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmd, ok := subcommands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "flashgate: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	os.Exit(cmd.main(os.Args[2:]))
}

func usage() {
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(os.Stderr, "usage: flashgate COMMAND [args]")
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-11s %s\n", n, subcommands[n].help)
	}
}
