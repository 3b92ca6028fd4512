package supervisor

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/waitfor"
)

// TestRestartWithArgs runs a service that prints its argument, changes
// the argument and checks that a new process runs with the new one.
func TestRestartWithArgs(t *testing.T) {
	echo := func(word string) []string { return []string{"-c", `echo "speed $0"; exec sleep 1000`, word} }
	table := []Service{{Name: "getty", Path: "/bin/sh", Args: echo("9600"), StopTimeout: 2 * time.Second}}
	s := start(t, Config{
		Backoff:  Backoff{Base: time.Millisecond, Max: time.Millisecond, Healthy: time.Hour},
		Services: table,
	})
	said := func(want string) func() bool {
		return func() bool {
			lines, _, _ := s.Logs("getty", 0)
			return slices.ContainsFunc(lines, func(l Line) bool { return l.Stream == "stdout" && l.Text == want })
		}
	}
	waitfor.Cond(t, 10*time.Second, "getty says speed 9600", said("speed 9600"))
	oldPID := state(s, "getty").PID

	if err := s.RestartWithArgs("getty", echo("115200")); err != nil {
		t.Fatalf("RestartWithArgs: %v", err)
	}
	waitfor.Cond(t, 10*time.Second, "getty says speed 115200", said("speed 115200"))
	st := state(s, "getty")
	if st.PID == oldPID || st.State != StateRunning || st.Restarts != 1 {
		t.Errorf("after RestartWithArgs: %s pid %d (old %d), restarts %d; want running in a new process, 1 restart", st.State, st.PID, oldPID, st.Restarts)
	}
	if want := append([]string{"/bin/sh"}, echo("115200")...); !slices.Equal(st.Command, want) {
		t.Errorf("status command %q, want %q", st.Command, want)
	}
	if table[0].Args[2] != "9600" {
		t.Errorf("the caller's table was changed: args %q", table[0].Args)
	}

	// The same arguments again: no restart.
	pid := st.PID
	if err := s.RestartWithArgs("getty", echo("115200")); err != nil {
		t.Fatalf("RestartWithArgs, same arguments: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if st := state(s, "getty"); st.PID != pid || st.Restarts != 1 {
		t.Errorf("same arguments restarted the service: pid %d (was %d), restarts %d", st.PID, pid, st.Restarts)
	}

	// Stopped on request: stays stopped, starts later with the new arguments.
	if err := s.Stop("getty"); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 10*time.Second, "getty stopped", func() bool { return state(s, "getty").State == StateStopped })
	if err := s.RestartWithArgs("getty", echo("38400")); err != nil {
		t.Fatalf("RestartWithArgs while stopped: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if st := state(s, "getty"); st.State != StateStopped {
		t.Errorf("a stopped service was started by RestartWithArgs: %s", st.State)
	}
	if err := s.Restart("getty"); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 10*time.Second, "getty says speed 38400", said("speed 38400"))

	if err := s.RestartWithArgs("nosuch", nil); err == nil || !strings.Contains(err.Error(), `unknown service "nosuch"`) {
		t.Errorf("RestartWithArgs(nosuch) = %v, want unknown service", err)
	}
}
