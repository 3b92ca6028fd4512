package hostd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/internal/gomem"
	"github.com/flashgate/flashgate/services/configd/configdapi"
)

// options are hostd's flags. Each names something of the host's that
// hostd may change, and each is off when not given: a hostd started by
// hand or by a test shares the host's file system and UTS namespace, and
// must not rename the host or change its time zone.
type options struct {
	configd     string // configd's API socket
	supervisor  string // the supervisor API's socket: remote syslog, console speed
	localtime   string // the TZif file of the time zone
	hostname    bool   // set the kernel's host name
	consoleBaud int    // the getty's speed as started; 0: leave the speed alone
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("hostd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.configd, "configd", "", "configd's API socket to follow (required; the appliance's is "+configdapi.Socket+")")
	fs.StringVar(&o.supervisor, "supervisor", "", "the supervisor API's socket, through which remote syslog and the console speed are set; empty: leave them alone (the appliance's is "+supervisor.SocketPath+")")
	fs.StringVar(&o.localtime, "localtime", "", "the TZif file to keep with the configured time zone; empty: leave the time zone alone (the appliance's is "+applianceLocaltime+")")
	fs.BoolVar(&o.hostname, "hostname", false, "set the kernel's host name to the configured one; off: leave it alone")
	fs.IntVar(&o.consoleBaud, "console-baud", 0, "the console getty's speed as the service table starts it, which an unset console_baud means; 0: leave the console speed alone (needs -supervisor)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.configd == "":
		return o, errors.New("-configd names no socket: there is nothing to follow")
	case o.consoleBaud < 0:
		return o, fmt.Errorf("-console-baud %d: want a speed, or 0", o.consoleBaud)
	case o.consoleBaud > 0 && o.supervisor == "":
		return o, errors.New("-console-baud needs -supervisor: the supervisor restarts the getty")
	case o.supervisor == "" && o.localtime == "" && !o.hostname:
		return o, errors.New("none of -hostname, -localtime and -supervisor is given: there is nothing to apply")
	}
	return o, nil
}

// Main runs hostd as a process of its own: `flashgate hostd -configd SOCK
// [-hostname] [-localtime FILE] [-supervisor SOCK [-console-baud N]]`.
func Main(args []string) int {
	return run(args, true)
}

// Beside runs hostd in a process that runs another service too (on the
// appliance, configd's: firmware/flashgate): the same flags and work as
// Main, without the settings that belong to the whole process (its
// collector, its memory report on SIGUSR1), which the other service makes.
// It returns when the process gets SIGTERM or SIGINT, or at once with 2
// for bad flags.
func Beside(args []string) int {
	return run(args, false)
}

func run(args []string, ownProcess bool) int {
	logger := log.New(os.Stderr, "hostd: ", 0) // the supervisor's log ring adds the time
	o, err := parseFlags(args, os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			logger.Print(err)
		}
		return 2
	}
	if ownProcess {
		note, _ := gomem.Follow(0)
		logger.Printf("garbage collector: %s", note)
		gomem.ReportOnSignal(logger.Printf)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	h := newHost(o, logger.Printf)
	h.follow(ctx, configdapi.New(o.configd), "configd at "+o.configd, defaultPacing)
	return 0
}

// newHost wires the setters the options enable and reads what is in force
// already, so that a restarted hostd changes nothing that is as
// configured.
func newHost(o options, logf func(string, ...any)) *host {
	h := &host{logf: logf}
	var left []string
	if o.hostname {
		h.setHostname = func(name string) error {
			if err := unix.Sethostname([]byte(name)); err != nil {
				return fmt.Errorf("sethostname: %w", err)
			}
			return nil
		}
		h.applied.hostname, _ = os.Hostname()
	} else {
		left = append(left, "the host name")
	}
	if o.localtime != "" {
		path := o.localtime
		h.setTimezone = func(name, rule string) error { return writeLocaltime(path, rule) }
		h.timezoneHolds = func(rule string) bool { return localtimeHolds(path, rule) }
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			h.applied.timezone = "UTC" // what a box without the file shows
		}
	} else {
		left = append(left, "the time zone")
	}
	if o.supervisor != "" {
		sup := supervisor.NewClient(o.supervisor)
		h.setSyslog = func(c supervisor.SyslogConfig) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return sup.SetSyslog(ctx, c)
		}
		if o.consoleBaud > 0 {
			h.boardBaud = o.consoleBaud
			h.applied.consoleBaud = o.consoleBaud // as the getty started
			h.setConsoleBaud = func(baud int) error {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				return sup.SetConsoleBaud(ctx, baud)
			}
		} else {
			left = append(left, "the console speed")
		}
	} else {
		left = append(left, "remote syslog", "the console speed")
	}
	if len(left) > 0 {
		logf("leaving %s alone (not named by the flags)", strings.Join(left, ", "))
	}
	return h
}
