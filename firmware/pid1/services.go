package pid1

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/internal/paths"
	"golang.org/x/sys/unix"
)

// The web UI's user and group on the appliance. The initramfs has no
// /etc/passwd: the numbers are the identity (443, for its port), and
// nothing else on the box runs as them. The web UI runs with them and no
// capabilities; what it may reach is given to this group (docs/architecture.md,
// "Who can reach what"):
//
//   - configd-web.sock (configd's restricted API) and supervisor-web.sock
//     (services, logs, reboot): root:443, 0660;
//   - iked/iked.sock, through the supplementary group ikedAPIGID, and
//     netd/netd-web.sock (the kernel's links), through netdWebGID;
//   - webUIRunDir (its certificate when configd cannot keep it, the
//     fingerprint for the console): 443:443, 0700;
//   - its listeners on 443 and 80, which PID 1 binds and hands over as
//     fds 3 and 4.
const (
	webUIUID = 443
	webUIGID = 443
)

// iked's user and group. iked parses every packet that reaches UDP 500 and
// 4500 from the WAN, so it runs as its own user with only what it needs:
//
//   - CAP_NET_ADMIN (XFRM states and policies, the ipsecN interfaces and
//     their routes, the TUN of the userspace data plane), CAP_NET_BIND_SERVICE
//     (ports 500 and 4500), CAP_NET_RAW (the userspace plane's raw ESP
//     socket); no other capability of root's;
//   - configd-read.sock (the running configuration with its secrets,
//     nothing that changes it): root:501, 0660;
//   - its directory paths.IkedRunDir (501:502, 0750) for iked.sock
//     (501:502, 0660).
//
// ikedAPIGID is the group of iked's API: iked and the web UI are members
// (supplementary), nobody else. The web UI's own group would not do: it
// opens configd-web.sock, which can change the configuration.
const (
	ikedUID    = 501
	ikedGID    = 501
	ikedAPIGID = 502
)

// netd's user and group. netd parses what the network sends it (DHCP
// offers and acknowledgements on the WAN, DHCP requests from the LAN, NTP
// replies), so it runs as its own user with only what it needs:
//
//   - CAP_NET_ADMIN (links, addresses, routes, the nftables firewall over
//     netlink, and the forwarding sysctls under /proc/sys/net, which the
//     kernel lets a network administrator write), CAP_NET_BIND_SERVICE (the
//     DHCP servers' port 67), CAP_NET_RAW (the DHCP client's packet socket,
//     the servers' SO_BINDTODEVICE, ARP announcements) and CAP_SYS_TIME
//     (its NTP client sets the clock); no other capability of root's;
//   - configd-redacted.sock (the running configuration without its
//     secrets: netd needs no key), root:503, 0660;
//   - its directory paths.NetdRunDir (503:503, 0755) for netd.sock (0600:
//     root and netd) and resolv.conf (0644), which /etc/resolv.conf links
//     to, since netd may not write /etc.
//
// netdWebGID is the group of netd's socket for the web UI (netd-web.sock,
// the kernel's links): netd and the web UI are members (supplementary),
// nobody else, as for iked's API.
const (
	netdUID    = 503
	netdGID    = 503
	netdWebGID = 504
)

// webUIRunDir is the web UI's own directory in RAM.
const webUIRunDir = paths.WebUIRunDir

// webListeners are the sockets PID 1 binds for the web UI, which cannot
// bind ports below 1024 itself. nil: not bound (the UI then tries itself,
// and says why it cannot).
type webListeners struct {
	HTTPS, HTTP *os.File
}

// openWebListeners binds the web UI's ports, 443 and 80 on every address.
// PID 1 keeps the sockets for the life of the box, so a restarted web UI
// gets the same ones and no connection is refused between two runs.
func openWebListeners(httpsAddr, httpAddr string) (webListeners, error) {
	var w webListeners
	for _, l := range []struct {
		addr string
		f    **os.File
	}{{httpsAddr, &w.HTTPS}, {httpAddr, &w.HTTP}} {
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			w.Close()
			return webListeners{}, fmt.Errorf("web UI listener: %w", err)
		}
		f, err := ln.(*net.TCPListener).File() // a duplicate; the listener is not needed
		ln.Close()
		if err != nil {
			w.Close()
			return webListeners{}, fmt.Errorf("web UI listener %s: %w", l.addr, err)
		}
		*l.f = f
	}
	return w, nil
}

