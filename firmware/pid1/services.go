package pid1

import (
	"os"
	"strconv"
	"time"

	"github.com/flashgate/flashgate/firmware/supervisor"
)

// consoleSpec is the console getty's device and what its banner shows.
type consoleSpec struct {
	Device  string // "ttyS0"; "" for no console getty
	Baud    int
	Board   string // also tells configd whose ports its defaults name
	Version string
}

// serviceTable is what PID 1 supervises, in start order (see
// supervisor.Service: a service may depend only on services declared before
// it). It declares only services whose code exists in the binary, so the
// status table never lists something that cannot run.
//
// The intended order is configd, hostd, netd, iked, webui, console. To add a
// service: give its package a Main(args []string) int, add it to the
// subcommand table in firmware/flashgate, and declare it here after the
// services it needs, e.g.
//
//	{Name: "netd", Path: exe, Args: []string{"netd"}, After: []string{"configd"}},
//
// The console does not depend on the others: a box whose configd crashes
// must still give its admin a login.
// godebug restores the current Go release's behaviour in every service. The
// u-root busybox build compiles the firmware as a GOPATH-mode program, which
// gets the GODEBUG defaults of Go 1.20: ServeMux method patterns switched
// off (configd's, netd's and iked's APIs answered 404 to every route) and
// old TLS settings.
const godebug = "GODEBUG=httpmuxgo121=0,tlsrsakex=0,tls3des=0,tls10server=0"

// modulesLoaded is the supervisor condition PID 1 provides once the
// service modules (NICs, netfilter, XFRM, crypto) are loaded; see
// moduleStages. netd and iked need them from their first moment; configd,
// the web UI and the console do not, and start while they load.
const modulesLoaded = "modules"

// localtimePath is the box's time zone, which hostd keeps with the
// configuration: where Go (time.Local), busybox and musl look when TZ is
// not set.
const localtimePath = "/etc/localtime"

func serviceTable(exe string, c consoleSpec) []supervisor.Service {
	env := []string{"PATH=/bbin:/bin:/sbin:/usr/bin:/usr/sbin", "HOME=/", godebug}
	const configdSock = "/run/flashgate/configd.sock"
	// configd writes the defaults of a first boot or a factory reset, which
	// name the board's own ports; it falls back to eth0/eth1 (and says so)
	// for a board it does not know.
	configdArgs := []string{"configd"}
	if c.Board != "" {
		configdArgs = append(configdArgs, "-board", c.Board)
	}
	table := []supervisor.Service{
		// configd owns the database on the card; everything else reads it.
		{Name: "configd", Path: exe, Args: configdArgs, Env: env, Restart: supervisor.RestartAlways},
		// hostd applies the host name, time zone, remote syslog and
		// console speed; it changes only what its flags name, so the
		// appliance's paths are given here and nowhere else.
		{Name: "hostd", Path: exe, Args: hostdArgs(configdSock, c), Env: env,
			After: []string{"configd"}, Restart: supervisor.RestartAlways},
		// netd and iked follow configd's watch stream, and wait for it
		// by themselves when it restarts.
		// netd keeps the box's resolver with the WAN lease's DNS servers
		// (netd.DefaultResolvConf; it leaves the file alone unless told).
		{Name: "netd", Path: exe, Args: []string{"netd", "-configd", configdSock, "-resolv-conf", "/etc/resolv.conf"}, Env: env,
			After: []string{"configd"}, Needs: []string{modulesLoaded}, Restart: supervisor.RestartAlways},
		{Name: "iked", Path: exe, Args: []string{"iked", "-configd", configdSock}, Env: env,
			After: []string{"configd"}, Needs: []string{modulesLoaded}, Restart: supervisor.RestartAlways,
			StopTimeout: 3 * time.Second},
		// The web UI gets configd's restricted API, which hands out no
		// secrets (services/configd/restricted.go).
		{Name: "webui", Path: exe, Args: []string{"webui", "-configd", "/run/flashgate/configd-web.sock"}, Env: env,
			After: []string{"configd"}, Restart: supervisor.RestartAlways},
	}
	if c.Device != "" {
		table = append(table, supervisor.Service{
			Name: "console",
			Path: exe,
			Args: []string{"console", "-device", c.Device, "-baud", strconv.Itoa(c.Baud),
				"-board", c.Board, "-version", c.Version},
			Env:         []string{"PATH=/bbin:/bin:/sbin:/usr/bin:/usr/sbin", "HOME=/", "TERM=vt100", godebug},
			Restart:     supervisor.RestartAlways,
			StopTimeout: 2 * time.Second,
		})
	}
	return table
}

// hostdArgs are hostd's flags on the appliance. -console-baud is the speed
// the console getty starts at, which an unset console_baud means; without
// a getty hostd leaves the speed alone.
func hostdArgs(configdSock string, c consoleSpec) []string {
	args := []string{"hostd", "-configd", configdSock, "-supervisor", supervisor.SocketPath,
		"-hostname", "-localtime", localtimePath}
	if c.Device != "" {
		args = append(args, "-console-baud", strconv.Itoa(c.Baud))
	}
	return args
}

// firmwareBinary is the path services are started from: the busybox
// symlink on the appliance, this executable elsewhere.
func firmwareBinary() string {
	const onAppliance = "/bbin/flashgate"
	if _, err := os.Stat(onAppliance); err == nil {
		return onAppliance
	}
	if exe, err := os.Executable(); err == nil {
		return exe
	}
	return onAppliance
}
