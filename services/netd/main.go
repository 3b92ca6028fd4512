package netd

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd"
	"github.com/flashgate/flashgate/services/configd/client"
)

// DefaultSocket is where netd serves its local API.
const DefaultSocket = "/run/flashgate/netd.sock"

// sections are the parts of the configuration netd reconciles.
var sections = []string{"interfaces", "routes", "firewall", "tunnels"}

// Main runs netd: `flashgate netd [-socket path] [-configd path] [-board name] [-resolv-conf path]`.
// With -print it prints the firewall the current configuration gives, in
// nft syntax, and exits without changing anything.
func Main(args []string) int {
	fs := flag.NewFlagSet("netd", flag.ContinueOnError)
	socket := fs.String("socket", DefaultSocket, "unix socket of netd's local API")
	configdSocket := fs.String("configd", "/run/flashgate/configd.sock", "unix socket of configd")
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
	cl := client.New(*configdSocket)

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

	ln, err := listenUnix(*socket)
	if err != nil {
		log.Printf("netd: %v", err)
		return 1
	}
	srv := &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	cfg, source := firstConfig(ctx, cl, board, *configdWait)
	log.Printf("netd: applying %s", source)
	d.SetConfig(cfg, 0, source)
	applied := cfg
	d.Time.SetServers(cfg.System.NTPServers)
	go d.Time.Run(ctx)
	go d.Time.FollowConfig(ctx, cl)

	watch := cl.Watch(ctx)
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
		case ch, ok := <-watch:
			if !ok {
				return 0
			}
			if !slices.ContainsFunc(ch.Sections, func(s string) bool { return slices.Contains(sections, s) }) {
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			cfg, rev, err := cl.Running(rctx)
			cancel()
			if err != nil {
				log.Printf("netd: read the running configuration after %s: %v", ch, err)
				continue
			}
			// The watch starts with a notice of the current revision,
			// which is usually the one just applied: applying it again
			// would only take the CPU from the rest of the boot.
			if bytes.Equal(cfg.JSON(), applied.JSON()) {
				continue
			}
			log.Printf("netd: applying configuration revision %d (%s)", rev, ch.Reason)
			d.SetConfig(cfg, rev, fmt.Sprintf("configd revision %d", rev))
			applied = cfg
		}
	}
}

// firstConfig asks configd for the running configuration, for up to wait,
// and falls back to the board's defaults so that the box is protected and
// reachable from the LAN even without configd.
func firstConfig(ctx context.Context, cl *client.Client, b boards.Board, wait time.Duration) (*config.Config, string) {
	deadline := time.Now().Add(wait)
	var lastErr error
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		cfg, rev, err := cl.Running(rctx)
		cancel()
		if err == nil {
			return cfg, fmt.Sprintf("configd revision %d", rev)
		}
		lastErr = err
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	return configd.BoardDefaults(b), fmt.Sprintf("the board's defaults (configd unreachable: %v)", lastErr)
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

// listenUnix listens on a fresh socket at path, readable by root's group
// only (the web UI and the console run as root on the appliance).
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("socket permissions: %w", err)
	}
	return ln, nil
}
