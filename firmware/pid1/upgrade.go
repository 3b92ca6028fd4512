package pid1

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flashgate/flashgate/internal/atomicfile"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/firmware/bootslot"
	"github.com/flashgate/flashgate/firmware/supervisor"
	"github.com/flashgate/flashgate/internal/paths"
)

// What a test boot must show before PID 1 commits the new slot.
const (
	// trialTimeout bounds the test boot: a firmware still unhealthy then
	// is failed and the box reboots into the old slot. A hang before it
	// is the hardware watchdog's (PID 1 stops petting only if it hangs).
	trialTimeout = 240 * time.Second
	// trialStable is how long every service must have run without a
	// restart.
	trialStable = 15 * time.Second
	// trialCrashLoop restarts of one service fail the test boot at once.
	trialCrashLoop = 4
	trialPoll      = 2 * time.Second
	// trialRecordWait is how long the end of a test boot waits for the
	// boot partition when another process reads it (configd listing the
	// slots for the web UI: well under a second, even emulated).
	trialRecordWait = time.Minute
)

// Files of the configuration the upgrade keeps for the old slot.
const (
	cfgDB         = paths.ConfigDB
	cfgPreUpgrade = paths.ConfigDir + "/pre-bootslot.db" // the database as the old firmware left it; empty: there was none
)

// slotBoot is what PID 1 decided about slots at boot.
type slotBoot struct {
	status bootslot.Status
	trial  *bootslot.Record // non-nil: a test boot to check and commit
}

// upgradeAtBoot reads the ADV and acts on the last upgrade before any
// service runs: on a test boot it keeps a copy of the configuration for
// the old firmware; on the old slot after a test boot that never committed
// (a panic, a hang the watchdog reset, a power cut) it records the failure;
// after any failure it puts the old configuration back.
func (in *initProc) upgradeAtBoot() {
	st := bootslot.Status{RunningSlot: in.params.Slot, RunningVersion: in.params.Version}
	defer func() {
		in.mu.Lock()
		in.slots.status = st
		in.mu.Unlock()
		in.writeUpgradeStatus()
	}()
	if in.params.Slot == "" {
		return // not booted from an A/B card
	}
	card, err := bootslot.OpenBox()
	if err != nil {
		in.logf("upgrade: %v", err)
		return
	}
	defer card.Close()
	boot, err := bootslot.ReadBoot(card.Vol)
	if err != nil {
		in.logf("upgrade: %v; slot %s is the default", err, boot.Committed)
	}
	st.DefaultSlot = boot.Committed
	rec := boot.Last
	running := in.params.Slot
	switch {
	case running != boot.Committed && rec != nil && rec.State == bootslot.StateTrial && rec.To == running:
		in.logf("upgrade: test boot of %s in slot %s (slot %s, %s, stays the default until the health checks pass)",
			rec.ToVersion, running, rec.From, rec.FromVersion)
		if err := snapshotConfig(); err != nil {
			in.logf("upgrade: keep the configuration for %s: %v", rec.FromVersion, err)
		} else {
			rec.Snapshot = true
			if err := bootslot.WriteBoot(card.Vol, boot); err != nil {
				in.logf("upgrade: record the configuration's copy: %v", err)
			}
		}
		st.Trial = true
		in.slots.trial = rec
	case running != boot.Committed:
		in.logf("upgrade: running slot %s, picked by hand; slot %s stays the default", running, boot.Committed)
	case rec != nil && rec.State == bootslot.StateTrial && rec.From == running:
		rec.State = bootslot.StateFailed
		rec.Reason = fmt.Sprintf("%s did not finish its test boot (kernel panic, PID 1 died, a hang the watchdog reset, or a power cut before its health checks passed)", rec.ToVersion)
		fallthrough
	case rec != nil && rec.State == bootslot.StateFailed && rec.From == running && !rec.Restored:
		// Only a copy made by this upgrade's test boot goes back: an
		// older one would undo later commits.
		if rec.Snapshot {
			if err := restoreConfig(); err != nil {
				in.logf("upgrade: put back the configuration of before the upgrade: %v", err)
			} else {
				in.logf("upgrade: the configuration of before the upgrade is back")
			}
		}
		rec.Restored = true
		if err := bootslot.WriteBoot(card.Vol, boot); err != nil {
			in.logf("upgrade: record the failed upgrade: %v", err)
		}
	}
	st.Last = rec
	st.Message = rec.Message(in.params.Version)
	if st.Message != "" {
		in.logf("%s", st.Message)
	}
}

