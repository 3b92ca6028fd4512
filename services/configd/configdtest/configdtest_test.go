package configdtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/waitfor"

	"github.com/flashgate/flashgate/config"
	"github.com/flashgate/flashgate/services/configd/configdapi"
)

// follower records what configdapi.Follow applies.
type follower struct {
	mu    sync.Mutex
	revs  []uint64
	notes []string
}

func (f *follower) apply(ctx context.Context, cfg *config.Config, rev uint64, ch config.Change) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revs = append(f.revs, rev)
	return nil
}

func (f *follower) logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notes = append(f.notes, fmt.Sprintf(format, args...))
}

func (f *follower) applied() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprint(f.revs)
}

// Follow on the twin: the current configuration at start, then only the
// commits of the followed section; a failed read is tried again without a
// new commit.
func TestTwinFollow(t *testing.T) {
	tw := NewTwin(nil)
	var f follower
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go configdapi.Follow(ctx, tw, configdapi.Following{
		Sections: []config.Section{config.SectionTunnels}, Apply: f.apply, Logf: f.logf,
		RetryFirst: time.Millisecond, RetryMax: 5 * time.Millisecond,
	})
	waitfor.Cond(t, 10*time.Second, "the current configuration", func() bool { return f.applied() == "[1]" })

	cfg, _, _ := tw.Running(ctx)
	cfg.System.Hostname = "gw1"
	if ch := tw.Commit(cfg, "test"); fmt.Sprint(ch.Sections) != "[system]" || ch.Revision != 2 {
		t.Errorf("commit of the host name = %+v, want revision 2 changing [system]", ch)
	}
	cfg = cfg.Clone()
	cfg.Tunnels = append(cfg.Tunnels, config.Tunnel{Name: "hq"})
	tw.Fail(errors.New("configd GET /v1/running: connection refused"))
	tw.Commit(cfg, "test")
	waitfor.Cond(t, 10*time.Second, "a failed read", func() bool { return tw.Reads() >= 3 })
	tw.Fail(nil)
	waitfor.Cond(t, 10*time.Second, "the tunnels commit, after the retry", func() bool { return f.applied() == "[1 3]" })
}

// A real configd that restarts: the client's watch reconnects and Follow
// applies the current configuration again.
func TestServerRestart(t *testing.T) {
	s := Start(t, Options{Web: true})
	var f follower
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go configdapi.Follow(ctx, s.Client, configdapi.Following{Apply: f.apply, Logf: f.logf})
	waitfor.Cond(t, 10*time.Second, "the first configuration", func() bool { return f.applied() == "[1]" })
	if _, err := s.Client.Set(ctx, "", "system.hostname", "gw1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.Commit(ctx, configdapi.CommitRequest{Who: "test", Message: "name"}); err != nil {
		t.Fatal(err)
	}
	waitfor.Cond(t, 10*time.Second, "the commit", func() bool { return f.applied() == "[1 2]" })
	s.Restart()
	waitfor.Cond(t, 10*time.Second, "the restarted configd's current configuration", func() bool { return f.applied() == "[1 2 2]" })
	if st, err := s.WebClient.Status(ctx); err != nil || st.Revision != 2 {
		t.Errorf("restricted API status = %+v, %v; want revision 2", st, err)
	}
}

// The sockets as configd makes them on the box: the full API root's only,
// the restricted and the read-only API their groups' (0660); the read-only
// one hands out the running configuration and refuses the candidate.
func TestServerSockets(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the sockets are given to other groups")
	}
	s := Start(t, Options{Web: true, Read: true, WebGroup: 64044, ReadGroup: 64046})
	for _, tc := range []struct {
		sock string
		gid  uint32
		mode os.FileMode
	}{{s.Socket, 0, 0o600}, {s.WebSocket, 64044, 0o660}, {s.ReadSocket, 64046, 0o660}} {
		var st syscall.Stat_t
		if err := syscall.Stat(tc.sock, &st); err != nil || st.Gid != tc.gid || os.FileMode(st.Mode)&0o777 != tc.mode {
			t.Errorf("%s: gid %d mode %o (%v), want gid %d mode %o", tc.sock, st.Gid, st.Mode&0o777, err, tc.gid, tc.mode)
		}
	}
	ctx := context.Background()
	if _, rev, err := s.ReadClient.Running(ctx); err != nil || rev != 1 {
		t.Errorf("the read-only API's running configuration: revision %d, %v; want 1", rev, err)
	}
	if _, err := s.ReadClient.Candidate(ctx); err == nil {
		t.Error("the read-only API handed out the candidate")
	}
}
