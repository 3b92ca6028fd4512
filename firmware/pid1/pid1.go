// Package pid1 is the appliance's init. It mounts the kernel file systems,
// identifies the board, loads its modules, mounts the config partition
// read-only, opens the hardware watchdog, runs the supervisor, reaps every
// zombie, and on reboot, poweroff or ctrl-alt-del stops everything in order
// and calls reboot(2).
//
// The supervisor runs inside PID 1 rather than as a child: there is then
// exactly one reaper (wait4(-1) in PID 1 sees services and orphans alike, so
// the supervisor never races init for an exit status), one Go runtime in RAM
// instead of two (the ALIX has 256 MiB and the target for both is 8 MB), and
// no channel between init and supervisor that could fail. A supervisor
// child would buy isolation only from its own crashes, which PID 1 would
// have to handle by restarting it anyway; instead every goroutine of the
// supervisor recovers its panics.
//
// PID 1 must never exit: the kernel panics (and with panic=10 reboots) if it
// does. Each boot step recovers from a panic and the box comes up without
// what failed, saying so on the console.
package pid1

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/firmware/bootparam"
	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/internal/paths"
)

// DefaultHostname is the box's name from boot until hostd applies the
// configured one (hostd.DefaultHostname, which is also what it applies
// while the configuration names none).
const DefaultHostname = "flashgate"

type initProc struct {
	opts     options
	params   bootparam.Params
	board    boardChoice
	cfgDev   string
	watchdog *supervisor.Watchdog
	sup      *supervisor.Supervisor
	power    chan supervisor.PowerAction
	signals  chan os.Signal // taken from the first step on: see boot
	stopping atomic.Bool

	mu      sync.Mutex
	bootLog []string // messages printed before the supervisor existed
	slots   slotBoot // guarded by mu once the trial's health checks run
}

// options are PID 1's flags. The image passes none: they exist for tests
// (which run PID 1 in its own PID and mount namespaces on a host whose
// console, modules and watchdog it must not touch) and for odd boards.
// The kernel hands init the command line words it does not understand, so
// a bad flag is reported and ignored, never fatal.
type options struct {
	console    string        // getty device overriding the board's; "none" for no getty
	modules    string        // module directory; "" for /lib/modules/<release>
	watchdog   string        // watchdog device; "" for none
	configWait time.Duration // how long to look for the config partition
	exe        string        // the binary services are started from
}

func (in *initProc) parseFlags(args []string) {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.SetOutput(os.Stdout)
	fs.StringVar(&in.opts.console, "console", "", `console device for the getty instead of the board's; "none" for no getty`)
	fs.StringVar(&in.opts.modules, "modules", "", "kernel module directory (default /lib/modules/<release>)")
	fs.StringVar(&in.opts.watchdog, "watchdog", "/dev/watchdog", "watchdog device; empty for none")
	fs.DurationVar(&in.opts.configWait, "config-wait", 5*time.Second, "how long to look for the config partition")
	fs.StringVar(&in.opts.exe, "exe", firmwareBinary(), "the multi-call binary services are started from")
	if err := fs.Parse(args); err != nil {
		in.logf("ignoring the init arguments %q: %v", args, err)
		fs.Parse(nil)
	}
}

// Main is PID 1's entry point. Run as PID 1 it never returns.
func Main(args []string) int {
	if os.Getpid() != 1 {
		fmt.Fprintf(os.Stderr, "flashgate init: this is pid %d, not 1: refusing to take over this system (`flashgate supervisor` runs the services without booting)\n", os.Getpid())
		return 1
	}
	in := &initProc{power: make(chan supervisor.PowerAction, 1)}
	in.parseFlags(args)
	in.boot()
	in.loop()
	return 0 // not reached
}

// logf prints a PID 1 message on the console and keeps it in the
// supervisor's log (or, before the supervisor exists, until it does).
func (in *initProc) logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	in.print(msg)
	in.mu.Lock()
	sup := in.sup
	if sup == nil {
		in.bootLog = append(in.bootLog, msg)
	}
	in.mu.Unlock()
	if sup != nil {
		sup.Note("init: " + msg)
	}
}

// print puts a line on the console only: the supervisor's messages, which
// the supervisor keeps in its log itself.
func (in *initProc) print(msg string) {
	fmt.Fprintf(os.Stdout, "flashgate init: %s\n", msg)
}

// step runs one boot step, turning a panic into a console message so the
// remaining steps still run.
func (in *initProc) step(name string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			in.logf("%s: panic: %v; continuing without it\n%s", name, r, debug.Stack())
		}
	}()
	f()
	if in.watchdog != nil {
		if err := in.watchdog.Pet(); err != nil {
			in.logf("watchdog: %v", err)
		}
	}
}