func (in *initProc) writeUpgradeStatus() {
	in.mu.Lock()
	b, err := json.Marshal(in.slots.status)
	in.mu.Unlock()
	if err == nil {
		// World-readable: versions and slots, no secret; the web UI,
		// which runs as its own user, shows it.
		err = atomicfile.WriteFile(bootslot.StatusPath, b, 0o644)
	}
	if err != nil {
		in.logf("upgrade: status: %v", err)
	}
}

// checkTrial runs the test boot's health checks, then commits the slot or
// fails it and reboots into the old one.
func (in *initProc) checkTrial(rec *bootslot.Record) {
	start := time.Now()
	checks := healthChecks{status: func() ([]supervisor.ServiceStatus, bool) {
		sup := in.currentSupervisor()
		if sup == nil {
			return nil, false
		}
		return sup.Status(), true
	}, waitFor: rec.WaitFor, stable: trialStable}
	for {
		problem, fatal := checks.problem()
		in.mu.Lock()
		in.slots.status.Checking = problem
		in.mu.Unlock()
		in.writeUpgradeStatus()
		if problem == "" {
			in.finishTrial(rec, "")
			return
		}
		if fatal || time.Since(start) > trialTimeout {
			in.finishTrial(rec, problem)
			return
		}
		time.Sleep(trialPoll)
	}
}

func (in *initProc) finishTrial(rec *bootslot.Record, problem string) {
	card, err := bootslot.OpenBoxWaiting(trialRecordWait)
	if err != nil {
		// The result cannot be written, so this test boot would never
		// end: the web UI would show it in progress for good. The boot-once
		// is spent and the old slot is still the default, so a reboot
		// is the fallback, and the old firmware reports the test boot as
		// failed (see upgradeAtBoot).
		in.logf("upgrade: %v: cannot record the result of the test boot of slot %s; rebooting into slot %s (%s)", err, rec.To, rec.From, rec.FromVersion)
		in.mu.Lock()
		in.slots.status.Checking = "cannot record the result: " + err.Error()
		in.mu.Unlock()
		in.writeUpgradeStatus()
		if err := in.requestPower(supervisor.Reboot); err != nil {
			in.logf("upgrade: reboot: %v", err)
		}
		return
	}
	defer card.Close()
	boot, _ := bootslot.ReadBoot(card.Vol)
	r := *rec
	if problem == "" {
		r.State = bootslot.StateCommitted
		boot.Committed = rec.To
	} else {
		r.State = bootslot.StateFailed
		r.Reason = problem
	}
	boot.Once, boot.Last = "", &r
	if err := bootslot.WriteBoot(card.Vol, boot); err != nil {
		in.logf("upgrade: write the result of the test boot: %v", err)
	}
	in.mu.Lock()
	in.slots.status.Trial, in.slots.status.Checking = false, ""
	in.slots.status.Last, in.slots.status.DefaultSlot = &r, boot.Committed
	in.slots.status.Message = r.Message(in.params.Version)
	in.mu.Unlock()
	in.writeUpgradeStatus()
	if problem == "" {
		in.logf("upgrade: %s passed its health checks: slot %s is the default now", rec.ToVersion, rec.To)
		return
	}
	in.logf("upgrade: %s failed its health checks (%s); rebooting into slot %s (%s)", rec.ToVersion, problem, rec.From, rec.FromVersion)
	if err := in.requestPower(supervisor.Reboot); err != nil {
		in.logf("upgrade: reboot: %v", err)
	}
}

// healthChecks are what a test boot must pass.
type healthChecks struct {
	status      func() ([]supervisor.ServiceStatus, bool) // the supervisor's, false if it did not start
	waitFor     []string
	stable      time.Duration // how long each service must have run
	configdSock string        // default /run/flashgate/configd.sock
	webuiAddr   string        // default 127.0.0.1:443
}

