package pid1

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/internal/paths"
	"golang.org/x/sys/unix"
)

// SupervisorMain is `flashgate supervisor`: the same service table and API
// as on the appliance, without booting anything — for development, and for
// measuring the supervisor's memory on a host. It becomes a child subreaper
// so orphans come back to it as they do to PID 1, and on SIGTERM or SIGINT
// it stops the services in reverse order and exits.
func SupervisorMain(args []string) int {
	fs := flag.NewFlagSet("supervisor", flag.ContinueOnError)
	sock := fs.String("socket", supervisor.SocketPath, "API socket")
	console := fs.String("console", "", "console device for a getty (e.g. ttyS0); none if empty")
	baud := fs.Int("baud", 115200, "console speed")
	board := fs.String("board", "", "board name shown on the console banner")
	version := fs.String("version", "", "version shown on the console banner")
	kmsg := fs.Bool("kmsg", false, "copy /dev/kmsg into the kernel log ring")
	only := fs.String("services", "", `services of the appliance's table to run, comma-separated, or "all"; none by default, since on a host netd and iked would reconfigure the host's network, and hostd its name and time zone`)
	if fs.Parse(args) != nil {
		return 2
	}
	logf := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "flashgate supervisor: "+format+"\n", a...) }
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		logf("cannot become a subreaper (%v): orphans will not be reaped here", err)
	}
	exe, spec := firmwareBinary(), consoleSpec{Device: *console, Baud: *baud, Board: *board, Version: *version}
	// The web UI, when it runs, runs as on the appliance: as its own
	// user, on listeners bound here.
	var web webListeners
	if *only == "all" || slices.Contains(strings.Split(*only, ","), "webui") {
		if err := prepareWebUIDirs(webUIRunDir, webUIUID, webUIGID); err != nil {
			logf("%v", err)
		}
		var err error
		if web, err = openWebListeners(":443", ":80"); err != nil {
			logf("%v", err)
		}
		defer web.Close()
	}
	if *only == "all" || slices.Contains(strings.Split(*only, ","), "iked") {
		if err := prepareIkedDir(paths.IkedRunDir); err != nil {
			logf("%v", err)
		}
	}
	// netd's directory, but not the host's /etc/resolv.conf: netd keeps
	// its resolver file there, and the host keeps its own.
	if *only == "all" || slices.Contains(strings.Split(*only, ","), "netd") {
		if err := prepareNetdDir(paths.NetdRunDir); err != nil {
			logf("%v", err)
		}
	}
	table, err := selectServices(serviceTable(exe, spec, web), *only)
	if err != nil {
		logf("%v", err)
		return 2
	}
	var sup *supervisor.Supervisor
	sup, err = supervisor.New(supervisor.Config{
		Services:    table,
		Conditions:  []string{modulesLoaded},
		Logf:        logf,
		ConsoleBaud: consoleBaudHook(exe, spec, func() *supervisor.Supervisor { return sup }),
	})
	if err != nil {
		logf("%v", err)
		return 1
	}
	// Off the appliance the host's kernel has what it has: nothing to load.
	sup.Provide(modulesLoaded)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := sup.Serve(ctx, *sock); err != nil {
		logf("%v", err)
		return 1
	}
	if web.HTTPS != nil {
		if err := sup.ServeWeb(ctx, supervisor.WebSocketPath, webUIGID); err != nil {
			logf("%v", err)
		}
	}
	if *kmsg {
		if err := sup.FollowKernelLog(ctx, "/dev/kmsg"); err != nil {
			logf("%v", err)
		}
	}
	done := make(chan struct{})
	go func() { sup.Run(ctx); close(done) }()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT)
	sig := <-sigs
	logf("%v: stopping services", sig)
	sup.Shutdown(killWait)
	cancel()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	os.Remove(*sock)
	return 0
}

// selectServices keeps the named services of table, in table order. A
// dependency that is not selected is dropped from After, so a service can
// be run alone for development.
func selectServices(table []supervisor.Service, list string) ([]supervisor.Service, error) {
	if list == "all" {
		return table, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	var out []supervisor.Service
	for _, s := range table {
		if !want[s.Name] {
			continue
		}
		delete(want, s.Name)
		var after []string
		for _, d := range s.After {
			if slices.ContainsFunc(out, func(o supervisor.Service) bool { return o.Name == d }) {
				after = append(after, d)
			}
		}
		s.After = after
		out = append(out, s)
	}
	for n := range want {
		return nil, fmt.Errorf("-services: no service %q in the table", n)
	}
	return out, nil
}