// All are the bound sockets.
func (w webListeners) All() []*os.File {
	var fs []*os.File
	for _, f := range []*os.File{w.HTTPS, w.HTTP} {
		if f != nil {
			fs = append(fs, f)
		}
	}
	return fs
}

// Close closes the sockets (tests, and the development supervisor).
func (w webListeners) Close() {
	for _, f := range w.All() {
		f.Close()
	}
}

// prepareWebUIDirs makes the web UI's run directory, its own.
func prepareWebUIDirs(runDir string, uid, gid int) error {
	return ownedDir("web UI directory", runDir, uid, gid, 0o700)
}

// prepareIkedDir makes iked's own directory, where it creates its socket:
// iked's, traversable by the group of its API (the web UI).
func prepareIkedDir(dir string) error {
	return ownedDir("iked's directory", dir, ikedUID, ikedAPIGID, 0o750)
}

// prepareNetdDir makes netd's own directory, where it creates its socket
// and writes the resolver file everybody reads.
func prepareNetdDir(dir string) error {
	return ownedDir("netd's directory", dir, netdUID, netdGID, 0o755)
}

// linkResolvConf makes link (/etc/resolv.conf) a symbolic link to netd's
// resolver file, replacing what was there: netd runs as its own user and
// cannot write /etc, and every resolver on the box reads link.
func linkResolvConf(link, target string) error {
	if cur, err := os.Readlink(link); err == nil && cur == target {
		return nil
	}
	tmp := link + ".flashgate-new"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("resolver link %s: %w", link, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("resolver link %s: %w", link, err)
	}
	return nil
}

