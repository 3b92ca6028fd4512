package testnet

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// WireGuardBinary returns the path of wireguard-go, the userspace tunnel
// flashgate's data plane is measured against. scripts/setup.sh does not
// install it (it is a benchmark anchor, not a dependency); `make bench` does,
// with `go install golang.zx2c4.com/wireguard@<pinned version>`.
func WireGuardBinary() (string, error) {
	for _, p := range []string{os.Getenv("WIREGUARD_GO"), filepath.Join(os.Getenv("HOME"), "go/bin/wireguard"), "/root/go/bin/wireguard"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("wireguard-go"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("wireguard-go is not installed: go install golang.zx2c4.com/wireguard@latest (make bench does this)")
}

// WireGuardLink is a wireguard-go tunnel between two gateways of a
// SiteToSite topology, routing LANA <-> LANB.
type WireGuardLink struct {
	procs []*exec.Cmd
	done  []chan struct{}
}

// StartWireGuard brings up wireguard-go on both gateways of s. The
// processes are stopped by PID when the test ends.
func StartWireGuard(t testing.TB, s *SiteToSite) *WireGuardLink {
	t.Helper()
	bin, err := WireGuardBinary()
	if err != nil {
		t.Fatal(err)
	}
	RequireTool(t, "wg", "wireguard-tools")
	dir := t.TempDir()
	key := func(name string) (priv, pub string) {
		k, err := exec.Command("wg", "genkey").Output()
		if err != nil {
			t.Fatalf("wg genkey: %v", err)
		}
		privPath := filepath.Join(dir, name)
		if err := os.WriteFile(privPath, k, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("wg", "pubkey")
		cmd.Stdin = strings.NewReader(string(k))
		p, err := cmd.Output()
		if err != nil {
			t.Fatalf("wg pubkey: %v", err)
		}
		return privPath, strings.TrimSpace(string(p))
	}
	privA, pubA := key("a")
	privB, pubB := key("b")
	l := &WireGuardLink{}
	t.Cleanup(l.Stop)
	type end struct {
		ns                 *NS
		priv, peerPub      string
		peerWAN            netip.Addr
		remoteLAN, tunAddr string
		ifname             string
	}
	// wireguard-go keeps its control socket in /var/run/wireguard, and wg
	// looks for it there. Namespaces share the host's file system: both
	// run with a /run of this test's own (a private mount namespace with
	// a directory bound on /run, as for charon), so that nothing is made
	// in the host's /run, and a killed test leaves no socket behind.
	run := filepath.Join(dir, "run")
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	privateRun := func(args ...string) []string {
		return append([]string{"unshare", "-m", "--propagation", "private",
			"sh", "-c", `mount --bind "$0" /run && exec "$@"`, run}, args...)
	}
	p := Prefix()
	for _, e := range []end{
		{s.GwA, privA, pubB, s.GwBWAN, s.LANB.String(), "10.99.0.1/30", p + "a"},
		{s.GwB, privB, pubA, s.GwAWAN, s.LANA.String(), "10.99.0.2/30", p + "b"},
	} {
		// ip netns exec, unshare and sh exec in turn: the PID is
		// wireguard-go's.
		cmd := e.ns.Command(privateRun(bin, "-f", e.ifname)...)
		cmd.Env = append(os.Environ(), "LOG_LEVEL=error")
		if err := cmd.Start(); err != nil {
			t.Fatalf("start wireguard-go in %s: %v", e.ns.Name, err)
		}
		done := make(chan struct{})
		l.procs, l.done = append(l.procs, cmd), append(l.done, done)
		go func() { cmd.Wait(); close(done) }()
		deadline := time.Now().Add(5 * time.Second)
		for e.ns.Run("ip", "link", "show", e.ifname) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("wireguard-go in %s made no %s within 5 s", e.ns.Name, e.ifname)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, c := range [][]string{
			privateRun("wg", "set", e.ifname, "private-key", e.priv, "listen-port", "51820",
				"peer", e.peerPub, "allowed-ips", e.remoteLAN, "endpoint", e.peerWAN.String()+":51820"),
			{"ip", "addr", "add", e.tunAddr, "dev", e.ifname},
			{"ip", "link", "set", e.ifname, "mtu", "1420", "up"},
			{"ip", "route", "add", e.remoteLAN, "dev", e.ifname},
		} {
			if err := e.ns.Run(c...); err != nil {
				t.Fatal(err)
			}
		}
	}
	return l
}

// Stop ends both wireguard-go processes by PID: SIGTERM, then SIGKILL
// after 3 s. It returns once they have exited, so that the test's
// directory, which holds their /run, can be removed.
func (l *WireGuardLink) Stop() {
	for _, cmd := range l.procs {
		unix.Kill(cmd.Process.Pid, unix.SIGTERM)
	}
	for i, cmd := range l.procs {
		select {
		case <-l.done[i]:
		case <-time.After(3 * time.Second):
			unix.Kill(cmd.Process.Pid, unix.SIGKILL)
			<-l.done[i]
		}
	}
	l.procs, l.done = nil, nil
}
