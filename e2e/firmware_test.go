package e2e

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/images/imagestest"
)

// serviceRow is one row of `flashgate status`.
type serviceRow struct {
	state         string
	pid, restarts int
}

var statusRow = regexp.MustCompile(`(?m)^(\w+) +(\w+)(?: \([^)]*\))? +(\d+|-) +(\d+) `)

// parseStatus reads the service table of `flashgate status`.
func parseStatus(out string) map[string]serviceRow {
	rows := map[string]serviceRow{}
	for _, m := range statusRow.FindAllStringSubmatch(consoleText(out), -1) {
		pid, _ := strconv.Atoi(m[3])
		restarts, _ := strconv.Atoi(m[4])
		rows[m[1]] = serviceRow{state: m[2], pid: pid, restarts: restarts}
	}
	return rows
}

// checkServiceRestart is issue 3's first VM check: kill a service (the web
// UI, from the expert shell) and see the supervisor restart it and count
// the restart, in `flashgate status` and in the web UI's services view.
func checkServiceRestart(t *testing.T, s *imagestest.Serial, api *API) {
	s.EnterShell()
	before := parseStatus(s.Shell("flashgate status"))
	w, ok := before["webui"]
	if !ok || w.state != "running" || w.pid == 0 {
		t.Fatalf("flashgate status before the kill: webui %+v (all: %+v); want it running with a pid", w, before)
	}
	s.Shell("kill " + strconv.Itoa(w.pid))
	s.Expect(30*time.Second, "flashgate init: webui: restarted (pid")
	after := parseStatus(s.Shell("flashgate status"))
	if got := after["webui"]; got.state != "running" || got.pid == w.pid || got.restarts != w.restarts+1 {
		t.Errorf("flashgate status after kill %d: webui %+v; want running under a new pid with %d restarts", w.pid, got, w.restarts+1)
	}
	for name, r := range before {
		if name != "webui" && after[name] != r {
			t.Errorf("service %s changed when only webui was killed: %+v, then %+v", name, r, after[name])
		}
	}
	s.LeaveShell()

	// The restarted web UI has new sessions: log in again.
	if err := api.WaitLogin("admin", adminPassword, 90*time.Second); err != nil {
		t.Fatalf("web UI after its restart: %v", err)
	}
	var services []struct {
		Name     string `json:"name"`
		State    string `json:"state"`
		Restarts int    `json:"restarts"`
	}
	if err := api.Do("GET", "/api/v1/services", nil, &services); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sv := range services {
		if sv.Name == "webui" {
			found = true
			if sv.Restarts != w.restarts+1 || sv.State != "running" {
				t.Errorf("GET /api/v1/services: webui %+v; want running with %d restarts", sv, w.restarts+1)
			}
		}
	}
	if !found {
		t.Errorf("GET /api/v1/services has no webui: %+v", services)
	}
}

var watchdogTimeout = regexp.MustCompile(`watchdog timeout (\d+s)`)

// checkWatchdogReset is issue 3's watchdog check: `flashgate watchdog
// stop-petting` (the documented test hook) and the board resets by itself,
// without an orderly reboot, within the watchdog's time (the i6300esb qemu
// emulates resets after its second timeout) plus a margin; then it boots
// to a login prompt again.
func checkWatchdogReset(t *testing.T, s *imagestest.Serial) {
	s.EnterShell()
	m := watchdogTimeout.FindStringSubmatch(s.Shell("flashgate status"))
	if m == nil {
		t.Fatalf("flashgate status does not show an armed watchdog (\"watchdog timeout N s\")")
	}
	timeout, _ := time.ParseDuration(m[1])
	from := s.At
	s.TypeLine("flashgate watchdog stop-petting")
	s.Expect(time.Minute, "petting stopped")
	stopped := time.Now()
	s.Expect(2*timeout+90*time.Second, "SYSLINUX")
	elapsed := time.Since(stopped)
	t.Logf("watchdog (timeout %s) reset the VM %.1f s after petting stopped", timeout, elapsed.Seconds())
	between := s.Since(from)
	for _, orderly := range []string{"flashgate init: reboot", "reboot: Restarting system"} {
		if strings.Contains(between, orderly) {
			t.Errorf("the VM went down with %q: an orderly reboot, not a watchdog reset", orderly)
		}
	}
	// The last pet may have been a few seconds (PID 1 pets every 4 s)
	// before the hook stopped petting; a reset well inside the timeout
	// was not the watchdog's.
	if elapsed < timeout/2 {
		t.Errorf("the VM reset %s after petting stopped, long before the watchdog's %s ran out: something else reset it", elapsed.Round(time.Second), timeout)
	}
	s.Expect(3*time.Minute, "flashgate init: pid 1")
	s.Login(adminPassword, false)
}

// checkRebootToLogin is issue 3's reboot check, with the CLI's reboot:
// services stop in order, the kernel restarts, and the same qemu process
// boots the card again to a login prompt, its configuration intact.
func checkRebootToLogin(t *testing.T, s *imagestest.Serial) {
	s.TypeLine("reboot")
	s.Expect(time.Minute, "Type yes to go on")
	start := time.Now()
	s.TypeLine("yes")
	s.Expect(time.Minute, "flashgate init: reboot: stopping services")
	s.Expect(time.Minute, "flashgate init: rebooting")
	s.Expect(time.Minute, "SYSLINUX")
	s.Expect(3*time.Minute, "flashgate init: pid 1")
	s.Login(adminPassword, false)
	t.Logf("reboot to a logged-in CLI: %.1f s", time.Since(start).Seconds())
	if out := consoleText(s.CLI("show config running tunnels.wan.remote_address")); !strings.Contains(out, "set tunnels wan remote_address "+wanProbe.String()) {
		t.Errorf("after the reboot the running configuration lacks tunnel wan:\n%s", out)
	}
}

// checkPoweroff is issue 3's poweroff check: the CLI's poweroff stops the
// services, the kernel powers down, and qemu exits with status 0.
func checkPoweroff(t *testing.T, s *imagestest.Serial) {
	s.TypeLine("poweroff")
	s.Expect(time.Minute, "Type yes to go on")
	s.TypeLine("yes")
	s.Expect(time.Minute, "flashgate init: poweroff: stopping services")
	s.Expect(time.Minute, "reboot: Power down")
	// images.VM has no accessor for qemu's exit status; WaitFor reports
	// it once qemu is gone, in the form "qemu exited (<status>)".
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, err := s.VM.WaitFor(ctx, len(s.VM.Log()), "never printed: waiting for qemu to exit")
	switch {
	case err == nil:
		t.Fatal("qemu printed a marker it cannot print")
	case strings.Contains(err.Error(), "qemu exited (<nil>)"):
	default:
		t.Errorf("after poweroff: %v; want qemu to exit with status 0", err)
	}
}