// ownedDir makes dir (and its parents, root's) and gives it to uid:gid
// with mode.
func ownedDir(what, dir string, uid, gid int, mode os.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// consoleSpec is the console getty's device and what its banner shows.
type consoleSpec struct {
	Device  string // "ttyS0"; "" for no console getty
	Baud    int
	Board   string // also tells configd whose ports its defaults name
	Version string
}

// godebug restores the current Go release's behaviour in every service. The
// u-root busybox build compiles the firmware as a GOPATH-mode program, which
// gets the GODEBUG defaults of Go 1.20: ServeMux method patterns switched
// off (configd's, netd's and iked's APIs answered 404 to every route) and
// old TLS settings.
const godebug = "GODEBUG=httpmuxgo121=0,tlsrsakex=0,tls3des=0,tls10server=0"

// gogc halves the garbage a service may leave before its collector runs
// (Go's default is 100). Six Go programs sit idle side by side on a 128 MB
// board, and each one's heap may grow to twice what it holds (at least
// 4 MB) before a collection; at 50 it grows by half (at least 2 MB). What
// it costs, collections twice as often, is small at idle and in a commit.
// iked sets its own (GOGC 30, a memory limit: ipsec/iked/gc.go).
const gogc = "GOGC=50"

// modulesLoaded is the supervisor condition PID 1 provides once the
// service modules (NICs, netfilter, XFRM, crypto) are loaded; see
// moduleStages. netd and iked need them from their first moment; configd,
// the web UI and the console do not, and start while they load.
const modulesLoaded = "modules"

// localtimePath is the box's time zone, which hostd keeps with the
// configuration: where Go (time.Local), busybox and musl look when TZ is
// not set.
const localtimePath = "/etc/localtime"

// resolvConfLink is where Go's resolver, musl and busybox read the DNS
// servers: a symbolic link to netd's file (linkResolvConf).
const resolvConfLink = "/etc/resolv.conf"

// consoleWaitsForConfigd bounds how long the console getty waits for
// configd to be ready before it starts anyway. On the emulated qemu board
// configd was ready 2.7 s after its start, on a machine loaded by other
// VMs (the console's prompt followed 0.4 s later).
const consoleWaitsForConfigd = 10 * time.Second

// servicesWaitForConsole bounds how long netd, iked and the web UI wait for configd and the console's first prompt. It is longer than
// consoleWaitsForConfigd plus the getty's own wait for configd, so that
// with a broken configd the console still comes first.
const servicesWaitForConsole = 30 * time.Second

// serviceTable is what PID 1 supervises, in start order (see
// supervisor.Service: a service may depend only on services declared before
// it). It declares only services whose code exists in the binary, so the
// status table never lists something that cannot run.
//
// The boot order is configd, then the console once configd is ready
// (its database open, its sockets served: it notifies), then netd, iked
// and the web UI once the console shows its first prompt (it notifies
// too); hostd runs in configd's process (HostdMark). On the one slow CPU
// of the small boards, starting everything at once had the login prompt wait for five other Go programs
// to start (issue 17); now the admin's prompt gets the CPU first and the
// network follows it. To add a service: give its package a Main(args
// []string) int, add it to the subcommand table in firmware/flashgate, and
// declare it here after the services it needs, e.g.
//
//	{Name: "netd", Path: exe, Args: []string{"netd"}, After: afterConsole},
//
// Every wait is bounded (Service.AfterWait): a box whose configd crashes or
// hangs still gets its console after consoleWaitsForConfigd (the getty
// then waits for configd itself a little longer, and says it does not
// answer) and its web UI, network and tunnels after servicesWaitForConsole.
func serviceTable(exe string, c consoleSpec, web webListeners) []supervisor.Service {
	// iked sets its own collector (ipsec/iked/gc.go); the others get gogc.
	ikedEnv := []string{"PATH=/bbin:/bin:/sbin:/usr/bin:/usr/sbin", "HOME=/", godebug}
	env := append(slices.Clone(ikedEnv), gogc)
	// What netd, iked and the web UI wait for: configd, and the
	// console's first prompt when the box has a console getty.
	afterConsole := []string{"configd"}
	if c.Device != "" {
		afterConsole = append(afterConsole, "console")
	}
	const configdSock = paths.ConfigdSocket
	// configd writes the defaults of a first boot or a factory reset, which
	// name the board's own ports; it falls back to eth0/eth1 (and says so)
	// for a board it does not know.
	configdArgs := []string{"configd", "-web-group", strconv.Itoa(webUIGID), "-read-group", strconv.Itoa(ikedGID),
		"-redacted-group", strconv.Itoa(netdGID)}
	if c.Board != "" {
		configdArgs = append(configdArgs, "-board", c.Board)
	}
	// hostd runs in configd's process (HostdMark).
	configdArgs = append(append(configdArgs, HostdMark), hostdArgs(configdSock, c)...)
	table := []supervisor.Service{
		// configd owns the database on the card; everything else reads it.
		// It notifies its readiness once its database is open: its
		// sockets are bound before that.
		{Name: "configd", Path: exe, Args: configdArgs, Env: env, Restart: supervisor.RestartAlways,
			NotifiesReady: true},
	}
	if c.Device != "" {
		// The getty the admin waits for: it notifies once its first
		// prompt (login, or a first boot's password) is on the line.
		table = append(table, supervisor.Service{
			Name: "console",
			Path: exe,
			Args: []string{"console", "-device", c.Device, "-baud", strconv.Itoa(c.Baud),
				"-board", c.Board, "-version", c.Version},
			Env:           []string{"PATH=/bbin:/bin:/sbin:/usr/bin:/usr/sbin", "HOME=/", "TERM=vt100", godebug, gogc},
			After:         []string{"configd"},
			AfterWait:     consoleWaitsForConfigd,
			NotifiesReady: true,
			Restart:       supervisor.RestartAlways,
			StopTimeout:   2 * time.Second,
		})
	}
	table = append(table, []supervisor.Service{
		// netd and iked follow configd's watch stream, and wait for it
		// by themselves when it restarts.
		// netd keeps the box's resolver with the WAN lease's DNS servers
		// in its own directory, which /etc/resolv.conf links to (it
		// leaves any resolver file alone unless told).
		// Its links are also on a socket of their own for the web UI
		// (netdWebGID), which may not reconcile or read the firewall.
		{Name: "netd", Path: exe, Args: []string{"netd", "-configd", paths.ConfigdRedactedSocket,
			"-socket", paths.NetdSocket, "-resolv-conf", paths.NetdResolvConf,
			"-web-socket", paths.NetdWebSocket, "-web-group", strconv.Itoa(netdWebGID)}, Env: env,
			After: afterConsole, AfterWait: servicesWaitForConsole, Needs: []string{modulesLoaded}, Restart: supervisor.RestartAlways,
			User: &supervisor.User{UID: netdUID, GID: netdGID, Groups: []uint32{netdWebGID},
				Caps: []uintptr{unix.CAP_NET_ADMIN, unix.CAP_NET_BIND_SERVICE, unix.CAP_NET_RAW, unix.CAP_SYS_TIME}},
			Syscalls: supervisor.SyscallsNetworkService},
		{Name: "iked", Path: exe, Args: []string{"iked", "-configd", paths.ConfigdReadSocket,
			"-socket", paths.IkedSocket, "-socket-group", strconv.Itoa(ikedAPIGID)}, Env: ikedEnv,
			After: afterConsole, AfterWait: servicesWaitForConsole, Needs: []string{modulesLoaded}, Restart: supervisor.RestartAlways,
			StopTimeout: 3 * time.Second,
			User: &supervisor.User{UID: ikedUID, GID: ikedGID, Groups: []uint32{ikedAPIGID},
				Caps: []uintptr{unix.CAP_NET_ADMIN, unix.CAP_NET_BIND_SERVICE, unix.CAP_NET_RAW}},
			Syscalls: supervisor.SyscallsNetworkService},
		webUIService(exe, env, web, afterConsole),
	}...)
	return table
}

// webUIService runs the web UI as its own user, with no capabilities, on
// the listeners PID 1 bound, and with the restricted sockets of configd
// (which hands out no secrets, services/configd/restricted.go) and of the
// supervisor.
func webUIService(exe string, env []string, web webListeners, after []string) supervisor.Service {
	args := []string{"webui", "-configd", paths.ConfigdWebSocket, "-supervisor", supervisor.WebSocketPath,
		"-cert-dir", webUIRunDir, "-cert-fallback-dir", "", "-fingerprint-file", webUIRunDir + "/fingerprint"}
	var files []*os.File
	if web.HTTPS != nil && web.HTTP != nil {
		files = []*os.File{web.HTTPS, web.HTTP}
		args = append(args, "-listen-fd", "3", "-http-fd", "4")
	}
	return supervisor.Service{Name: "webui", Path: exe, Args: args, Env: env,
		After: after, AfterWait: servicesWaitForConsole, Restart: supervisor.RestartAlways,
		User: &supervisor.User{UID: webUIUID, GID: webUIGID, Groups: []uint32{ikedAPIGID, netdWebGID}}, ExtraFiles: files,
		Syscalls: supervisor.SyscallsNetworkService}
}

// HostdMark, among configd's arguments, starts hostd's own: the
// multi-call binary then runs hostd beside configd, in its process
// (firmware/flashgate's configdMain). Both are root and face no network,
// and hostd, which applies a few settings and sleeps, cost the box about
// 1 MB as a Go process of its own. It starts with configd, before the
// console's prompt: what it does at boot is a few requests to configd
// and the supervisor, not a process's start-up.
const HostdMark = "+hostd"

// hostdArgs are hostd's flags on the appliance, which configd's process
// runs it with. hostd changes only what its flags name, so the
// appliance's paths are given here and nowhere else. -console-baud is
// the speed the console getty starts at, which an unset console_baud
// means; without a getty hostd leaves the speed alone.
func hostdArgs(configdSock string, c consoleSpec) []string {
	args := []string{"-configd", configdSock, "-supervisor", supervisor.SocketPath,
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
