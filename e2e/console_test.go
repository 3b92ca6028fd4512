package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/images/imagestest"
)

// kernelMessage is a kernel message the console interleaves with our
// session, wherever it starts ("flashgate login: [    8.05] e1000: ...").
var kernelMessage = regexp.MustCompile(`\[ *\d+\.\d{6}\] [^\n]*\n?`)

// consoleText is what a command printed, without CRs and kernel messages.
func consoleText(s string) string {
	s = strings.ReplaceAll(s, "\r", "")
	return kernelMessage.ReplaceAllString(s, "")
}

// checkConsoleTunnel is issue 9's VM check: through the serial port, add
// a tunnel with set, commit, and see it in show tunnels.
func checkConsoleTunnel(t *testing.T, s *imagestest.Serial) {
	for _, l := range consoleTunnelLines() {
		s.CLI(l)
	}
	diff := consoleText(s.CLI("show diff"))
	for _, want := range []string{
		"+ set tunnels wan remote_address " + wanProbe.String(),
		"+ set tunnels wan psk <redacted>",
		"+ set tunnels wan start_action respond",
	} {
		if !strings.Contains(diff, want) {
			t.Errorf("show diff after the set commands lacks %q:\n%s", want, diff)
		}
	}
	if strings.Contains(diff, pskWAN) {
		t.Errorf("show diff printed the pre-shared key:\n%s", diff)
	}
	if out := consoleText(s.CLI("commit e2e: tunnel to the WAN probe")); !regexp.MustCompile(`Committed revision \d+\.`).MatchString(out) {
		t.Fatalf("commit printed:\n%s\nwant Committed revision N.", out)
	}
	// iked's status line for the tunnel: "wan: DOWN since 2s ago, data
	// plane ...", once iked has read the new configuration.
	line := regexp.MustCompile(`(?m)^wan: [A-Z]+ since `)
	deadline := time.Now().Add(30 * time.Second)
	for {
		tunnels := consoleText(s.CLI("show tunnels"))
		if line.MatchString(tunnels) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("show tunnels 30 s after the commit:\n%s\nwant iked's line for tunnel wan (\"wan: STATE since ...\")", tunnels)
		}
		time.Sleep(2 * time.Second)
	}
}

// confirmWindow is the commit-confirmed window the test uses: the issue
// asks for `commit confirmed 1`, one minute.
const confirmWindow = time.Minute

// startUnconfirmedCommit adds tunnel "later" and commits it with
// `commit confirmed 1`; it returns when the commit is running.
func startUnconfirmedCommit(t *testing.T, s *imagestest.Serial) time.Time {
	for _, l := range []string{
		"set tunnels.later.remote_address 10.10.0.20",
		"set tunnels.later.psk e2e-psk-that-is-rolled-back-0123",
		"set tunnels.later.local_subnets 192.168.1.0/24",
		"set tunnels.later.remote_subnets 10.10.20.0/24",
	} {
		s.CLI(l)
	}
	out := consoleText(s.CLI("commit confirmed 1 e2e: never confirmed"))
	at := time.Now()
	if !strings.Contains(out, "unless you type confirm") {
		t.Fatalf("commit confirmed 1 printed:\n%s\nwant \"Committed revision N. It is rolled back in 1m0s unless you type confirm.\"", out)
	}
	if running := consoleText(s.CLI("show config running tunnels.later")); !strings.Contains(running, "set tunnels later remote_address 10.10.0.20") {
		t.Fatalf("right after commit confirmed, show config running tunnels.later:\n%s\nwant its remote_address", running)
	}
	return at
}

// historyRow is a row of show history: revision, time (UTC), who, reason.
var historyRow = regexp.MustCompile(`(?m)^ *\d+  (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)  \S+ +(\S+) `)

// checkRolledBack waits, on the console, for configd to roll the
// unconfirmed commit back by itself, and checks what is running then.
func checkRolledBack(t *testing.T, s *imagestest.Serial, committed time.Time) {
	// Nothing to see before the window ends: keep the console quiet.
	time.Sleep(time.Until(committed.Add(confirmWindow - 5*time.Second)))
	deadline := committed.Add(confirmWindow + 90*time.Second)
	var history string
	for {
		history = consoleText(s.CLI("show history"))
		if strings.Contains(history, "confirm-timeout") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after commit confirmed 1 there is no confirm-timeout revision:\n%s", time.Since(committed).Round(time.Second), history)
		}
		time.Sleep(3 * time.Second)
	}
	// The box's own times of the two revisions say when it rolled back,
	// whenever we looked.
	when := map[string]time.Time{}
	for _, m := range historyRow.FindAllStringSubmatch(history, -1) {
		if at, err := time.Parse(time.DateTime, m[1]); err == nil {
			when[m[2]] = at
		}
	}
	cc, ct := when["commit-confirmed"], when["confirm-timeout"]
	if cc.IsZero() || ct.IsZero() {
		t.Fatalf("show history lacks the times of the commit-confirmed and confirm-timeout revisions:\n%s", history)
	}
	took := ct.Sub(cc)
	t.Logf("rolled back by itself %s after commit confirmed 1 (box's clock); seen %.0f s after it", took, time.Since(committed).Seconds())
	// The times are whole seconds: allow for their truncation.
	if took < confirmWindow-2*time.Second || took > confirmWindow+30*time.Second {
		t.Errorf("rolled back %s after commit confirmed 1; want when the %s window ends", took, confirmWindow)
	}
	running := consoleText(s.CLI("show config running tunnels"))
	if strings.Contains(running, "set tunnels later") {
		t.Errorf("after the rollback the running configuration still has tunnel later:\n%s", running)
	}
	if !strings.Contains(running, "set tunnels wan remote_address") {
		t.Errorf("after the rollback the running configuration lost tunnel wan, committed before:\n%s", running)
	}
}
