package pid1

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/firmware/supervisor"
)

// TestConsoleBaudRestartsGetty asks a real supervisor, through its API as
// hostd does, for a new console speed: PID 1's hook restarts the getty (a
// script that prints its arguments) with the service table's arguments at
// the new speed, once; asking again for the same speed restarts nothing.
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
	var sup *supervisor.Supervisor
	sup, err = supervisor.New(supervisor.Config{
		Services:    []supervisor.Service{{Name: "console", Path: script, Args: args, StopTimeout: 2 * time.Second}},
		Backoff:     supervisor.Backoff{Base: time.Millisecond, Max: time.Millisecond, Healthy: time.Hour},
		ConsoleBaud: consoleBaudHook(script, c, func() *supervisor.Supervisor { return sup }),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sock := filepath.Join(t.TempDir(), "supervisor.sock")
	if err := sup.Serve(ctx, sock); err != nil {
		t.Fatal(err)
	}
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

	api := supervisor.NewClient(sock)
	if err := api.SetConsoleBaud(context.Background(), 115200); err != nil {
		t.Fatalf("SetConsoleBaud(115200): %v", err)
	}
	want := "console -device ttyS0 -baud 115200 -board alix2d13 -version test"
	waitUntil("the getty at 115200", func() bool { return said(want) })
	waitUntil("the getty running again", func() bool {
		s, _ := sup.ServiceStatus("console")
		return s.State == supervisor.StateRunning
	})
	if err := api.SetConsoleBaud(context.Background(), 115200); err != nil {
		t.Fatalf("SetConsoleBaud(115200) again: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if s, _ := sup.ServiceStatus("console"); s.State != supervisor.StateRunning || s.Restarts != 1 {
		t.Errorf("console %s after %d restarts, want running after 1", s.State, s.Restarts)
	}
}

// A box without a console getty has no hook: the supervisor then refuses
// a speed with a reason instead of restarting something else.
func TestNoConsoleNoBaudHook(t *testing.T) {
	if h := consoleBaudHook("/bbin/flashgate", consoleSpec{Baud: 38400}, func() *supervisor.Supervisor { return nil }); h != nil {
		t.Error("a hook for a box without a console getty")
	}
	h := consoleBaudHook("/bbin/flashgate", consoleSpec{Device: "ttyS0", Baud: 38400}, func() *supervisor.Supervisor { return nil })
	if err := h(9600); err == nil || !strings.Contains(err.Error(), "not running yet") {
		t.Errorf("hook before the supervisor exists: %v, want an error saying so", err)
	}
}
