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
	"slices"
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
	"configd":     {configdMain, "the configuration store on the card, and hostd beside it after +hostd (started by the supervisor)"},
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

// configdMain runs configd, and hostd beside it in the same process when
// its arguments hold pid1.HostdMark and hostd's own after it. Both run as root
// and face no network: hostd applies a few settings from configd's watch
// stream and sleeps, and a Go process of its own cost it about 1 MB of
// the box's RAM, the runtime and the package initialisers of this binary
// (docs/architecture.md, "The appliance's memory"), and the small boards
// its start-up's CPU at boot. hostd still talks to configd through its
// socket, as any service does, and keeps its own log prefix.
func configdMain(args []string) int {
	i := slices.Index(args, pid1.HostdMark)
	if i < 0 {
		return configd.Main(args)
	}
	return beside(configd.Main, args[:i], hostd.Beside, args[i+1:])
}

// beside runs main and companion, each with its arguments, in this
// process. The process's status is main's: the companion ends with it. A
// companion that fails on its own (bad flags) ends the process with its
// status, so that the supervisor says so and restarts both; one that ends
// cleanly (the process got SIGTERM) waits for main.
func beside(main func([]string) int, mainArgs []string, companion func([]string) int, companionArgs []string) int {
	mainDone, companionDone := make(chan int, 1), make(chan int, 1)
	go func() { companionDone <- companion(companionArgs) }()
	go func() { mainDone <- main(mainArgs) }()
	select {
	case code := <-mainDone:
		return code
	case code := <-companionDone:
		if code != 0 {
			return code
		}
		return <-mainDone
	}
}
