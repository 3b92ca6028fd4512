package iked

import (
	"bytes"
	"context"
	"encoding/json"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/internal/testnet"
	"github.com/flashgate/flashgate/ipsec"
	"github.com/flashgate/flashgate/ipsec/iked/ikedapi"
	"github.com/flashgate/flashgate/services/configd/configdapi"
	"github.com/flashgate/flashgate/services/configd/configdtest"
)

// runMainEnv makes the test binary run Main instead of the tests, so that
// the daemon can be started, killed and restarted as its own process, the
// way the supervisor runs `flashgate iked`.
const runMainEnv = "FLASHGATE_IKED_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Exit(Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// lockedBuffer collects a child's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ikedProcess is `flashgate iked` running in a namespace.
type ikedProcess struct {
	cmd  *exec.Cmd
	log  *lockedBuffer
	done chan struct{}
	err  error
}

func startMain(t testing.TB, ns *testnet.NS, args ...string) *ikedProcess {
	t.Helper()
	p := &ikedProcess{log: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = ns.Command(append([]string{os.Args[0]}, args...)...)
	p.cmd.Env = append(os.Environ(), runMainEnv+"=1")
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start iked: %v", err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.signal(unix.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("iked (PID %d) log:\n%s", p.cmd.Process.Pid, p.log)
		}
	})
	return p
}

// signal signals the process by PID (ip netns exec execs into it).
func (p *ikedProcess) signal(sig unix.Signal) {
	select {
	case <-p.done:
	default:
		unix.Kill(p.cmd.Process.Pid, sig)
	}
}

func (p *ikedProcess) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("iked did not exit within %v; log:\n%s", timeout, p.log)
		return nil
	}
}

