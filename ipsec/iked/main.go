package iked

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/localapi"
	"github.com/flashgate/flashgate/ipsec/hwcrypto"
	"github.com/flashgate/flashgate/ipsec/ike"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
	"github.com/flashgate/flashgate/services/configd/configdapi"
)

// Main is `flashgate iked`: the daemon, standalone with a configuration
// file (the JSON form of the whole flashgate configuration; only its
// tunnels are used) or, on the appliance, fed by configd.
func Main(args []string) int {
	fs := flag.NewFlagSet("iked", flag.ContinueOnError)
	file := fs.String("config", "", "configuration file (the configuration's JSON form, see docs/config.md); SIGHUP reloads it")
	configd := fs.String("configd", "", "configd's socket: follow the running configuration (the appliance's mode)")
	sock := fs.String("socket", ikedapi.DefaultSocket, "local API socket")
	sockGroup := fs.Int("socket-group", -1, "group whose members may use the local API, besides root (the web UI's, on the appliance); -1: root only")
	plane := fs.String("dataplane", "auto", "data plane: auto, xfrm or userspace")
	tun := fs.String("tun", "fgesp0", "TUN interface of the userspace data plane")
	ikePort := fs.Uint("ike-port", 500, "IKE port")
	nattPort := fs.Uint("natt-port", 4500, "NAT-T port")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if (*file == "") == (*configd == "") {
		fmt.Fprintln(os.Stderr, "iked: give the configuration with -config FILE or -configd SOCKET (one of them)")
		return 2
	}
	logger := log.New(os.Stderr, "", log.LstdFlags)
	tuneGC(logger.Printf)
	cfg := &config.Config{}
	if *file != "" {
		var err error
		if cfg, err = loadFile(*file); err != nil {
			logger.Printf("iked: %v", err)
			return 1
		}
	}
	// Offer first what the board's crypto engine runs fast. Detection
	// only reads /proc and /sys: PID 1 has loaded the engines' modules.
	var ranking ike.Ranking
	if report, err := hwcrypto.Detect("/"); err != nil {
		logger.Printf("iked: keeping the configured proposal order: %v", err)
	} else {
		ranking = RankingFrom(report)
	}
	if *plane == config.DataPlaneAuto {
		if forced := forcedDataPlane(cfg); forced != "" {
			logger.Printf("iked: every tunnel asks for the %s data plane", forced)
			*plane = forced
		}
	}
	d, err := Open(Options{DataPlane: *plane, TUN: *tun, IKEPort: uint16(*ikePort), NATTPort: uint16(*nattPort), Ranking: ranking, Logf: logger.Printf})
	if err != nil {
		logger.Printf("iked: %v", err)
		return 1
	}
	d.Run()
	if err := d.Apply(cfg); err != nil {
		logger.Printf("iked: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if *configd != "" {
		logger.Printf("iked: following the running configuration of configd at %s", *configd)
		go d.Follow(ctx, configdapi.New(*configd), logger.Printf)
	}
	go func() {
		if err := d.Serve(ctx, *sock, localapi.Group(*sockGroup)); err != nil {
			logger.Printf("iked: %v", err)
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	for s := range sig {
		if s == syscall.SIGHUP && *file != "" {
			cfg, err := loadFile(*file)
			if err != nil {
				logger.Printf("iked: reload: %v (keeping the running tunnels)", err)
				continue
			}
			if err := d.Apply(cfg); err != nil {
				logger.Printf("iked: reload: %v", err)
			}
			continue
		}
		break
	}
	logger.Printf("iked: stopping: deleting every SA")
	cancel()
	if err := d.Close(); err != nil {
		logger.Printf("iked: %v", err)
		return 1
	}
	return 0
}

// Follow applies configd's running configuration at start and after every
// commit that changed the tunnels, the certificates (tunnels that
// authenticate with them) or the routes (route tunnels' interfaces carry
// the routes that name them), with configdapi.Follow: configd may
// start after iked or restart, and until the first configuration arrives
// iked runs no tunnels. What Apply refuses it logs; iked keeps retrying
// the tunnels it could start (maintain), so Follow need not repeat it.
func (d *Daemon) Follow(ctx context.Context, src configdapi.Source, logf func(string, ...any)) {
	configdapi.Follow(ctx, src, configdapi.Following{
		Name:     "iked",
		Logf:     logf,
		Sections: []config.Section{config.SectionTunnels, config.SectionCertificates, config.SectionRoutes},
		Apply: func(_ context.Context, cfg *config.Config, rev uint64, ch config.Change) error {
			if ch.Reason == "current" {
				logf("iked: connected to configd: revision %d, %d tunnels", rev, len(cfg.Tunnels))
			}
			if err := d.Apply(cfg); err != nil {
				logf("iked: revision %d: %v", rev, err)
			}
			return nil
		},
	})
}

// forcedDataPlane is the data plane every enabled tunnel of cfg asks for,
// or "" when some leave it to the probe or they disagree: iked runs one
// data plane for all.
func forcedDataPlane(cfg *config.Config) string {
	plane := ""
	for _, t := range cfg.Tunnels {
		if !t.Enabled {
			continue
		}
		if t.DataPlane == "" || t.DataPlane == config.DataPlaneAuto || plane != "" && t.DataPlane != plane {
			return ""
		}
		plane = t.DataPlane
	}
	return plane
}

func loadFile(path string) (*config.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	cfg, err := config.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("configuration %s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("configuration %s: %w", path, err)
	}
	return cfg, nil
}

// IPsecMain is `flashgate ipsec`: status (the default), up NAME,
// down NAME, rekey NAME [child|ike], stats; -socket before the verb picks
// iked's API socket.
func IPsecMain(args []string) int { return ipsecMain(args, os.Stdout, os.Stderr) }

func ipsecMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ipsec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", ikedapi.DefaultSocket, "iked's API socket")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: flashgate ipsec [-socket PATH] status | up NAME | down NAME | rekey NAME [child|ike] | stats")
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	verb, rest := "status", fs.Args()
	if len(rest) > 0 {
		verb, rest = rest[0], rest[1:]
	}
	c := ikedapi.NewClient(*sock)
	ctx := context.Background()
	var err error
	switch {
	case verb == "status" && len(rest) == 0:
		return statusMain([]string{"-socket", *sock}, stdout, stderr)
	case verb == "up" && len(rest) == 1:
		if err = c.Up(ctx, rest[0]); err == nil {
			fmt.Fprintf(stdout, "%s: initiating\n", rest[0])
		}
	case verb == "down" && len(rest) == 1:
		if err = c.Down(ctx, rest[0]); err == nil {
			fmt.Fprintf(stdout, "%s: deleted\n", rest[0])
		}
	case verb == "rekey" && (len(rest) == 1 || len(rest) == 2 && (rest[1] == "child" || rest[1] == "ike")):
		ikeSA := len(rest) == 2 && rest[1] == "ike"
		if err = c.Rekey(ctx, rest[0], ikeSA); err == nil {
			fmt.Fprintf(stdout, "%s: rekeying\n", rest[0])
		}
	case verb == "stats" && len(rest) == 0:
		var st ikedapi.Stats
		if st, err = c.Stats(ctx); err == nil {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			err = enc.Encode(st)
		}
	default:
		fs.Usage()
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, clientError(err))
		return 1
	}
	return 0
}

// clientError says what went wrong in a request to iked, for a person at
// the console.
func clientError(err error) string {
	if errors.Is(err, ikedapi.ErrNotRunning) {
		return "iked is not answering: " + err.Error()
	}
	return "iked: " + err.Error()
}

// StatusMain is `flashgate ipsec status`: the tunnels and their SAs, the
// way `swanctl --list-sas` shows them.
func StatusMain(args []string) int { return statusMain(args, os.Stdout, os.Stderr) }

func statusMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ipsec status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", ikedapi.DefaultSocket, "iked's API socket")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ts, err := ikedapi.NewClient(*sock).Tunnels(context.Background())
	if err != nil {
		fmt.Fprintln(stderr, clientError(err))
		return 1
	}
	ikedapi.PrintStatus(stdout, ts, time.Now())
	return 0
}