func (in *initProc) boot() {
	// The signals that ask for a reboot or power-off are caught before
	// anything else: with Go's default action a ctrl-alt-del pressed
	// while the box boots would end PID 1, which panics the kernel. The
	// main loop acts on them once the services run.
	in.signals = make(chan os.Signal, 4)
	signal.Notify(in.signals, unix.SIGINT, unix.SIGTERM, unix.SIGUSR2, unix.SIGPWR)
	in.step("mount", func() {
		mountAll(earlyMounts, in.logf)
		ensureConsole()
	})
	in.step("kernel command line", func() {
		p, err := bootparam.Read()
		if err != nil {
			in.logf("kernel command line: %v", err)
		}
		in.params = p
	})
	version := in.params.Version
	if version == "" {
		version = "unknown"
	}
	in.logf("pid 1, version %s", version)
	in.step("hostname", func() {
		if err := unix.Sethostname([]byte(DefaultHostname)); err != nil {
			in.logf("hostname: %v", err)
		}
	})
	in.step("loopback", func() {
		if err := loopbackUp(); err != nil {
			in.logf("%v", err)
		}
	})
	in.step("board", func() {
		in.board = chooseBoard(in.params.Board, func() (boards.Result, error) { return boards.Probe("/") })
		in.logf("%s", in.board.Marker)
		for _, u := range in.board.Board.Unconfirmed {
			in.logf("board %s, unconfirmed: %s", in.board.Board.Name, u)
		}
	})
	// The watchdog is armed as soon as the board is known, before the
	// steps that touch the card (modules, the config partition, a test
	// boot's slot records): one of them hanging resets the box, and on a
	// test boot that brings back the old slot. step pets it after each.
	in.step("watchdog", func() {
		in.watchdog = openWatchdog(in.opts.watchdog, in.board.Board.Watchdog, in.logf)
	})
	in.step("ctrl-alt-del", func() {
		// The kernel then sends SIGINT to PID 1 instead of rebooting
		// at once, so ctrl-alt-del gets an orderly reboot.
		if err := unix.Reboot(unix.LINUX_REBOOT_CMD_CAD_OFF); err != nil {
			in.logf("ctrl-alt-del: %v", err)
		}
	})
	var serviceModules [][]string
	moduleDir := in.opts.modules
	if moduleDir == "" {
		var uts unix.Utsname
		unix.Uname(&uts)
		moduleDir = "/lib/modules/" + unix.ByteSliceToString(uts.Release[:])
	}
	in.step("modules", func() {
		var early [][]string
		early, serviceModules = moduleStages(in.board.Board.Modules)
		loadModules(moduleDir, " for the card and the watchdog", early, insertModule, in.logf)
	})
	in.step("config partition", func() {
		dev, err := mountConfig(in.opts.configWait)
		if err != nil {
			in.logf("config partition: %v; running from RAM defaults, nothing will be saved", err)
			return
		}
		in.cfgDev = dev
		in.logf("config partition %s mounted read-only on /cfg", dev)
	})
	in.step("upgrade", in.upgradeAtBoot)
	if up, err := os.ReadFile("/proc/uptime"); err == nil {
		secs, _, _ := strings.Cut(string(up), " ")
		in.logf("starting services %s s after the kernel started", secs)
	}
	in.step("console log level", func() {
		if in.params.ConsoleLogLevelSet {
			return
		}
		if err := quietConsole(); err != nil {
			in.logf("console log level: %v", err)
		}
	})
	in.step("supervisor", in.startSupervisor)
	go in.loadServiceModules(moduleDir, serviceModules)
	if rec := in.slots.trial; rec != nil {
		go func() {
			defer func() {
				if r := recover(); r != nil {
					in.logf("upgrade: health checks: panic: %v; the next boot falls back\n%s", r, debug.Stack())
				}
			}()
			in.checkTrial(rec)
		}()
	}
}

// loadServiceModules loads the modules netd and iked need while the
// services that need none start, then lets netd and iked start.
func (in *initProc) loadServiceModules(dir string, groups [][]string) {
	provide := func() {
		in.mu.Lock()
		sup := in.sup
		in.mu.Unlock()
		if sup != nil {
			sup.Provide(modulesLoaded)
		}
	}
	if len(groups) == 0 {
		// Every driver is built into the board's kernel: nothing to wait for.
		provide()
		return
	}
	awaitModules(func() {
		loadModules(dir, " for the services", groups, insertModule, in.logf)
	}, serviceModulesWait, provide, in.logf)
}

// serviceModulesWait bounds how long netd and iked wait for their modules.
// A driver whose probe hangs on odd hardware (finit_module does not
// return until the probe does) must not keep the network down for good.
const serviceModulesWait = 60 * time.Second

// awaitModules runs load and calls provide once it returns, panics, or has
// run for wait, whichever comes first: without some module netd and iked
// run degraded and say so, which beats never running.
func awaitModules(load func(), wait time.Duration, provide func(), logf func(string, ...any)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				logf("modules for the services: panic: %v; starting the services without them\n%s", r, debug.Stack())
			}
		}()
		load()
	}()
	select {
	case <-done:
	case <-time.After(wait):
		logf("modules for the services: still loading after %s (a driver's probe hangs?); starting netd and iked without waiting", wait)
	}
	provide()
}