// waitAPI polls the API socket until the tunnel reaches state.
func waitAPI(t testing.TB, c *ikedapi.Client, name string, state ipsec.TunnelState, timeout time.Duration) ipsec.TunnelStatus {
	t.Helper()
	var last ipsec.TunnelStatus
	var lastErr error
	ok := waitFor(timeout, func() bool {
		ts, err := c.Tunnels(context.Background())
		lastErr = err
		for _, s := range ts {
			if s.Name == name {
				last = s
				return s.State == state
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("tunnel %s not %s within %v over the API: last %s %q (error %v)", name, state, timeout, last.State, last.Reason, lastErr)
	}
	return last
}

func writeConfig(t testing.TB, path string, tunnels ...config.Tunnel) {
	t.Helper()
	c := config.Default()
	c.Tunnels = tunnels
	if err := c.Validate(); err != nil {
		t.Fatalf("test configuration: %v", err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMainProcess runs `flashgate iked -config FILE` as its own process
// against strongSwan: it logs which data plane and why, serves
// `flashgate ipsec status` on its socket, deletes every SA on SIGTERM;
// after a crash (SIGKILL, no DELETE) a restarted daemon that only responds
// gets the tunnel back from strongSwan's dead peer detection (dpd_action =
// restart).
func TestMainProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	s := testnet.NewSiteToSite(t)
	peer := charonConn(s, lifecycleIKE, lifecycleESP, "none")
	peer.DPDDelay = 2 * time.Second
	charon := testnet.StartCharon(t, s.GwB, peer)
	dir := t.TempDir()
	initiate, respond := filepath.Join(dir, "initiate.json"), filepath.Join(dir, "respond.json")
	writeConfig(t, initiate, tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, lifecycleIKE, lifecycleESP, config.StartInitiate))
	writeConfig(t, respond, tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, lifecycleIKE, lifecycleESP, config.StartRespond))
	sock := filepath.Join(dir, "iked.sock")
	api := ikedapi.NewClient(sock)
	charonSAs := func() int {
		sas, err := charon.SAs()
		if err != nil {
			t.Fatal(err)
		}
		return len(sas)
	}

	p := startMain(t, s.GwA, "-config", initiate, "-socket", sock, "-dataplane", "auto")
	st := waitAPI(t, api, "s2s", ipsec.StateUp, 15*time.Second)
	if m := regexp.MustCompile(`iked: data plane (userspace|xfrm) \((.+)\)`).FindStringSubmatch(p.log.String()); m == nil || m[1] != st.DataPlane {
		t.Errorf("the log does not say which data plane (%s) and why:\n%s", st.DataPlane, p.log)
	} else {
		t.Logf("logged: data plane %s (%s)", m[1], m[2])
	}
	if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
		t.Fatal(err)
	}

	// SIGHUP reloads the file: an unchanged tunnel keeps its SAs, a
	// changed one is renegotiated.
	p.signal(unix.SIGHUP)
	time.Sleep(500 * time.Millisecond)
	if again := waitAPI(t, api, "s2s", ipsec.StateUp, time.Second); again.IKE == nil || again.IKE.InitiatorSPI != st.IKE.InitiatorSPI {
		t.Errorf("SIGHUP with the same file replaced the IKE SA: %+v, was %+v", again.IKE, st.IKE)
	}
	changed := tunnelConfig(s.GwAWAN, s.GwBWAN, "gwA", "gwB", s.LANA, s.LANB, lifecycleIKE, lifecycleESP, config.StartInitiate)
	changed.DPDInterval = config.Seconds(20)
	writeConfig(t, initiate, changed)
	p.signal(unix.SIGHUP)
	if !waitFor(10*time.Second, func() bool {
		ts, err := api.Tunnels(context.Background())
		return err == nil && len(ts) == 1 && ts[0].State == ipsec.StateUp && ts[0].IKE != nil && ts[0].IKE.InitiatorSPI != st.IKE.InitiatorSPI
	}) {
		t.Fatalf("SIGHUP with a changed tunnel did not renegotiate it")
	}
	if !waitFor(3*time.Second, func() bool { return charonSAs() == 1 }) {
		t.Errorf("strongSwan has %d IKE_SAs after the reload, want the new one only", charonSAs())
	}
	st = waitAPI(t, api, "s2s", ipsec.StateUp, time.Second)

	// `flashgate ipsec status` against the live socket.
	var out, errOut bytes.Buffer
	if code := statusMain([]string{"-socket", sock}, &out, &errOut); code != 0 {
		t.Fatalf("ipsec status exited %d: %s", code, errOut.String())
	}
	t.Logf("ipsec status:\n%s", out.String())
	for _, want := range []string{"s2s: UP since", "data plane " + st.DataPlane, "IKE_SA ", lifecycleIKE, "CHILD_SA " + lifecycleESP,
		"local  " + s.LANA.String(), "remote " + s.LANB.String()} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ipsec status does not show %q", want)
		}
	}
	if stats, err := api.Stats(context.Background()); err != nil || stats.DataPlane != st.DataPlane {
		t.Errorf("GET /v1/stats: %+v, %v", stats, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rekey", "s2s", "ike"}, "s2s: rekeying"},
		{[]string{"rekey", "s2s"}, "s2s: rekeying"},
		{[]string{"stats"}, `"data_plane": "` + st.DataPlane + `"`},
	} {
		out.Reset()
		errOut.Reset()
		if code := ipsecMain(append([]string{"-socket", sock}, c.args...), &out, &errOut); code != 0 || !strings.Contains(out.String(), c.want) {
			t.Errorf("flashgate ipsec %v: exit %d, output %q %q, want %q", c.args, code, out.String(), errOut.String(), c.want)
		}
		time.Sleep(300 * time.Millisecond) // one rekey at a time
	}
	if code := ipsecMain([]string{"-socket", sock, "up"}, &out, &errOut); code != 2 {
		t.Errorf("flashgate ipsec up without a name: exit %d, want 2 (usage)", code)
	}
	if code := ipsecMain([]string{"-socket", sock, "up", "nosuch"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), `no tunnel named "nosuch"`) {
		t.Errorf("flashgate ipsec up nosuch: exit %d, %q", code, errOut.String())
	}
	waitAPI(t, api, "s2s", ipsec.StateUp, 5*time.Second)
	if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
		t.Fatalf("after the rekeys through the CLI: %v", err)
	}
	if code := statusMain([]string{"-socket", filepath.Join(dir, "nobody.sock")}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "iked is not answering") {
		t.Errorf("ipsec status with no daemon: exit %d, %q", code, errOut.String())
	}

	// SIGTERM: every SA deleted at both ends, the TUN and routes gone.
	p.signal(unix.SIGTERM)
	if err := p.wait(t, 5*time.Second); err != nil {
		t.Errorf("iked exited with %v after SIGTERM", err)
	}
	if !waitFor(3*time.Second, func() bool { return charonSAs() == 0 }) {
		t.Errorf("strongSwan still has %d IKE_SAs after our SIGTERM", charonSAs())
	}
	if routeTo(t, s.GwA, s.LANB.String()) {
		t.Errorf("route into the tunnel left behind after SIGTERM")
	}

	// Crash: SIGKILL sends nothing; strongSwan's SA lingers until its
	// DPD finds us gone and (dpd_action = restart) initiates again, which
	// a daemon that only responds accepts.
	p = startMain(t, s.GwA, "-config", initiate, "-socket", sock, "-dataplane", "auto")
	// strongSwan answers IKE_AUTH only once its IKE_SA is established, so
	// the moment we are up it holds the one it must keep after the crash.
	waitAPI(t, api, "s2s", ipsec.StateUp, 15*time.Second)
	p.signal(unix.SIGKILL)
	p.wait(t, 5*time.Second)
	if n := charonSAs(); n != 1 {
		b, _ := os.ReadFile(charon.Log)
		t.Fatalf("strongSwan has %d IKE_SAs after our crash, want the stale one; its log ends:\n%s", n, lastLogLines(string(b), 40))
	}
	crashed := time.Now()
	startMain(t, s.GwA, "-config", respond, "-socket", sock, "-dataplane", "auto")
	waitAPI(t, api, "s2s", ipsec.StateUp, 30*time.Second)
	t.Logf("back %v after the crash (strongSwan's DPD and restart)", time.Since(crashed).Round(100*time.Millisecond))
	if err := testnet.Ping(s.HostA, s.HostBIP, 2); err != nil {
		t.Fatalf("after our restart: %v", err)
	}
}

