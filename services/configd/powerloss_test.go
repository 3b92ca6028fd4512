package configd_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd"
)

// TestPowerLossConfigd kills configd itself (this test binary re-executed
// as configd) with SIGKILL at a random moment while a client commits
// through the API, 100 times. After each kill the database must open
// without being set aside and hold the last config whose commit was
// acknowledged or the one whose commit was in flight.

const configdHelperEnv = "FLASHGATE_CONFIGD_HELPER"

func hashConfig(t *testing.T, c *config.Config) string {
	n, err := config.Decode(c.JSON()) // normalized as configd stores it
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(n.JSON())
	return hex.EncodeToString(h[:8])
}

func tunnelConfig(n int, tag string) *config.Config {
	c := config.Default()
	c.System.Hostname = tag
	for i := range n {
		t := config.NewTunnel(fmt.Sprintf("t%02d", i))
		t.RemoteAddress = config.MustAddr(fmt.Sprintf("192.0.2.%d", i+1))
		t.PSK = config.NewSecret("powerloss-psk-0123456789")
		t.LocalSubnets = []config.Prefix{config.MustPrefix("192.168.1.0/24")}
		t.RemoteSubnets = []config.Prefix{config.MustPrefix(fmt.Sprintf("10.%d.0.0/16", i+1))}
		c.Tunnels = append(c.Tunnels, t)
	}
	return c
}

func TestPowerLossConfigd(t *testing.T) {
	if dir := os.Getenv(configdHelperEnv); dir != "" {
		os.Exit(configd.Main([]string{"-db", filepath.Join(dir, "config.db"), "-socket", filepath.Join(dir, "c.sock"), "-cfg", ""}))
	}
	rounds := 100
	if testing.Short() {
		rounds = 10
	}
	dir := shortDir(t)
	db := filepath.Join(dir, "config.db")
	sock := filepath.Join(dir, "c.sock")
	rng := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
	ctx := context.Background()
	acked, inflightKills := 0, 0
	for round := range rounds {
		s, err := config.Open(db, config.Options{})
		if err != nil {
			t.Fatalf("round %d: open: %v", round, err)
		}
		c, _ := s.Running()
		last := hashConfig(t, c)
		s.Close()

		cmd := exec.Command(os.Args[0], "-test.run=^TestPowerLossConfigd$", "-test.count=1")
		cmd.Env = append(os.Environ(), configdHelperEnv+"="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cl := configdapi.New(sock)
		up := false
		for range 200 {
			if _, err := cl.Status(ctx); err == nil {
				up = true
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !up {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: configd did not come up", round)
		}
		killed := make(chan struct{})
		time.AfterFunc(time.Duration(rng.IntN(80_000))*time.Microsecond, func() {
			cmd.Process.Signal(syscall.SIGKILL)
			close(killed)
		})
		next := ""
	commits:
		for i := 0; ; i++ {
			select {
			case <-killed:
				break commits
			default:
			}
			cfg := tunnelConfig(3+rng.IntN(20), fmt.Sprintf("r%d-%d", round, i))
			next = hashConfig(t, cfg)
			if _, err := cl.ReplaceCandidate(ctx, "", cfg); err != nil {
				next = "" // the candidate is in memory: a failed edit commits nothing
				break
			}
			if _, err := cl.Commit(ctx, configdapi.CommitRequest{Who: "powerloss"}); err != nil {
				break
			}
			last, next = next, ""
			acked++
		}
		<-killed
		cmd.Wait()
		if next != "" {
			inflightKills++
		}
		s, err = config.Open(db, config.Options{})
		if err != nil {
			t.Fatalf("round %d: open after kill: %v", round, err)
		}
		if r := s.Recovered(); r != "" {
			t.Fatalf("round %d: database set aside after kill: %s", round, r)
		}
		c, _ = s.Running()
		got := hashConfig(t, c)
		s.Close()
		if got != last && got != next {
			t.Fatalf("round %d: running config %s is neither the acknowledged one (%s) nor the one in flight (%q)", round, got, last, next)
		}
		os.Remove(sock)
	}
	t.Logf("%d kills of configd (%d with a commit in flight), %d commits acknowledged", rounds, inflightKills, acked)
	if inflightKills == 0 {
		t.Error("no kill landed during a commit: the test proved nothing")
	}
}
