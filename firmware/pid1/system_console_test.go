package pid1

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/firmware/supervisor"
)

// TestApplyTimezoneAndConsoleBaud follows a series of commits and checks
// that only changes of the zone or the speed are applied, that 0 means
// the board's speed, and that failures are retried at the next commit.
func TestApplyTimezoneAndConsoleBaud(t *testing.T) {
	var events []string
	failBaud := false
	to := systemTarget{
		setHostname: func(string) error { return nil },
		setSyslog:   func(*supervisor.SyslogConfig) error { return nil },
		setTimezone: func(name, rule string) error { events = append(events, "zone "+name+" "+rule); return nil },
		setConsoleBaud: func(baud int) error {
			if failBaud {
				return fmt.Errorf("supervisor: unknown service %q", "console")
			}
			events = append(events, fmt.Sprintf("baud %d", baud))
			return nil
		},
		boardBaud: 38400,
		logf: func(format string, args ...any) {
			if msg := fmt.Sprintf(format, args...); strings.Contains(msg, "console speed") || strings.Contains(msg, "knows") {
				events = append(events, "log: "+msg)
			}
		},
	}
	st := systemState{hostname: DefaultHostname, timezone: "UTC", consoleBaud: 38400}
	for _, sys := range []config.System{
		{Timezone: "UTC"}, // as at boot: nothing
		{Timezone: "Asia/Kolkata", ConsoleBaud: 115200},
		{Timezone: "Asia/Kolkata", ConsoleBaud: 115200}, // another setting changed: nothing
		{Timezone: "Mars/Olympus_Mons"},                 // not known: kept; 0 is the board's speed
		{Timezone: "Europe/Berlin", ConsoleBaud: 9600},
	} {
		if sys.ConsoleBaud == 9600 {
			failBaud = true
		}
		st = applySystem(sys, st, to)
	}
	failBaud = false
	st = applySystem(config.System{Timezone: "Europe/Berlin", ConsoleBaud: 9600}, st, to) // retried
	want := []string{
		"zone Asia/Kolkata IST-5:30", "baud 115200",
		`log: time zone "Mars/Olympus_Mons": not a zone this firmware knows; keeping Asia/Kolkata`, "baud 38400",
		"zone Europe/Berlin CET-1CEST,M3.5.0,M10.5.0/3", `log: console speed 9600: supervisor: unknown service "console"`,
		"baud 9600",
	}
	if !slices.Equal(events, want) {
		t.Errorf("applied:\n  %s\nwant:\n  %s", strings.Join(events, "\n  "), strings.Join(want, "\n  "))
	}
	if st.timezone != "Europe/Berlin" || st.consoleBaud != 9600 {
		t.Errorf("state %+v, want Europe/Berlin at 9600", st)
	}

	// No console getty: the speed is not touched.
	to.setConsoleBaud = nil
	if st := applySystem(config.System{Timezone: "UTC", ConsoleBaud: 19200}, st, to); st.consoleBaud != 9600 {
		t.Errorf("without a console getty the speed became %d", st.consoleBaud)
	}
}

// TestConsoleBaudRestartsGetty applies console_baud to a real supervisor
// whose console service is a script that prints its arguments: the getty
// runs again, with the service table's arguments at the new speed.
func TestConsoleBaudRestartsGetty(t *testing.T) {
	script := filepath.Join(t.TempDir(), "getty")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$@\"\nexec sleep 1000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := consoleSpec{Device: "ttyS0", Baud: 38400, Board: "alix2d13", Version: "test"}
	args, err := consoleArgs(script, c, c.Baud)
	if err != nil {
		t.Fatal(err)
	}
	sup, err := supervisor.New(supervisor.Config{
		Services: []supervisor.Service{{Name: "console", Path: script, Args: args, StopTimeout: 2 * time.Second}},
		Backoff:  supervisor.Backoff{Base: time.Millisecond, Max: time.Millisecond, Healthy: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sup.Run(ctx); close(done) }()
	defer func() { sup.Shutdown(2 * time.Second); cancel(); <-done }()

	said := func(want string) bool {
		lines, _, _ := sup.Logs("console", 0)
		return slices.ContainsFunc(lines, func(l supervisor.Line) bool { return l.Stream == "stdout" && l.Text == want })
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitUntil("the getty at 38400", func() bool { return said(strings.Join(args, " ")) })

	to := systemTarget{
		setHostname: func(string) error { return nil },
		setSyslog:   func(*supervisor.SyslogConfig) error { return nil },
		setTimezone: func(string, string) error { return nil },
		setConsoleBaud: func(baud int) error {
			args, err := consoleArgs(script, c, baud)
			if err != nil {
				return err
			}
			return sup.RestartWithArgs("console", args)
		},
		boardBaud: c.Baud,
		logf:      t.Logf,
	}
	st := applySystem(config.System{ConsoleBaud: 115200}, systemState{hostname: DefaultHostname, timezone: "UTC", consoleBaud: c.Baud}, to)
	if st.consoleBaud != 115200 {
		t.Fatalf("console speed in force %d, want 115200", st.consoleBaud)
	}
	want := "console -device ttyS0 -baud 115200 -board alix2d13 -version test"
	waitUntil("the getty at 115200", func() bool { return said(want) })
	if s, _ := sup.ServiceStatus("console"); s.State != supervisor.StateRunning || s.Restarts != 1 {
		t.Errorf("console %s after %d restarts, want running after 1", s.State, s.Restarts)
	}
}