// TestFollowConfigd: on the appliance iked may start before configd. It
// runs no tunnels until configd answers, then applies the running
// configuration, and follows commits that change the tunnels.
func TestFollowConfigd(t *testing.T) {
	if testing.Short() {
		t.Skip("namespace test")
	}
	ns := testnet.NewNS(t, testnet.Prefix()+"-cd")
	if err := ns.Run("ip", "addr", "add", "192.0.2.1/24", "dev", "lo"); err != nil {
		t.Fatal(err)
	}
	d := startIked(t, ns)
	dir := t.TempDir()
	sock := filepath.Join(dir, "configd.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs lockedBuffer
	go d.Follow(ctx, configdapi.New(sock), log.New(&logs, "", 0).Printf)

	time.Sleep(time.Second)
	if n := len(d.Status()); n != 0 {
		t.Fatalf("%d tunnels before configd answered", n)
	}

	// configd comes up, with one tunnel in its running configuration.
	tun := config.NewTunnel("branch")
	tun.LocalAddress = config.MustAddr("192.0.2.1")
	tun.RemoteAddress = config.MustAddr("192.0.2.77")
	tun.PSK = config.NewSecret(testPSK)
	tun.LocalSubnets = []config.Prefix{config.MustPrefix("10.1.0.0/24")}
	tun.RemoteSubnets = []config.Prefix{config.MustPrefix("10.2.0.0/24")}
	tun.StartAction = config.StartRespond
	tun.ESPProposals = []string{config.DefaultESPProposal, "aes128-sha1"} // sha1: reported as weak
	cd := configdtest.Start(t, configdtest.Options{Dir: dir, Storage: "test", Store: config.Options{Defaults: func() *config.Config {
		c := config.Default()
		c.Tunnels = []config.Tunnel{tun}
		return c
	}}})
	defer cd.Stop()

	hasTunnel := func(name string) bool {
		for _, s := range d.Status() {
			if s.Name == name {
				return true
			}
		}
		return false
	}
	if !waitFor(10*time.Second, func() bool { return hasTunnel("branch") }) {
		t.Fatalf("configd came up but iked did not apply its tunnel; log:\n%s", logs.String())
	}
	for _, s := range d.Status() {
		if s.Name == "branch" && (len(s.Weak) != 1 || s.Weak[0] != "esp aes128-sha1: sha1") {
			t.Errorf("status of branch: weak %q, want the sha1 ESP proposal", s.Weak)
		}
	}
	if !strings.Contains(logs.String(), "connected to configd") {
		t.Errorf("no log line saying iked reached configd:\n%s", logs.String())
	}

	// A commit that removes the tunnel removes it from iked.
	cand, etag := cd.Store.Candidate()
	cand.Tunnels = []config.Tunnel{}
	if _, err := cd.Store.ReplaceCandidate(etag, cand); err != nil {
		t.Fatal(err)
	}
	if _, err := cd.Store.Commit("test", "remove the tunnel"); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return !hasTunnel("branch") }) {
		t.Fatalf("the committed removal did not reach iked; log:\n%s", logs.String())
	}
}

func lastLogLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
