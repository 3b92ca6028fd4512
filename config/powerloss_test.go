package config

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The power-loss test runs a helper process (this test binary, re-executed)
// that commits in a loop, and kills it with SIGKILL at a random moment, 100
// times. Before each commit the helper prints the hash of the config it is
// about to commit, after it the hash it committed. After each kill the
// database must open cleanly and hold exactly the last committed config or
// the one being committed, nothing else. SIGKILL leaves what was written to
// the page cache; the qemu test (a real power cut) covers what the disk
// keeps.

const powerLossEnv = "FLASHGATE_POWERLOSS_DB"

func configHash(c *Config) string {
	h := sha256.Sum256(c.JSON())
	return hex.EncodeToString(h[:8])
}

// powerLossHelper is the child side; it never returns.
func powerLossHelper(path string) {
	s, err := Open(path, Options{LockTimeout: 5 * time.Second})
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(2)
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	testHash() // pay for the password hash before the clock starts
	fmt.Println("ready")
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; time.Now().Before(deadline) && i < 100000; i++ {
		// Vary the size so that records move between pages.
		c := sampleConfig(5 + rng.IntN(20))
		c.System.Hostname = fmt.Sprintf("h%d-%d", os.Getpid(), i)
		if _, err := s.ReplaceCandidate("", c); err != nil {
			fmt.Printf("error %v\n", err)
			os.Exit(2)
		}
		fmt.Printf("next %s\n", configHash(c))
		if _, err := s.Commit("powerloss", ""); err != nil {
			fmt.Printf("error %v\n", err)
			os.Exit(2)
		}
		fmt.Printf("done %s\n", configHash(c))
	}
	os.Exit(0)
}

func TestPowerLoss(t *testing.T) {
	if path := os.Getenv(powerLossEnv); path != "" {
		powerLossHelper(path)
	}
	rounds := 100
	if testing.Short() {
		rounds = 10
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.db")
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	committedTotal, midCommit := 0, 0
	for round := range rounds {
		s, err := Open(path, Options{})
		if err != nil {
			t.Fatalf("round %d: open before the helper: %v", round, err)
		}
		c, _ := s.Running()
		last := configHash(c)
		s.Close()

		cmd, lines := startWriter(t, round, "TestPowerLoss", powerLossEnv, path)
		time.Sleep(time.Duration(rng.IntN(120_000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("round %d: kill: %v", round, err)
		}
		var next string
		for l := range lines {
			kind, hash, _ := strings.Cut(l, " ")
			switch kind {
			case "next":
				next = hash
			case "done":
				if hash != next {
					t.Fatalf("round %d: helper finished %s while %s was next", round, hash, next)
				}
				last, next = hash, ""
				committedTotal++
			case "error":
				t.Fatalf("round %d: helper: %s", round, hash)
			}
		}
		cmd.Wait()
		if next != "" {
			midCommit++
		}

		s, err = Open(path, Options{})
		if err != nil {
			t.Fatalf("round %d: open after kill: %v", round, err)
		}
		if s.Recovered() != "" {
			t.Fatalf("round %d: database set aside after kill: %s", round, s.Recovered())
		}
		c, _ = s.Running()
		got := configHash(c)
		s.Close()
		if got != last && got != next {
			t.Fatalf("round %d: running config %s is neither the last committed (%s) nor the one being committed (%q)", round, got, last, next)
		}
	}
	t.Logf("%d kills (%d inside a commit), %d commits completed in the helpers", rounds, midCommit, committedTotal)
	if midCommit == 0 {
		t.Errorf("no kill landed inside a commit: the test proved nothing")
	}
}

// startWriter runs this test binary's test name as a helper process with
// env set to path and waits until it prints "ready" (a minute: the shared
// machine can be slow to start a process). The channel gives the rest of
// what it prints, and is closed when it exits.
func startWriter(t *testing.T, round int, name, env, path string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l := <-lines:
		if l != "ready" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: helper said %q", round, l)
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("round %d: helper did not start", round)
	}
	return cmd, lines
}