func (in *initProc) startSupervisor() {
	c := consoleSpec{
		Device:  in.board.Board.Console.Device,
		Baud:    in.board.Board.Console.Baud,
		Board:   in.board.Board.Name,
		Version: in.params.Version,
	}
	if c.Device == "" { // unknown board: the console the kernel uses
		c.Device, c.Baud = in.params.ConsoleDevice, in.params.ConsoleBaud
	}
	if c.Device == "" || isVirtualConsole(c.Device) {
		c.Device = "ttyS0" // the appliances have no screen; serial is the best guess
	}
	switch in.opts.console {
	case "":
	case "none":
		c.Device = ""
	default:
		c.Device = in.opts.console
	}
	if c.Baud == 0 {
		c.Baud = 115200
	}
	if err := prepareWebUIDirs(webUIRunDir, webUIUID, webUIGID); err != nil {
		in.logf("%v", err)
	}
	if err := prepareIkedDir(paths.IkedRunDir); err != nil {
		in.logf("%v", err)
	}
	if err := prepareNetdDir(paths.NetdRunDir); err != nil {
		in.logf("%v", err)
	}
	if err := linkResolvConf(resolvConfLink, paths.NetdResolvConf); err != nil {
		in.logf("%v; the box's own name lookups get no DNS servers", err)
	}
	web, err := openWebListeners(":443", ":80")
	if err != nil {
		in.logf("%v; the web UI tries itself, which it cannot as its own user", err)
	}
	sup, err := supervisor.New(supervisor.Config{
		Services:    serviceTable(in.opts.exe, c, web),
		Conditions:  []string{modulesLoaded},
		Logf:        func(format string, args ...any) { in.print(fmt.Sprintf(format, args...)) },
		Watchdog:    in.watchdog,
		PetInterval: petInterval,
		Power:       in.requestPower,
		ConsoleBaud: consoleBaudHook(in.opts.exe, c, in.currentSupervisor),
	})
	if err != nil {
		in.logf("supervisor: %v; no services run", err)
		// Orphans still need reaping.
		go supervisor.Reap(context.Background(), func(int, unix.WaitStatus) {})
		return
	}
	in.mu.Lock()
	for _, l := range in.bootLog {
		sup.Note("init: " + l)
	}
	in.bootLog = nil
	in.sup = sup
	in.mu.Unlock()
	ctx := context.Background()
	if err := sup.Serve(ctx, supervisor.SocketPath); err != nil {
		in.logf("supervisor API: %v; `flashgate status` will not work", err)
	}
	if err := sup.ServeWeb(ctx, supervisor.WebSocketPath, webUIGID); err != nil {
		in.logf("supervisor API for the web UI: %v; its Logs page and reboot will not work", err)
	}
	if err := sup.FollowKernelLog(ctx, "/dev/kmsg"); err != nil {
		in.logf("%v", err)
	}
	go in.runSupervisor(ctx)
}

// currentSupervisor returns the supervisor once startSupervisor made it.
func (in *initProc) currentSupervisor() *supervisor.Supervisor {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.sup
}

// runSupervisor keeps the supervision loop running; it returns only if the
// loop panics, and then it is started again.
func (in *initProc) runSupervisor(ctx context.Context) {
	for {
		func() {
			defer func() {
				if r := recover(); r != nil {
					in.logf("supervisor: panic: %v; restarting its loop\n%s", r, debug.Stack())
				}
			}()
			in.sup.Run(ctx)
		}()
		time.Sleep(time.Second)
	}
}

func (in *initProc) requestPower(a supervisor.PowerAction) error {
	if !in.stopping.CompareAndSwap(false, true) {
		return errors.New("a shutdown is already in progress")
	}
	in.power <- a // buffered: the main loop takes it
	return nil
}

// loop waits for a power request from the API or a signal: SIGINT
// (ctrl-alt-del) and SIGTERM reboot, SIGUSR2 and SIGPWR power off, as
// other inits do.
func (in *initProc) loop() {
	sigs := in.signals // caught since boot began
	for {
		func() {
			defer func() {
				if r := recover(); r != nil {
					in.logf("main loop: panic: %v\n%s", r, debug.Stack())
				}
			}()
			for {
				select {
				case a := <-in.power:
					in.shutdown(a)
				case sig := <-sigs:
					a := supervisor.Reboot
					if sig == unix.SIGUSR2 || sig == unix.SIGPWR {
						a = supervisor.PowerOff
					}
					in.logf("%v: %s", sig, a)
					if in.requestPower(a) != nil {
						in.logf("%v ignored: a shutdown is already in progress", sig)
					}
				}
			}
		}()
		time.Sleep(time.Second)
	}
}

// isVirtualConsole reports whether dev is a VGA virtual console: tty0,
// tty1, ... (not ttyS0).
func isVirtualConsole(dev string) bool {
	n, ok := strings.CutPrefix(dev, "tty")
	_, err := strconv.Atoi(n)
	return ok && err == nil
}
