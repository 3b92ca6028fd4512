package netd

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/gomem"
	"github.com/flashgate/flashgate/internal/localapi"
	"github.com/flashgate/flashgate/services/configd/configdapi"
	"github.com/flashgate/flashgate/services/netd/netdapi"
)

// DefaultSocket is where netd serves its local API.
const DefaultSocket = netdapi.Socket

// Main runs netd: `flashgate netd [-socket path] [-configd path] [-board name] [-resolv-conf path]`.
// With -print it prints the firewall the current configuration gives, in
// nft syntax, and exits without changing anything.
func Main(args []string) int {
	fs := flag.NewFlagSet("netd", flag.ContinueOnError)
	socket := fs.String("socket", DefaultSocket, "unix socket of netd's local API")
	webSocket := fs.String("web-socket", "", "unix socket of the part of the API the web UI may use, the kernel's links (empty: none; the appliance passes "+netdapi.WebSocket+")")
	webGroup := fs.Int("web-group", -1, "group of -web-socket, whose members (the web UI's user) may use it besides root; -1: root only")
	configdSocket := fs.String("configd", configdapi.Socket, "unix socket of configd")
	boardName := fs.String("board", "", "board name (default: flashgate.board= on the kernel command line)")
	printOnly := fs.Bool("print", false, "print the ruleset of the running configuration and exit")
	resync := fs.Duration("resync", 30*time.Second, "how often links, addresses and routes are checked again")
	// Empty by default: a netd started by hand or by a test in a network
	// namespace shares the host's file system and must not rewrite its
	// resolver. PID 1's service table passes DefaultResolvConf.
	resolvConf := fs.String("resolv-conf", "", "resolver configuration to keep with the WAN DHCP lease's DNS servers; the appliance passes "+DefaultResolvConf+" (empty: leave it alone)")
	configdWait := fs.Duration("configd-wait", 10*time.Second, "how long to wait for configd at start before applying the board's defaults")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log.SetPrefix("")
	log.SetFlags(0)
	board, why := resolveBoard(*boardName)
	if why != "" {
		log.Printf("netd: %s", why)
	}
	cl := configdapi.New(*configdSocket)

	if *printOnly {
		cfg, source := firstConfig(context.Background(), cl, board, 2*time.Second)
		d := FromConfig(cfg)
		fmt.Printf("# %s (%s)\n", source, board.Name)
		if err := d.Validate(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for _, s := range Build(&d.Firewall) {
			fmt.Println(s)
		}
		return 0
	}

	note, _ := gomem.Follow(0)
	log.Printf("netd: garbage collector: %s", note)
	gomem.ReportOnSignal(func(f string, a ...any) { log.Printf("netd: "+f, a...) })
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	nl, err := NewNetlink()
	if err != nil {
		log.Printf("netd: %v", err)
		return 1
	}
	defer nl.Close()
	d := NewDaemon(ctx, board, &Reconciler{NFT: NewNFTables(), Netlink: nl})
	d.ResolvConf = *resolvConf
	d.Time = NewTimeSync(SystemClock{})

	ln, err := localapi.Listen(*socket, localapi.Group(-1))
	if err != nil {
		log.Printf("netd: %v", err)
		return 1
	}
	go localapi.Serve(ctx, ln, d.Handler())
	if *webSocket != "" {
		if err := serveWeb(ctx, d, *webSocket, *webGroup); err != nil {
			log.Printf("netd: %v", err)
			return 1
		}
	}

	cfg, source := firstConfig(ctx, cl, board, *configdWait)
	log.Printf("netd: applying %s", source)
	d.SetConfig(cfg, 0, source)
	d.Time.SetServers(cfg.System.NTPServers)
	go d.Time.Run(ctx)
	go configdapi.Follow(ctx, cl, following(d.SetConfig, d.Time, cfg))

	tick := time.NewTicker(*resync)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			// The firewall stays in the kernel: stopping netd must not
			// open the box.
			log.Printf("netd: stopping; the firewall stays in place")
			return 0
		case <-tick.C:
			d.Reconcile()
		}
	}
}

// reconciled are the sections of the configuration netd's reconcilers
// apply; of the system section it follows only the NTP servers.
var reconciled = []config.Section{config.SectionInterfaces, config.SectionRoutes, config.SectionFirewall, config.SectionTunnels}

// following is how netd follows configd, on one watch stream: a change of
// its reconcilers' sections goes to set (Daemon.SetConfig), unless the
// configuration is the one applied last (the watch starts with a notice
// of the current revision, which is usually the one just applied: applying
// it again would only take the CPU from the rest of the boot), and a
// change of the system section gives the time sync its servers.
func following(set func(*config.Config, uint64, string) error, ts *TimeSync, applied *config.Config) configdapi.Following {
	return configdapi.Following{
		Name:     "netd",
		Sections: append([]config.Section{config.SectionSystem}, reconciled...),
		Logf:     log.Printf,
		Apply: func(ctx context.Context, cfg *config.Config, rev uint64, ch config.Change) error {
			if ch.Touches(config.SectionSystem) && ts != nil {
				ts.SetServers(cfg.System.NTPServers)
			}
			if !ch.Touches(reconciled...) || bytes.Equal(cfg.JSON(), applied.JSON()) {
				return nil
			}
			log.Printf("netd: applying configuration revision %d (%s)", rev, ch.Reason)
			// A partial apply is not tried again here: the resync does
			// that, and says why.
			set(cfg, rev, fmt.Sprintf("configd revision %d", rev))
			applied = cfg
			return nil
		},
	}
}

// firstConfig asks configd for the running configuration, for up to wait,
// and falls back to the board's defaults so that the box is protected and
// reachable from the LAN even without configd.
func firstConfig(ctx context.Context, src configdapi.Source, b boards.Board, wait time.Duration) (*config.Config, string) {
	cfg, rev, err := configdapi.WaitRunning(ctx, src, wait)
	if err != nil {
		return config.BoardDefaults(b), fmt.Sprintf("the board's defaults (configd unreachable: %v)", err)
	}
	return cfg, fmt.Sprintf("configd revision %d", rev)
}

// resolveBoard finds the board from the flag or the kernel command line.
// An unknown board is not fatal: netd then runs config.Default's ports.
func resolveBoard(name string) (boards.Board, string) {
	if name == "" {
		if b, err := os.ReadFile("/proc/cmdline"); err == nil {
			for _, f := range strings.Fields(string(b)) {
				if v, ok := strings.CutPrefix(f, "flashgate.board="); ok {
					name = v
				}
			}
		}
	}
	if name == "" {
		return boards.Board{Name: "unknown"}, "no board given (-board or flashgate.board=): using eth0 as WAN and eth1 as LAN"
	}
	b, err := boards.Lookup(name)
	if err != nil {
		var unsupported *boards.UnsupportedError
		if errors.As(err, &unsupported) {
			return b, err.Error() + "; configuring its ports anyway"
		}
		return boards.Board{Name: name}, err.Error() + ": using eth0 as WAN and eth1 as LAN"
	}
	return b, ""
}
