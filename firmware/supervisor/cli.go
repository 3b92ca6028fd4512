package supervisor

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// The command-line front ends of the API, each a flashgate subcommand.

func cliContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 15*time.Second)
}

func socketFlag(fs *flag.FlagSet) *string {
	return fs.String("socket", SocketPath, "supervisor API socket")
}

// StatusMain is `flashgate status`: the services and PID 1 as a table.
func StatusMain(args []string) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	sock := socketFlag(fs)
	if fs.Parse(args) != nil {
		return 2
	}
	ctx, cancel := cliContext()
	defer cancel()
	c := NewClient(*sock)
	services, err := c.Services(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flashgate status: %v\n", err)
		return 1
	}
	sys, err := c.System(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flashgate status: %v\n", err)
		return 1
	}
	WriteStatus(os.Stdout, services, sys)
	return 0
}

// WriteStatus renders the status table.
func WriteStatus(w io.Writer, services []ServiceStatus, sys System) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tSTATE\tPID\tRESTARTS\tUPTIME\tLAST EXIT")
	for _, s := range services {
		pid, uptime, last := "-", "-", "-"
		if s.PID != 0 {
			pid = fmt.Sprint(s.PID)
		}
		if s.Uptime > 0 {
			uptime = s.Uptime.Std().Round(time.Second).String()
		}
		if s.LastExit != "" {
			last = s.LastExit
		}
		state := string(s.State)
		switch {
		case s.State == StateBackoff:
			state += fmt.Sprintf(" (retry in %s)", s.NextStartIn.Std().Round(100*time.Millisecond))
		case len(s.WaitingFor) > 0:
			state += " (for " + strings.Join(s.WaitingFor, ", ") + ")"
		case s.NotReady:
			state += " (not ready)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.Name, state, pid, s.Restarts, uptime, last)
	}
	tw.Flush()
	wd := "no watchdog"
	if sys.Watchdog.Open {
		wd = fmt.Sprintf("watchdog timeout %s", sys.Watchdog.Timeout.Std())
		if !sys.Watchdog.Petting {
			wd += ", PETTING STOPPED"
		}
		if sys.Watchdog.LastError != "" {
			wd += ", error: " + sys.Watchdog.LastError
		}
	}
	mem := fmt.Sprintf("rss %d KiB", sys.RSSKiB)
	if m := sys.Memory; m != nil {
		mem += fmt.Sprintf(" (pss %d KiB, private %d KiB)", m.PSS, m.Private)
	}
	fmt.Fprintf(w, "\npid %d: %s, %s, %d orphans reaped\n", sys.PID, mem, wd, sys.OrphansReaped)
	if sys.Syslog != nil {
		fmt.Fprintf(w, "syslog: %s over %s (%s), %d sent, %d dropped\n", sys.Syslog.Addr, sys.Syslog.Network, sys.Syslog.Format, sys.Syslog.Sent, sys.Syslog.Dropped)
	}
}

// PowerMain returns the `flashgate reboot` or `flashgate poweroff` command.
func PowerMain(action PowerAction) func(args []string) int {
	return func(args []string) int {
		fs := flag.NewFlagSet(string(action), flag.ContinueOnError)
		sock := socketFlag(fs)
		if fs.Parse(args) != nil {
			return 2
		}
		ctx, cancel := cliContext()
		defer cancel()
		if err := NewClient(*sock).Power(ctx, action); err != nil {
			fmt.Fprintf(os.Stderr, "flashgate %s: %v\n", action, err)
			return 1
		}
		return 0
	}
}

// ServiceMain is `flashgate service restart|stop NAME`.
func ServiceMain(args []string) int {
	fs := flag.NewFlagSet("service", flag.ContinueOnError)
	sock := socketFlag(fs)
	fs.Usage = func() { fmt.Fprintln(fs.Output(), "usage: flashgate service [-socket path] restart|stop NAME") }
	if fs.Parse(args) != nil {
		return 2
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return 2
	}
	ctx, cancel := cliContext()
	defer cancel()
	c := NewClient(*sock)
	var err error
	switch verb, name := fs.Arg(0), fs.Arg(1); verb {
	case "restart":
		err = c.Restart(ctx, name)
	case "stop":
		err = c.Stop(ctx, name)
	default:
		fs.Usage()
		return 2
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "flashgate service: %v\n", err)
		return 1
	}
	return 0
}

// LogsMain is `flashgate logs [-n N] NAME` (NAME: a service, kernel or
// supervisor).
func LogsMain(args []string) int {
	fs := flag.NewFlagSet("logs", flag.ContinueOnError)
	sock := socketFlag(fs)
	n := fs.Int("n", 50, "lines to show, 0 for all")
	if fs.Parse(args) != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: flashgate logs [-n N] SERVICE|kernel|supervisor")
		return 2
	}
	ctx, cancel := cliContext()
	defer cancel()
	reply, err := NewClient(*sock).Logs(ctx, fs.Arg(0), *n)
	if err != nil {
		fmt.Fprintf(os.Stderr, "flashgate logs: %v\n", err)
		return 1
	}
	if reply.Dropped > 0 {
		fmt.Printf("(%d older lines dropped from the ring)\n", reply.Dropped)
	}
	for _, l := range reply.Lines {
		fmt.Printf("%s %-6s %s\n", l.Time.Format("15:04:05.000"), l.Stream, l.Text)
	}
	return 0
}

// WatchdogMain is `flashgate watchdog stop-petting`, the test hook that
// lets the hardware watchdog reset the board.
func WatchdogMain(args []string) int {
	fs := flag.NewFlagSet("watchdog", flag.ContinueOnError)
	sock := socketFlag(fs)
	if fs.Parse(args) != nil {
		return 2
	}
	if fs.NArg() != 1 || fs.Arg(0) != "stop-petting" {
		fmt.Fprintln(os.Stderr, "usage: flashgate watchdog stop-petting   (test hook: the board resets when the watchdog expires)")
		return 2
	}
	ctx, cancel := cliContext()
	defer cancel()
	if err := NewClient(*sock).StopPetting(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "flashgate watchdog: %v\n", err)
		return 1
	}
	fmt.Println("watchdog petting stopped; the board resets when the watchdog expires")
	return 0
}
