package configd_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/services/configd/configdapi"

	"github.com/flashgate/flashgate/boards"
	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd"
)

// ports renders a configuration's interfaces as "eth0=wan eth1=lan", so
// that a failure shows the whole list at once.
func ports(c *config.Config) string {
	var out []string
	for _, ifc := range c.Interfaces {
		out = append(out, ifc.Name+"="+ifc.Role)
	}
	return strings.Join(out, " ")
}

func boardPorts(nics []boards.NIC) string {
	var out []string
	for _, n := range nics {
		out = append(out, n.Name+"="+n.Role)
	}
	return strings.Join(out, " ")
}

func TestBoardDefaultsNameEveryPortOfTheBoard(t *testing.T) {
	for _, b := range boards.All() {
		t.Run(b.Name, func(t *testing.T) {
			want := boardPorts(b.NICs)
			if len(b.NICs) == 0 {
				// An unsupported board (net4501) need not list its
				// ports; a supported one must, or its defaults are
				// a guess.
				if b.Unsupported == "" {
					t.Fatalf("supported board %s lists no NICs", b.Name)
				}
				want = "eth0=wan eth1=lan"
			}
			c := config.BoardDefaults(b)
			if got := ports(c); got != want {
				t.Errorf("defaults name ports %q, want the board's %q", got, want)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("defaults for %s do not validate: %v", b.Name, err)
			}
			// The box must be reachable after a first boot: the
			// WAN port runs DHCP and, where the board has a LAN
			// port, the first one answers on 192.168.1.1.
			for _, ifc := range c.Interfaces {
				if ifc.Role == config.RoleWAN && (!ifc.Enabled || ifc.Addressing != config.AddressingDHCP) {
					t.Errorf("WAN port %s: enabled %v, addressing %s; want enabled, dhcp", ifc.Name, ifc.Enabled, ifc.Addressing)
				}
			}
			if i := slices.IndexFunc(b.NICs, func(n boards.NIC) bool { return n.Role == "lan" }); i >= 0 {
				lan := c.Interfaces[i]
				if !lan.Enabled || len(lan.Addresses) != 1 || lan.Addresses[0].String() != "192.168.1.1/24" {
					t.Errorf("first LAN port %s: enabled %v, addresses %v; want enabled on 192.168.1.1/24", lan.Name, lan.Enabled, lan.Addresses)
				}
			}
		})
	}
}

// runConfigd starts configd.Main with args and returns its client once it
// answers, and a function that stops it (SIGTERM, as PID 1 does) and
// waits for it to return.
func runConfigd(t *testing.T, sock string, args ...string) (*configdapi.Client, func()) {
	t.Helper()
	done := make(chan int, 1)
	go func() { done <- configd.Main(append([]string{"-socket", sock, "-cfg", ""}, args...)) }()
	c := configdapi.New(sock)
	var err error
	for range 100 {
		if _, err = c.Status(context.Background()); err == nil {
			break
		}
		select {
		case rc := <-done:
			t.Fatalf("configd %q exited with %d before serving", args, rc)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err != nil {
		t.Fatalf("configd %q does not answer: %v", args, err)
	}
	return c, func() {
		t.Helper()
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
		select {
		case rc := <-done:
			if rc != 0 {
				t.Errorf("configd %q returned %d", args, rc)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("configd %q did not stop on SIGTERM", args)
		}
	}
}

func runningPorts(t *testing.T, c *configdapi.Client) string {
	t.Helper()
	cfg, _, err := c.Running(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ports(cfg)
}

func TestMain_BoardPortsOnFirstBootResetAndSetAside(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, "c.sock")
	ctx := context.Background()
	alix, err := boards.Lookup("alix2d13")
	if err != nil {
		t.Fatal(err)
	}
	want := boardPorts(alix.NICs)

	// First boot.
	db := filepath.Join(dir, "first.db")
	c, stop := runConfigd(t, sock, "-db", db, "-board", "alix2d13")
	if got := runningPorts(t, c); got != want {
		t.Errorf("first boot on alix2d13: ports %q, want %q", got, want)
	}
	// Factory reset after the ports were changed.
	cand, err := c.Candidate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	etag, err := c.Delete(ctx, cand.Etag, "interfaces.eth2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Commit(ctx, configdapi.CommitRequest{Etag: etag, Who: "test", Message: "drop eth2"}); err != nil {
		t.Fatal(err)
	}
	if got := runningPorts(t, c); strings.Contains(got, "eth2") {
		t.Fatalf("eth2 still configured after deleting it: %q", got)
	}
	if _, err := c.FactoryReset(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if got := runningPorts(t, c); got != want {
		t.Errorf("factory reset on alix2d13: ports %q, want %q", got, want)
	}
	stop()

	// A corrupt database is set aside and replaced by the board's defaults.
	db = filepath.Join(dir, "corrupt.db")
	if err := os.WriteFile(db, bytes.Repeat([]byte("junk"), 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	c, stop = runConfigd(t, sock, "-db", db, "-board", "alix2d13")
	if st, err := c.Status(ctx); err != nil || !strings.Contains(st.Recovered, "set-aside") {
		t.Errorf("corrupt database not reported as set aside: %+v, %v", st, err)
	}
	if got := runningPorts(t, c); got != want {
		t.Errorf("set-aside database on alix2d13: ports %q, want %q", got, want)
	}
	stop()

	// A board configd does not know, or none: the classic two ports.
	for i, args := range [][]string{{"-board", "no-such-board"}, {}} {
		db := filepath.Join(dir, fmt.Sprintf("fallback%d.db", i))
		c, stop := runConfigd(t, sock, append([]string{"-db", db}, args...)...)
		if got := runningPorts(t, c); got != "eth0=wan eth1=lan" {
			t.Errorf("configd %q: ports %q, want the fallback eth0=wan eth1=lan", args, got)
		}
		stop()
	}
}