// problem returns what is not healthy yet ("" when all is), and whether
// it is hopeless (a service in a crash loop).
func (h healthChecks) problem() (string, bool) {
	services, ok := h.status()
	if !ok {
		return "the supervisor did not start", true
	}
	for _, s := range services {
		// A binary the kernel will not run does not get better.
		if s.State == supervisor.StateBackoff && s.LastExitCode == -1 && strings.HasPrefix(s.LastExit, "exec ") {
			return fmt.Sprintf("%s cannot start: %s", s.Name, s.LastExit), true
		}
		if s.Restarts >= trialCrashLoop {
			last := s.LastExit
			if last == "" {
				last = "no exit status"
			}
			return fmt.Sprintf("%s restarted %d times (last: %s)", s.Name, s.Restarts, last), true
		}
		if s.State != supervisor.StateRunning {
			return fmt.Sprintf("%s is %s", s.Name, s.State), false
		}
		// configd with its database open, the console with its prompt.
		if s.NotReady {
			return fmt.Sprintf("%s runs but is not ready yet", s.Name), false
		}
		if up := s.Uptime.Std(); up < h.stable {
			return fmt.Sprintf("%s has run for %.0f s of %.0f", s.Name, up.Seconds(), h.stable.Seconds()), false
		}
	}
	sock := h.configdSock
	if sock == "" {
		sock = paths.ConfigdSocket
	}
	if err := httpOK("unix", sock, "/v1/status"); err != nil {
		return "configd does not answer: " + err.Error(), false
	}
	addr := h.webuiAddr
	if addr == "" {
		addr = "127.0.0.1:443"
	}
	// PID 1 holds the web UI's listening socket itself, so a connection
	// is accepted by the kernel whether or not the UI runs: the UI must
	// answer. A plain HTTP request on its TLS port is answered by Go's
	// HTTPS server with a 400 ("Client sent an HTTP request to an HTTPS
	// server"), which needs no TLS here (PID 1 links none).
	if status, err := httpStatus("tcp", addr, "/"); err != nil {
		return "the web UI does not answer: " + err.Error(), false
	} else if status != "400" {
		return "the web UI answers plain HTTP on its TLS port with " + status + ", not with the TLS server's 400", false
	}
	for _, name := range h.waitFor {
		if !hasIPv4(name) {
			return fmt.Sprintf("%s has no IPv4 address yet (it had one before the upgrade)", name), false
		}
	}
	return "", false
}

// httpOK sends a bare HTTP/1.0 GET (PID 1 links no HTTP client) and wants
// a 200.
func httpOK(network, addr, path string) error {
	status, err := httpStatus(network, addr, path)
	if err == nil && status != "200" {
		err = fmt.Errorf("answered %s", status)
	}
	return err
}

// httpStatus sends a bare HTTP/1.0 GET and returns the status code of
// the answer.
func httpStatus(network, addr, path string) (string, error) {
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(io.LimitReader(c, 256)).ReadString('\n')
	if err != nil {
		return "", err
	}
	f := strings.Fields(line)
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/") {
		return "", fmt.Errorf("answered %q, not HTTP", strings.TrimSpace(line))
	}
	return f[1], nil
}

func hasIPv4(name string) bool {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return false
	}
	addrs, _ := ifc.Addrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLinkLocalUnicast() {
			return true
		}
	}
	return false
}

// snapshotConfig copies the database as the old firmware left it, before
// the new configd opens (and may migrate) it. An empty copy says there was
// none.
func snapshotConfig() error {
	return withConfigWritable(func() error {
		b, err := os.ReadFile(cfgDB)
		if os.IsNotExist(err) {
			b, err = nil, nil
		}
		if err != nil {
			return err
		}
		return atomicfile.WriteFile(cfgPreUpgrade, b, 0o600)
	})
}

// restoreConfig puts the snapshot back as the database.
func restoreConfig() error {
	return withConfigWritable(func() error {
		b, err := os.ReadFile(cfgPreUpgrade)
		if os.IsNotExist(err) {
			return fmt.Errorf("no copy of it was kept (%s missing)", cfgPreUpgrade)
		}
		if err != nil {
			return err
		}
		if len(b) == 0 {
			if err := os.Remove(cfgDB); err != nil && !os.IsNotExist(err) {
				return err
			}
			return atomicfile.SyncDir(filepath.Dir(cfgDB))
		}
		return atomicfile.WriteFile(cfgDB, b, 0o600)
	})
}

// withConfigWritable runs f with /cfg mounted read-write; no service runs
// yet, so PID 1 is the only writer.
func withConfigWritable(f func() error) error {
	flags := uintptr(unix.MS_NOATIME | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_NOSUID)
	if err := unix.Mount("", paths.ConfigDir, "", unix.MS_REMOUNT|flags, ""); err != nil {
		return fmt.Errorf("remount /cfg read-write: %w", err)
	}
	err := f()
	if rerr := unix.Mount("", paths.ConfigDir, "", unix.MS_REMOUNT|unix.MS_RDONLY|flags, ""); rerr != nil && err == nil {
		err = fmt.Errorf("remount /cfg read-only: %w", rerr)
	}
	return err
}
